"""Repair: the coherent forecast nearest to a stated one in Euclidean distance.

The coherent set is the convex hull of the incidence columns, so the projection is the
convex QP  min ||q - p||^2  s.t.  q = M pi,  pi in the simplex. Projecting onto a convex
set that contains every possible outcome vector moves the forecast closer to each of
them, so repair never raises the Brier score, whatever happens. HiGHS solves the QP;
one model per pattern of answered events (over the rows answered, atoms alike on them
merged) is reused across the sets of that pattern, changing only the linear costs.

Wolfe's minimum-norm-point algorithm finishes every projection from HiGHS's mixture
(`_polish`): it takes the mixture to its support's nearest point, then adds atoms while one
lies at an acute angle, (p - q).(M_j - q) > 0, to a tolerance relative to the move |q - p|
(the condition's left side shrinks with the move: an absolute one passed any coherent point
near a forecast 1e-9 from the set). HiGHS rounds an atom weight below about 5e-7 to zero,
and its regularisation leaves its answer up to 1e-12 off the projection. The result is
recomputed as M pi from the renormalised mixture (so it is exactly coherent) and checked
against that condition again; failing it (or when HiGHS gives no answer within its
iteration cap) Wolfe's algorithm starts from the atom nearest to the forecast. Atoms alike
on a set's answered events are merged first (one point of the hull; repeated columns
stalled HiGHS). A repair that moves no probability by more than 1e-12 returns the stated
forecast itself (`ROUNDING_MOVE`); every result is in [0, 1].
"""

from __future__ import annotations

import math

import highspy
import numpy as np
import numpy.typing as npt

from scoring.highs import new_highs, run
from scoring.inputs import FloatArray, as_incidence, as_probs

#: Largest violation of the optimality condition accepted, per unit of the move |q - p|: how
#: far an atom may lie on the stated forecast's side of the plane through q normal to p - q.
#: Relative, since the condition's left side shrinks with the move: an absolute 1e-9 passed
#: any coherent point within about 1e-9 of a forecast that near the set (exclusive events,
#: stated (1, 1e-9, 0, 0, 0), came back (1, 0, 0, 0, 0), not (1 - 5e-10, 5e-10, 0, 0, 0), its
#: Brier score up 4e-10, and repairing a repaired forecast moved it again).
OPTIMALITY_TOLERANCE = 1e-9
#: The violation accepted whatever the move, per answered event: its floating-point rounding
#: (about 3e-15 over 14 events at the exact projection of a forecast 1e-8 from the set, where
#: the move is not much above the rounding of M pi). A point this far from optimal is within
#: about this distance of the projection.
OPTIMALITY_FLOOR = 1e-14
#: A repair that moves no probability by more than this is the rounding of a coherent
#: forecast's own mixture (it made the Brier change of coherent sets +3e-14, where the
#: README says repair never raises it): the stated forecast is returned as it is.
ROUNDING_MOVE = 1e-12
#: HiGHS's time for one set's QP; past it Wolfe's algorithm answers alone. A referee's
#: matrix with repeated columns kept HiGHS's active-set solver going for minutes, memory
#: growing (repeated atoms are now merged first, and iterations capped below).
QP_TIME_LIMIT_S = 10.0
#: HiGHS's QP iterations for one set, per variable, beyond a floor: a referee's two-event
#: set 3e-7 from 0 and 1 over three atoms cycled until `QP_TIME_LIMIT_S` (10 s a set); a
#: well-posed QP needs about one active-set change per variable. Past it, Wolfe answers.
QP_ITERATIONS_PER_VARIABLE = 10
QP_ITERATION_FLOOR = 1000


