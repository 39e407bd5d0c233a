"""A reusable HiGHS model that solves many Dutch-book LPs side by side.

Solving tiny LPs one at a time is dominated by per-call overhead, so B sets that share
one incidence matrix are stacked into one block-diagonal LP and the model is kept.
Each block is the bookie's problem (paper eq. 1) written so that the stated
probabilities appear only in the objective:

    max  w - p.(u - v)
    s.t. w - sum_i (u_i - v_i) M_ij <= 0      for every atom j   (dual: pi_j)
         sum_i (u_i + v_i) <= 1                (inf only: total stake at most 1)
         u, v >= 0  (l1: u, v <= 1, at most one of each contract);  w free

b = u - v is the book (positive = buy), w its worst-case payout, and the objective
the guaranteed profit. A new batch therefore only changes column costs: the previous
optimal basis stays primal feasible and the primal simplex re-solves from it in a few
pivots. The duals of the atom rows are a distribution pi over atoms, so the same solve
gives the nearest coherent forecast M pi (the LP dual is min ||M pi - p||).
An unanswered event has its two columns fixed at 0, which drops it from that set.

Measured with bench/lp.py: this form with primal devex pricing was about 40% faster
than the distance form (p in the right-hand side, dual simplex) at horizon 1 and 4.
Which simplex, and whether a batch starts from the previous batch's basis, depend on the
size (CPU ms per set, uniform random sets, one session; warm / cold = kept / cleared):

    panel (sets per model)  inf: primal    dual          l1: primal dual
                            warm   cold   warm   cold   warm   warm   cold
    horizon 1 (32; l1 64)   0.030  0.040  0.041  0.037  0.085  0.039  0.059
    horizon 2 (4)           0.193  0.145  0.241  0.174  0.404  0.218  0.216
    horizon 3 (1)           1.04   0.57   1.25   0.71   2.78   1.04   1.02
    horizon 4 (1)           6.68   3.12   8.35   2.41   19.6   4.63   3.45

A random set's optimal basis is a poor start for the next one once the blocks are big, so
models of few sets clear the basis before each batch (`_COLD_BELOW`); the sup norm keeps
primal simplex for many small blocks and uses dual simplex otherwise, l1 always dual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

from scoring.highs import new_highs, run

FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.int32]

#: Tolerances well below the 1e-9 agreement the results are certified to.
_TOLERANCE = 1e-10
#: Models holding fewer sets than this start every batch from scratch (see above).
_COLD_BELOW = 8
#: HiGHS's `simplex_strategy` values.
_DUAL, _PRIMAL = 1, 4


@dataclass(frozen=True)
class BlockSolution:
    """Raw per-set values of one batch solve, shape-aligned with the batch's sets."""

    objective: FloatArray  # (b,) profit as the solver reports it
    atom_weights: FloatArray  # (b, m) pi, a distribution over atoms (times `cost_scale`)
    stakes: FloatArray  # (b, n) the book b = u - v
    ok: bool  # HiGHS reported an optimal solution


def block_matrix(incidence: FloatArray, norm: str) -> FloatArray:
    """Dense constraint matrix of one set: rows (atoms, [budget]), columns (u, v, w)."""
    n, m = incidence.shape
    rows = m + (1 if norm == "inf" else 0)
    block = np.zeros((rows, 2 * n + 1))
    block[:m, :n] = -incidence.T
    block[:m, n : 2 * n] = incidence.T
    block[:m, 2 * n] = 1.0
    if norm == "inf":
        block[m, : 2 * n] = 1.0
    return block


