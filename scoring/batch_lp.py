"""A reusable HiGHS model that solves many Dutch-book LPs side by side.

Solving tiny LPs one at a time is dominated by per-call overhead, so B sets that share
one incidence matrix are stacked into one block-diagonal LP and the model is kept:
a new batch only changes row bounds (the stated probabilities live in the right-hand
side), and HiGHS re-solves from the previous optimal basis with the dual simplex, which
stays dual feasible under a change of right-hand side.

Each block is the distance form of the Dutch-book LP (paper, Appendix A):

    inf:  min t           s.t.  M pi - t <= p,  M pi + t >= p,  sum pi = 1,  pi, t >= 0
    l1:   min sum_i s_i   s.t.  M pi - s <= p,  M pi + s >= p,  sum pi = 1,  pi, s >= 0

Its LP dual is the bookie's problem, so the row duals of the two event rows are the
stakes: b_i = -(dual of the upper row) - (dual of the lower row), positive = buy.
An unanswered event gets free rows, which drops it from that set without a rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Tolerances well below the 1e-9 agreement the results are certified to.
_TOLERANCE = 1e-10


def new_highs() -> Any:
    """A silent single-threaded HiGHS instance (highspy ships without complete stubs)."""
    highs = highspy.Highs()  # type: ignore[no-untyped-call]
    highs.silent()
    highs.setOptionValue("threads", 1)
    return highs


@dataclass(frozen=True)
class BlockSolution:
    """Raw per-set values of one batch solve, shape-aligned with the batch's sets."""

    objective: FloatArray  # (b,) profit as the solver reports it
    atom_weights: FloatArray  # (b, m) pi, a distribution over atoms
    stakes: FloatArray  # (b, n) from the row duals
    ok: bool  # HiGHS reported an optimal solution


def _block_matrix(incidence: FloatArray, norm: str) -> FloatArray:
    """Dense constraint matrix of one set: rows (upper n, lower n, simplex), cols (pi, gap)."""
    n, m = incidence.shape
    n_gap = 1 if norm == "inf" else n
    block = np.zeros((2 * n + 1, m + n_gap))
    block[:n, :m] = incidence
    block[n : 2 * n, :m] = incidence
    block[2 * n, :m] = 1.0
    if norm == "inf":
        block[:n, m] = -1.0
        block[n : 2 * n, m] = 1.0
    else:
        block[np.arange(n), m + np.arange(n)] = -1.0
        block[n + np.arange(n), m + np.arange(n)] = 1.0
    return block


class BatchModel:
    """One HiGHS model holding `capacity` copies of the LP for a fixed incidence and norm."""

    def __init__(self, incidence: FloatArray, norm: str, capacity: int) -> None:
        if norm not in ("inf", "l1"):
            raise ValueError(f"norm must be 'inf' or 'l1', got {norm!r}")
        self.n, self.m = incidence.shape
        self.norm = norm
        self.capacity = capacity
        block = _block_matrix(incidence, norm)
        self.rows_per_block, self.cols_per_block = block.shape
        self._highs = self._build(block)
        self._event_rows = self._event_row_indices()

    def _build(self, block: FloatArray) -> Any:
        rows, cols = self.rows_per_block, self.cols_per_block
        cap = self.capacity
        # Column-major nonzeros of one block, then shifted for every copy.
        col_of, row_of = np.nonzero(block.T)
        values = block[row_of, col_of]
        per_col = np.bincount(col_of, minlength=cols)
        offsets = np.arange(cap)
        a_index = (row_of[np.newaxis, :] + rows * offsets[:, np.newaxis]).ravel()
        a_value = np.tile(values, cap)
        counts = np.tile(per_col, cap)
        a_start = np.concatenate(([0], np.cumsum(counts)))

        cost = np.zeros(cols)
        cost[self.m :] = 1.0
        inf = highspy.kHighsInf
        row_lower = np.full(rows, -inf)
        row_upper = np.full(rows, inf)
        row_lower[-1] = row_upper[-1] = 1.0  # sum pi = 1; event rows start free

        highs = new_highs()
        for name, value in (
            ("presolve", "off"),  # presolve would discard the warm basis every batch
            ("solver", "simplex"),
            ("simplex_strategy", 1),  # dual simplex: stays dual feasible under new p
            # Devex pricing: steepest-edge weights cost more than they save on tiny blocks
            # (measured about 20% faster at horizon 1 with bench/lp.py).
            ("simplex_dual_edge_weight_strategy", 1),
            ("primal_feasibility_tolerance", _TOLERANCE),
            ("dual_feasibility_tolerance", _TOLERANCE),
        ):
            highs.setOptionValue(name, value)
        lp = highspy.HighsLp()
        lp.num_col_ = cols * cap
        lp.num_row_ = rows * cap
        lp.col_cost_ = np.tile(cost, cap)
        lp.col_lower_ = np.zeros(cols * cap)
        lp.col_upper_ = np.full(cols * cap, inf)
        lp.row_lower_ = np.tile(row_lower, cap)
        lp.row_upper_ = np.tile(row_upper, cap)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = a_start.astype(np.int32)
        lp.a_matrix_.index_ = a_index.astype(np.int32)
        lp.a_matrix_.value_ = a_value
        status = highs.passModel(lp)
        if status == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the batched Dutch-book model")
        return highs

    def _event_row_indices(self) -> npt.NDArray[np.int32]:
        """Indices of the 2n event rows of every block (the simplex rows never change)."""
        starts = self.rows_per_block * np.arange(self.capacity)
        rows = starts[:, np.newaxis] + np.arange(2 * self.n)[np.newaxis, :]
        return np.asarray(rows.ravel(), dtype=np.int32)

    def reset(self) -> None:
        """Forget the warm basis so a call's results depend only on its own inputs."""
        self._highs.clearSolver()

    def solve(self, probs: FloatArray) -> BlockSolution:
        """Solve the sets in `probs` (b <= capacity rows of n values; NaN = unanswered)."""
        b = probs.shape[0]
        n, cap = self.n, self.capacity
        inf = highspy.kHighsInf
        padded = np.full((cap, n), np.nan)
        padded[:b] = probs
        missing = np.isnan(padded)
        upper_hi = np.where(missing, inf, padded)
        lower_lo = np.where(missing, -inf, padded)
        lower = np.concatenate((np.full((cap, n), -inf), lower_lo), axis=1).ravel()
        upper = np.concatenate((upper_hi, np.full((cap, n), inf)), axis=1).ravel()
        self._highs.changeRowsBounds(self._event_rows.size, self._event_rows, lower, upper)
        self._highs.run()
        ok = self._highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        solution = self._highs.getSolution()
        cols = np.asarray(solution.col_value, dtype=np.float64).reshape(cap, -1)[:b]
        duals = np.asarray(solution.row_dual, dtype=np.float64).reshape(cap, -1)[:b]
        stakes = -duals[:, :n] - duals[:, n : 2 * n]
        return BlockSolution(
            objective=cols[:, self.m :].sum(axis=1),
            atom_weights=cols[:, : self.m],
            stakes=stakes,
            ok=ok,
        )