class _ProjectionModel:
    """Columns (pi: m, q: n); rows q_i - (M pi)_i = 0 for each event, then sum pi = 1."""

    def __init__(self, incidence: FloatArray) -> None:
        n, m = incidence.shape
        self.n, self.m = n, m
        block = np.zeros((n + 1, m + n))
        block[:n, :m] = -incidence
        block[np.arange(n), m + np.arange(n)] = 1.0
        block[n, :m] = 1.0
        col_of, row_of = np.nonzero(block.T)
        inf = highspy.kHighsInf

        lp = highspy.HighsLp()
        lp.num_col_ = m + n
        lp.num_row_ = n + 1
        lp.col_cost_ = np.zeros(m + n)
        lp.col_lower_ = np.concatenate((np.zeros(m), np.full(n, -inf)))
        lp.col_upper_ = np.full(m + n, inf)
        lp.row_lower_ = np.concatenate((np.zeros(n), [1.0]))
        lp.row_upper_ = np.concatenate((np.zeros(n), [1.0]))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.concatenate(
            ([0], np.cumsum(np.bincount(col_of, minlength=m + n)))
        ).astype(np.int32)
        lp.a_matrix_.index_ = row_of.astype(np.int32)
        lp.a_matrix_.value_ = block[row_of, col_of]

        # HiGHS minimises c.x + x'Qx/2, so Q = 2I on q gives ||q||^2 - 2 p.q.
        hessian = highspy.HighsHessian()
        hessian.dim_ = m + n
        hessian.format_ = highspy.HessianFormat.kTriangular
        hessian.start_ = np.concatenate((np.zeros(m + 1), np.arange(1, n + 1))).astype(np.int32)
        hessian.index_ = (m + np.arange(n)).astype(np.int32)
        hessian.value_ = np.full(n, 2.0)

        model = highspy.HighsModel()
        model.lp_ = lp
        model.hessian_ = hessian
        self._highs = new_highs()
        self._highs.setOptionValue("primal_feasibility_tolerance", 1e-10)
        self._highs.setOptionValue("dual_feasibility_tolerance", 1e-10)
        # The atom weights carry no curvature, so the active-set solver regularises them;
        # its default (1e-7) biases the projection by about that much.
        self._highs.setOptionValue("qp_regularization_value", 1e-12)
        self._highs.setOptionValue("time_limit", QP_TIME_LIMIT_S)
        self._highs.setOptionValue(
            "qp_iteration_limit", QP_ITERATION_FLOOR + QP_ITERATIONS_PER_VARIABLE * (m + n)
        )
        if self._highs.passModel(model) == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the repair QP")
        self._q_cols = (m + np.arange(n)).astype(np.int32)

    def weights(self, probs: FloatArray) -> FloatArray | None:
        """The optimal mixture over atoms for one fully answered set; None when HiGHS does
        not reach an optimum within its iteration cap or `QP_TIME_LIMIT_S`."""
        self._highs.changeColsCost(self.n, self._q_cols, -2.0 * probs)
        run(self._highs)
        if self._highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None  # Wolfe's algorithm finishes from the nearest atom (`_project`)
        values = np.asarray(self._highs.getSolution().col_value, dtype=np.float64)
        pi = np.clip(values[: self.m], 0.0, None)
        if not pi.sum() > 0:
            return None
        return np.asarray(pi / pi.sum(), dtype=np.float64)


def _violation(points: FloatArray, x: FloatArray) -> float:
    """How far `x` (a point of conv{points' columns}, relative to the stated forecast) is
    from the projection's optimality condition: max_j x.x - P_j.x, at most 0 when optimal."""
    return float(x @ x - (points.T @ x).min())


def _accepted(x: FloatArray) -> float:
    """The condition's violation accepted at `x`: `OPTIMALITY_TOLERANCE` per unit of the move,
    over the rounding floor (`OPTIMALITY_FLOOR` for each of its events)."""
    return OPTIMALITY_TOLERANCE * float(np.sqrt(x @ x)) + OPTIMALITY_FLOOR * x.size


def _polish(points: FloatArray, weights: FloatArray, max_steps: int) -> FloatArray:
    """Wolfe's minimum-norm-point algorithm over the columns of `points`, from `weights`.

    HiGHS's QP solver rounds an atom's weight below about 5e-7 to zero, so a forecast with
    a probability that small (6e-8, say) came back moved by that much, and failed the
    optimality check. This finishes the job exactly: add the atom that most violates the
    condition, take the affine hull's minimum-norm point of the support, and while that
    point has a weight <= 0, step back to the hull's edge and drop the atom (Wolfe 1976).
    The start is first taken to its own support's nearest point, which the condition cannot
    tell from HiGHS's: its regularisation left the answer 1e-12 along an edge the stated
    forecast is square to (the condition's left side then 1e-24), and 1e-13 off within its
    support, too far for a forecast 1e-8 from the set.
    """
    weights = weights.copy()
    support = weights > 0
    _nearest_on_support(points, weights, support)
    for _ in range(max_steps):
        x = points @ weights
        j = int(np.argmin(points.T @ x))
        # Atoms are added down to the rounding floor, not to the check's tolerance: that is
        # relative to the move, and left out an atom of weight 1e-11 in the projection of a
        # forecast 0.8 from the set (a review: (0.5, 0.5, 0) for (0.5, 0.5, 1e-11)).
        if x @ x - points[:, j] @ x <= OPTIMALITY_FLOOR * x.size or support[j]:
            break  # optimal (or no atom left to add: the caller's check says which)
        support[j] = True
        _nearest_on_support(points, weights, support)
    return np.asarray(weights / weights.sum(), dtype=np.float64)  # a mixture, exactly


