"""Repair: the coherent forecast nearest to a stated one in Euclidean distance.

The coherent set is the convex hull of the incidence columns, so the projection is the
convex QP  min ||q - p||^2  s.t.  q = M pi,  pi in the simplex. Projecting onto a convex
set that contains every possible outcome vector moves the forecast closer to each of
them, so repair never raises the Brier score, whatever happens. HiGHS solves the QP;
one model per incidence matrix is reused across sets, changing only the linear costs
and the rows of unanswered events (freed, so they drop out).

The result is recomputed as M pi from the clipped, renormalised mixture (so it is
exactly coherent) and checked against the projection's optimality condition
(p - q).(M_j - q) <= 0 for every atom j. Where HiGHS falls short of it (it rounds an atom
weight below about 5e-7 to zero), Wolfe's minimum-norm-point algorithm finishes the
projection from HiGHS's mixture (`_polish`); the check is then made again.
"""

from __future__ import annotations

import highspy
import numpy as np
import numpy.typing as npt

from scoring.highs import new_highs
from scoring.inputs import FloatArray, as_incidence, as_probs

#: Largest violation of the optimality condition accepted from the QP solver.
OPTIMALITY_TOLERANCE = 1e-9


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
        if self._highs.passModel(model) == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the repair QP")
        self._q_cols = (m + np.arange(n)).astype(np.int32)
        self._event_rows = np.arange(n, dtype=np.int32)

    def weights(self, probs: FloatArray) -> FloatArray:
        """The optimal mixture over atoms for one set (NaN events freed from the fit)."""
        missing = np.isnan(probs)
        inf = highspy.kHighsInf
        self._highs.changeColsCost(self.n, self._q_cols, np.where(missing, 0.0, -2.0 * probs))
        self._highs.changeRowsBounds(
            self.n,
            self._event_rows,
            np.where(missing, -inf, 0.0),
            np.where(missing, inf, 0.0),
        )
        self._highs.run()
        status = self._highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"repair QP not solved: {self._highs.modelStatusToString(status)}")
        values = np.asarray(self._highs.getSolution().col_value, dtype=np.float64)
        pi = np.clip(values[: self.m], 0.0, None)
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
    model: _ProjectionModel | None = None
    for k, p in enumerate(sets):
        answered = ~np.isnan(p)
        if not answered.any():
            continue
        if model is None:
            model = _ProjectionModel(matrix)
        weights = model.weights(p)
        # Optimality of a projection onto conv{M_j}: no atom lies at an acute angle.
        points = matrix[answered] - p[answered, np.newaxis]
        violation = _violation(points, points @ weights)
        if violation > OPTIMALITY_TOLERANCE:
            weights = _polish(points, weights, max_steps=4 * matrix.shape[1] + 100)
            violation = _violation(points, points @ weights)
        if violation > OPTIMALITY_TOLERANCE:
            raise RuntimeError(f"repair QP for set {k} is not optimal (violation {violation:.3g})")
        repaired[k] = np.where(answered, matrix @ weights, np.nan)
    return repaired[0] if one_set else repaired
