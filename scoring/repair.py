"""Repair: the coherent forecast nearest to a stated one in Euclidean distance.

The coherent set is the convex hull of the incidence columns, so the projection is the
convex QP  min ||q - p||^2  s.t.  q = M pi,  pi in the simplex. Projecting onto a convex
set that contains every possible outcome vector moves the forecast closer to each of
them, so repair never raises the Brier score, whatever happens. HiGHS solves the QP;
one model per pattern of answered events (over the rows answered, atoms alike on them
merged) is reused across the sets of that pattern, changing only the linear costs.

The result is recomputed as M pi from the clipped, renormalised mixture (so it is
exactly coherent) and checked against the projection's optimality condition
(p - q).(M_j - q) <= 0 for every atom j. Where HiGHS falls short of it (it rounds an atom
weight below about 5e-7 to zero), Wolfe's minimum-norm-point algorithm finishes the
projection from HiGHS's mixture (`_polish`); the check is then made again, and failing it
(or when HiGHS gives no answer within its iteration cap) Wolfe's algorithm starts from the
atom nearest to the forecast. Atoms alike on a set's answered events are merged first (one
point of the hull; repeated columns stalled HiGHS). A repair that moves no probability by
more than 1e-12 returns the stated forecast itself (`ROUNDING_MOVE`).
"""

from __future__ import annotations

import math

import highspy
import numpy as np
import numpy.typing as npt

from scoring.highs import new_highs
from scoring.inputs import FloatArray, as_incidence, as_probs

#: Largest violation of the optimality condition accepted from the QP solver.
OPTIMALITY_TOLERANCE = 1e-9
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
        self._highs.run()
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


def _polish(points: FloatArray, weights: FloatArray, max_steps: int) -> FloatArray:
    """Wolfe's minimum-norm-point algorithm over the columns of `points`, from `weights`.

    HiGHS's QP solver rounds an atom's weight below about 5e-7 to zero, so a forecast with
    a probability that small (6e-8, say) came back moved by that much, and failed the
    optimality check. This finishes the job exactly: add the atom that most violates the
    condition, take the affine hull's minimum-norm point of the support, and while that
    point has a weight <= 0, step back to the hull's edge and drop the atom (Wolfe 1976).
    """
    weights = weights.copy()
    support = weights > 0
    for _ in range(max_steps):
        x = points @ weights
        j = int(np.argmin(points.T @ x))
        if x @ x - points[:, j] @ x <= OPTIMALITY_TOLERANCE / 2 or support[j]:
            break  # optimal (or no atom left to add: the caller's check says which)
        support[j] = True
        while True:  # minor cycle: the affine hull's nearest point, kept inside the simplex
            chosen = np.flatnonzero(support)
            sub = points[:, chosen]
            k = chosen.size
            kkt = np.zeros((k + 1, k + 1))
            kkt[:k, :k] = sub.T @ sub
            kkt[:k, k] = kkt[k, :k] = 1.0
            rhs = np.zeros(k + 1)
            rhs[k] = 1.0
            affine = np.linalg.lstsq(kkt, rhs, rcond=None)[0][:k]
            if (affine > 0).all():
                weights[:] = 0.0
                weights[chosen] = affine
                break
            current = weights[chosen]
            falling = affine <= 0
            step = float(np.min(current[falling] / (current[falling] - affine[falling])))
            weights[chosen] = current + step * (affine - current)
            weights[weights < 0] = 0.0
            support &= weights > 0
    return np.asarray(weights / weights.sum(), dtype=np.float64)  # a mixture, exactly


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
    (`_polish`) if it falls short; failing that (HiGHS gave none, or its mixture led Wolfe's
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
        violation = _violation(points, points @ start)
        if violation > OPTIMALITY_TOLERANCE:
            start = _polish(points, start, max_steps=4 * atoms.shape[1] + 100)
            violation = _violation(points, points @ start)
        if violation <= OPTIMALITY_TOLERANCE:
            repaired = np.asarray(atoms @ start, dtype=np.float64)
            if np.abs(repaired - p).max() <= ROUNDING_MOVE:
                return p.copy()  # coherent already: the mixture's rounding is no repair
            return repaired
    raise RuntimeError(f"repair QP for set {k} is not optimal (violation {violation:.3g})")