def _nearest_on_support(
    points: FloatArray, weights: FloatArray, support: npt.NDArray[np.bool_]
) -> None:
    """Wolfe's minor cycle, in place: `weights` to the nearest point to the origin of the
    affine hull of the `support` columns, stepping back to the simplex's edge and dropping
    the atom there while that point has a weight <= 0."""
    while True:
        chosen = np.flatnonzero(support)
        current = weights[chosen]
        affine = _affine_nearest(points[:, chosen], int(np.argmax(current)))
        if (affine > 0).all():
            weights[:] = 0.0
            weights[chosen] = affine
            return
        falling = affine <= 0
        # An atom at weight 0 with an affine weight of 0 (the one just added, its weight
        # rounded to 0) is dropped where it is: 0/0 made every weight NaN.
        room = current[falling] - affine[falling]
        share = np.divide(current[falling], room, out=np.zeros(room.size), where=room > 0)
        step = float(np.min(share))
        weights[chosen] = current + step * (affine - current)
        weights[weights < 0] = 0.0
        support &= weights > 0


def _affine_nearest(sub: FloatArray, base: int) -> FloatArray:
    """The weights (summing to 1, of any sign) of the point of the affine hull of `sub`'s
    columns nearest to the origin: min |s_b + D l| over l, D the other columns less s_b (the
    `base` column, one of large weight: its own is 1 - sum l), by least squares on D itself.
    The normal equations' Gram matrix rounded the point 1e-14 off the projection, too far
    for a forecast 1e-8 from the set."""
    others = np.arange(sub.shape[1]) != base
    rest = np.linalg.lstsq(sub[:, others] - sub[:, [base]], -sub[:, base], rcond=None)[0]
    affine = np.empty(sub.shape[1])
    affine[others] = rest
    affine[base] = 1.0 - rest.sum()
    return affine


def repair(incidence: npt.ArrayLike, probs: npt.ArrayLike) -> FloatArray:
    """Return the Euclidean projection of each set onto the coherent forecasts.

    Same shape as `probs` ((n,) or (K, n)); NaN (unanswered) events stay NaN and do not
    influence the others. A set with no answered events comes back all NaN.
    """
    matrix = as_incidence(incidence)
    sets, one_set = as_probs(probs, matrix.shape[0])
    repaired = np.full(sets.shape, np.nan)
    # Per answered pattern, the atoms as the answered events see them, each once: atoms alike
    # on those events are one point of the hull, and repeated columns stalled HiGHS.
    models: dict[bytes, tuple[FloatArray, _ProjectionModel]] = {}
    for k, p in enumerate(sets):
        answered = ~np.isnan(p)
        if not answered.any():
            continue
        key = answered.tobytes()
        if key not in models:
            seen = matrix[answered]
            first = np.unique(seen, axis=1, return_index=True)[1]
            atoms = seen[:, np.sort(first)]  # in their order: HiGHS's answer depends on it
            models[key] = (atoms, _ProjectionModel(atoms))
        atoms, model = models[key]
        repaired[k, answered] = _project(atoms, p[answered], model.weights(p[answered]), k)
    return repaired[0] if one_set else repaired


def _project(atoms: FloatArray, p: FloatArray, weights: FloatArray | None, k: int) -> FloatArray:
    """The projection of `p` from HiGHS's mixture `weights`, finished by Wolfe's algorithm
    (`_polish`); failing that (HiGHS gave none, or its mixture led Wolfe's
    steps astray on a degenerate hull: a referee's set with probabilities 1e-7 from 0 and 1),
    Wolfe's algorithm from the atom nearest to `p`. Checked by the optimality condition: no
    atom lies at an acute angle."""
    points = atoms - p[:, np.newaxis]
    nearest = np.zeros(atoms.shape[1])
    nearest[int(np.argmin((points * points).sum(axis=0)))] = 1.0
    violation = math.inf
    for start in (weights, nearest):
        if start is None:
            continue
        start = _polish(points, start, max_steps=4 * atoms.shape[1] + 100)
        x = points @ start
        violation = _violation(points, x)
        if violation <= _accepted(x):
            # In [0, 1] as stated forecasts are: M pi rounded to 1 + 2e-16 (read back as 1).
            repaired = np.clip(atoms @ start, 0.0, 1.0)
            # + 0.0 turns a -0.0 (a stated one, or a weight of -0.0 times an atom's 0) into
            # 0.0, as stated forecasts are read; no other value changes.
            if np.abs(repaired - p).max() <= ROUNDING_MOVE:
                return p + 0.0  # coherent already: the mixture's rounding is no repair
            return repaired + 0.0
    raise RuntimeError(f"repair QP for set {k} is not optimal (violation {violation:.3g})")
