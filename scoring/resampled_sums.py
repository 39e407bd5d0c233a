"""Sums of resampled values, many samples at once, bit for bit what numpy gives one at a time.

The bootstrap sums each sample's per-cluster values at the resampled cluster indices:
`values[i][picks].sum(axis=1)` for every sample i. Done sample by sample, each gathers one
float at a time (about 3 ns each, 222 million of them for the report's 300-pass curve). Here
the samples are the columns of one matrix, so a resampled cluster brings a whole row of them
in one copy, and the row sums are added column by column across all samples at once.

To stay identical, the columns are added in the order numpy's `add.reduce` adds a contiguous
row of n values (its pairwise summation): from 0.0, one running sum below 8 values; up to 128,
eight running sums over blocks of 8, combined as ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the
remainder one by one; above 128, the two halves (the first a multiple of 8) summed so and
added. Floating-point addition is not associative, so any other order could differ in the
last bit. Each call checks its first rows against numpy itself and falls back to numpy
for good (`_EXACT`) if a numpy ever sums another way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Resampled rows summed per block: a block's gathered rows stay in cache.
_BLOCK_ROWS = 1_024
#: Rows of the first block compared with numpy's own sums on every call.
_CHECK_ROWS = 64
#: numpy's block size for pairwise summation (PW_BLOCKSIZE).
_PAIRWISE_BLOCK = 128
#: Whether the emulated order matched numpy so far in this process.
_EXACT = True


def _pairwise(column: Callable[[int], FloatArray], first: int, count: int) -> FloatArray:
    """Sum of columns first..first+count-1 in numpy's pairwise order (see the module doc)."""
    if count < 8:
        total = np.zeros_like(column(first))
        for j in range(first, first + count):
            total += column(j)
        return total
    if count <= _PAIRWISE_BLOCK:
        r = [column(first + j).copy() for j in range(8)]
        j = first + 8
        blocks_end = first + count - count % 8
        while j < blocks_end:
            for k in range(8):
                r[k] += column(j + k)
            j += 8
        total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for j in range(blocks_end, first + count):
            total += column(j)
        return total
    half = count // 2
    half -= half % 8
    return _pairwise(column, first, half) + _pairwise(column, first + half, count - half)


def _picked(by_cluster: FloatArray, block: IntArray) -> Callable[[int], FloatArray]:
    """Column j of the block's sums: every sample's value at each row's j-th pick."""

    def column(j: int) -> FloatArray:
        picked: FloatArray = by_cluster[block[:, j]]
        return picked

    return column


def _numpy_sums(values: FloatArray, picks: IntArray) -> FloatArray:
    return np.stack([row[picks].sum(axis=1) for row in values])


def resampled_sums(values: FloatArray, picks: IntArray) -> FloatArray:
    """`[v[picks].sum(axis=1) for v in values]` as a (samples, rows) array, identical bit for
    bit; `values` is (samples, n), `picks` (rows, n) indices into n."""
    global _EXACT
    if not _EXACT or values.shape[0] < 2:
        return _numpy_sums(values, picks)
    by_cluster = np.ascontiguousarray(values.T)  # (n, samples): a pick copies one row
    n = values.shape[1]
    out = np.empty((values.shape[0], picks.shape[0]))
    for start in range(0, picks.shape[0], _BLOCK_ROWS):
        block = picks[start : start + _BLOCK_ROWS]
        sums = 0.0 + _pairwise(_picked(by_cluster, block), 0, n)  # (rows, samples)
        if start == 0:
            check = block[:_CHECK_ROWS]
            if not np.array_equal(sums[: len(check)].T, _numpy_sums(values, check)):
                _EXACT = False  # numpy sums in another order: use it from now on
                return _numpy_sums(values, picks)
        out[:, start : start + len(block)] = sums.T
    return out