class BatchModel:
    """One HiGHS model holding `capacity` copies of the LP for a fixed incidence and norm."""

    def __init__(self, incidence: FloatArray, norm: str, capacity: int) -> None:
        if norm not in ("inf", "l1"):
            raise ValueError(f"norm must be 'inf' or 'l1', got {norm!r}")
        self.n, self.m = incidence.shape
        self.norm = norm
        self.capacity = capacity
        block = block_matrix(incidence, norm)
        self.rows_per_block, self.cols_per_block = block.shape
        self._contract_upper = np.inf if norm == "inf" else 1.0
        self._cold = capacity < _COLD_BELOW
        self._highs = self._build(block)
        cols = self.cols_per_block * np.arange(capacity)[:, np.newaxis]
        self._contract_cols: IndexArray = np.asarray(
            (cols + np.arange(2 * self.n)).ravel(), dtype=np.int32
        )
        self._missing = np.zeros((capacity, self.n), dtype=bool)
        self._payout_cols: IndexArray = np.asarray(cols.ravel() + 2 * self.n, dtype=np.int32)
        self._cost_scale = 1.0

    def _build(self, block: FloatArray) -> Any:
        rows, cols = self.rows_per_block, self.cols_per_block
        cap, n, m = self.capacity, self.n, self.m
        # Column-major nonzeros of one block, then shifted for every copy.
        col_of, row_of = np.nonzero(block.T)
        per_col = np.bincount(col_of, minlength=cols)
        a_index = (row_of[np.newaxis, :] + rows * np.arange(cap)[:, np.newaxis]).ravel()
        a_start = np.concatenate(([0], np.cumsum(np.tile(per_col, cap))))

        inf = highspy.kHighsInf
        cost = np.zeros(cols)
        cost[2 * n] = 1.0  # w; the contracts' costs -p, +p are set per batch
        col_lower = np.zeros(cols)
        col_lower[2 * n] = -inf
        col_upper = np.full(cols, self._contract_upper)
        col_upper[2 * n] = inf
        row_upper = np.zeros(rows)
        row_upper[m:] = 1.0  # the stake budget (inf norm only)

        lp = highspy.HighsLp()
        lp.num_col_ = cols * cap
        lp.num_row_ = rows * cap
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.col_cost_ = np.tile(cost, cap)
        lp.col_lower_ = np.tile(col_lower, cap)
        lp.col_upper_ = np.tile(col_upper, cap)
        lp.row_lower_ = np.full(rows * cap, -inf)
        lp.row_upper_ = np.tile(row_upper, cap)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = a_start.astype(np.int32)
        lp.a_matrix_.index_ = a_index.astype(np.int32)
        lp.a_matrix_.value_ = np.tile(block[row_of, col_of], cap)

        highs = new_highs()
        # Primal simplex: a new p keeps the last basis feasible (many small sup-norm blocks).
        self._primal = self.norm == "inf" and not self._cold
        for name, value in (
            ("presolve", "off"),  # presolve would discard the warm basis every batch
            ("solver", "simplex"),
            ("simplex_strategy", _PRIMAL if self._primal else _DUAL),
            ("simplex_primal_edge_weight_strategy", 1),  # devex: fastest measured
            ("primal_feasibility_tolerance", _TOLERANCE),
            ("dual_feasibility_tolerance", _TOLERANCE),
        ):
            highs.setOptionValue(name, value)
        if highs.passModel(lp) == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the batched Dutch-book model")
        return highs

    def reset(self) -> None:
        """Forget the warm basis so a call's results depend only on its own inputs."""
        self._highs.clearSolver()

    def use_other_simplex(self, other: bool) -> None:
        """Solve with the other simplex (primal where the model uses dual, and the reverse)
        while `other`, or with the model's own again. A near-degenerate set can end dual
        simplex's run without an optimal status (HiGHS's "Unknown": its cost perturbation
        removed, infeasibilities it could not clean up), the book left at zero, at every
        objective scale; primal simplex solves it (an l1 set of six events, profit 2.4e-6)."""
        primal = self._primal != other
        self._highs.setOptionValue("simplex_strategy", _PRIMAL if primal else _DUAL)

    def _set_missing(self, missing: npt.NDArray[np.bool_]) -> None:
        """Fix unanswered contracts at 0 (only touching HiGHS when the pattern changes)."""
        if np.array_equal(missing, self._missing):
            return
        upper = np.where(missing, 0.0, self._contract_upper)
        both = np.concatenate((upper, upper), axis=1).ravel()
        self._highs.changeColsBounds(
            self._contract_cols.size, self._contract_cols, np.zeros(both.size), both
        )
        self._missing = missing

    def basic(self, b: int) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
        """Which columns (b, cols) and rows (b, rows) of the first b blocks are basic now."""
        _, basic = self._highs.getBasicVariables()
        basic = np.asarray(basic)
        cols = np.zeros(self.capacity * self.cols_per_block, dtype=bool)
        rows = np.zeros(self.capacity * self.rows_per_block, dtype=bool)
        cols[basic[basic >= 0]] = True
        rows[-1 - basic[basic < 0]] = True  # HiGHS numbers a basic row's slack -1 - row
        return (
            cols.reshape(self.capacity, -1)[:b],
            rows.reshape(self.capacity, -1)[:b],
        )

    def _set_cost_scale(self, scale: float) -> None:
        """Give each set's worst-case payout column w the cost `scale` (the contracts' costs
        are set with it every batch)."""
        if scale == self._cost_scale:
            return
        size = self._payout_cols.size
        self._highs.changeColsCost(size, self._payout_cols, np.full(size, scale))
        self._cost_scale = scale

    def solve(self, probs: FloatArray, cost_scale: float = 1.0) -> BlockSolution:
        """Solve the sets in `probs` (b <= capacity rows of n values; NaN = unanswered).

        `cost_scale` multiplies the objective: the solution is the same LP's, but HiGHS's
        dual feasibility tolerance (absolute, 1e-10 at the finest) is that much finer on it.
        The atom weights come back multiplied by it too (they are normalised by the caller).
        """
        b = probs.shape[0]
        n, cap = self.n, self.capacity
        padded = np.zeros((cap, n))
        padded[:b] = probs
        missing = np.isnan(padded)
        padded[missing] = 0.0
        self._set_missing(missing)
        self._set_cost_scale(cost_scale)
        cost = np.concatenate((-padded, padded), axis=1).ravel() * cost_scale
        self._highs.changeColsCost(self._contract_cols.size, self._contract_cols, cost)
        if self._cold:
            self._highs.clearSolver()
        run(self._highs)
        ok = self._highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
        solution = self._highs.getSolution()
        cols = np.asarray(solution.col_value, dtype=np.float64).reshape(cap, -1)[:b]
        duals = np.asarray(solution.row_dual, dtype=np.float64).reshape(cap, -1)[:b]
        stakes = cols[:, :n] - cols[:, n : 2 * n]
        return BlockSolution(
            objective=cols[:, 2 * n] - (stakes * padded[:b]).sum(axis=1),
            atom_weights=duals[:, : self.m],
            stakes=stakes,
            ok=ok,
        )
