"""Every vertex of the sup-norm Dutch-book LP of a small incidence matrix, and its bases.

The bookie's region for an (n events, m atoms) matrix M is {(b, w): ||b||_1 <= 1,
w <= (M^T b)_j for every atom j}. Apart from b = 0, a vertex has the stake budget tight,
so it is fixed by a support S of k <= m events with signs s (the contracts bought, +1, or
sold, -1) and k atoms J whose payout rows are tight:

    sum_{i in S} M_ij b_i - w = 0  (j in J),     sum_{i in S} s_i b_i = 1.

Enumerating every (S, s, J), solving that (k+1)-square system (its entries are 0 and +-1,
so a singular one has determinant exactly 0 and a regular one at least 1 in magnitude:
well conditioned) and keeping the solutions that respect the signs and every other atom
row gives all the vertices, each with every basis that reaches it: nothing is searched.
The same basis gives the LP's duals as an affine map of p: pi on J and the profit
lambda solve sum_{j in J} M_ij pi_j - s_i lambda = p_i (i in S), sum_j pi_j = 1, which is
the transposed system. The b = 0 vertex (profit 0, a coherent p) has its own bases:
M_S pi_J = p_S, sum pi_J = 1 with |J| = |S| + 1.

The table is deterministic (no seed, no solver), so every process builds the same one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scoring.inputs import FloatArray

IntArray = npt.NDArray[np.intp]
#: Sign and payout slack tolerated when a solved system is checked against the region.
_FEASIBLE = 1e-12
#: Books are rounded to this many decimals so one vertex reached by two bases is one key.
_DECIMALS = 12
#: Free directions kept per vertex's dual face (the table's evaluation handles up to 2).
MAX_DIM = 2
#: Systems solved per numpy call (bounds the temporaries).
_BATCH = 65_536


@dataclass(frozen=True)
class Bases:
    """Bases found for a set of books: per basis its book's index and affine dual map."""

    books: FloatArray  # (V, n) distinct books, row 0 the zero book
    owner: IntArray  # (B,) index into books of each basis
    gain: FloatArray  # (B, m, n): pi = gain @ p + offset at this basis
    offset: FloatArray  # (B, m)


def candidate_count(n: int, m: int, limit: int | None = None) -> int:
    """Square systems the enumeration solves for an (n, m) matrix (its cost).

    Counting stops once past `limit` (any count above it is as good as the exact one).
    """
    total = 0
    for k in range(min(n, m) + 1):
        total += math.comb(n, k) * math.comb(m, k + 1)  # the b = 0 vertex's bases
        if k:
            total += math.comb(n, k) * math.comb(m, k) * 2**k
        if limit is not None and total > limit:
            break
    return total


def _subsets(n: int, m: int, k: int, k_atoms: int) -> Iterator[tuple[IntArray, IntArray]]:
    """All (events S, atoms J) index pairs with |S| = k, |J| = k_atoms, in batches."""
    chosen = list(itertools.combinations(range(n), k))
    events = np.array(chosen, dtype=np.intp).reshape(len(chosen), k)
    atoms = np.array(list(itertools.combinations(range(m), k_atoms)), dtype=np.intp)
    pairs = np.array(list(itertools.product(range(len(events)), range(len(atoms)))))
    for start in range(0, len(pairs), _BATCH):
        chunk = pairs[start : start + _BATCH]
        yield events[chunk[:, 0]], atoms[chunk[:, 1]]


def _invert(systems: FloatArray) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Inverses of the regular systems (integer determinants: |det| >= 1 or exactly 0)."""
    regular = np.abs(np.linalg.det(systems)) > 0.5
    inverse = np.zeros_like(systems)
    inverse[regular] = np.linalg.inv(systems[regular])
    return inverse, regular


def _scatter(
    rows: IntArray, cols: IntArray, block: FloatArray, shape: tuple[int, int]
) -> FloatArray:
    """(N, shape) zeros with block[k] placed at rows[k] x cols[k]."""
    out = np.zeros((len(block), *shape))
    index = np.arange(len(block))[:, np.newaxis, np.newaxis]
    out[index, rows[:, :, np.newaxis], cols[:, np.newaxis, :]] = block
    return out


def _tight_bases(incidence: FloatArray) -> Iterator[tuple[FloatArray, FloatArray, FloatArray]]:
    """(books, gain, offset) of every basis with the stake budget tight."""
    n, m = incidence.shape
    for k in range(1, min(n, m) + 1):
        signs = np.array(list(itertools.product((-1.0, 1.0), repeat=k)))
        for events, atoms in _subsets(n, m, k, k):
            events = np.repeat(events, len(signs), axis=0)
            atoms = np.repeat(atoms, len(signs), axis=0)
            sign = np.tile(signs, (len(events) // len(signs), 1))
            system = np.zeros((len(events), k + 1, k + 1))
            system[:, :k, :k] = incidence[events[:, np.newaxis, :], atoms[:, :, np.newaxis]]
            system[:, :k, k] = -1.0
            system[:, k, :k] = sign
            inverse, regular = _invert(system)
            stakes = inverse[:, :k, k]  # the solution for right-hand side (0, ..., 0, 1)
            book = np.zeros((len(events), n))
            np.put_along_axis(book, events, stakes, axis=1)
            worst = inverse[:, k, k]
            keep = (
                regular
                & np.all(sign * stakes >= -_FEASIBLE, axis=1)
                & ((book @ incidence).min(axis=1) >= worst - _FEASIBLE)
            )
            # Duals: A^T y = (p_S, -1) with y = (pi_J, -lambda), so y = inverse^T (p_S, -1).
            transposed = np.swapaxes(inverse[keep], 1, 2)
            gain = _scatter(atoms[keep], events[keep], transposed[:, :k, :k], (m, n))
            offset = np.zeros((int(keep.sum()), m))
            np.put_along_axis(offset, atoms[keep], -transposed[:, :k, k], axis=1)
            yield book[keep], gain, offset


def _zero_bases(incidence: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(gain, offset) of the b = 0 vertex's bases: M_S pi_J = p_S, sum pi_J = 1."""
    n, m = incidence.shape
    gains, offsets = [], []
    for k in range(min(n, m - 1) + 1):
        for events, atoms in _subsets(n, m, k, k + 1):
            system = np.ones((len(events), k + 1, k + 1))
            system[:, :k, :] = incidence[events[:, :, np.newaxis], atoms[:, np.newaxis, :]]
            inverse, regular = _invert(system)
            inverse, events, atoms = inverse[regular], events[regular], atoms[regular]
            gains.append(_scatter(atoms, events, inverse[:, :, :k], (m, n)))
            offset = np.zeros((len(inverse), m))
            np.put_along_axis(offset, atoms, inverse[:, :, k], axis=1)
            offsets.append(offset)
    return np.concatenate(gains), np.concatenate(offsets)


def enumerate_bases(incidence: FloatArray) -> Bases:
    """Every vertex of the sup-norm region (row 0: b = 0) with all its bases."""
    n = incidence.shape[0]
    parts = list(_tight_bases(incidence))
    books = np.vstack([np.zeros((1, n))] + [book for book, _, _ in parts])
    books = np.round(books, _DECIMALS) + 0.0  # + 0.0: no -0.0, so equal books are equal keys
    distinct, first, owner = np.unique(books, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # keep the enumeration's order: the zero book first
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    zero_gain, zero_offset = _zero_bases(incidence)
    tight_owner = rank[np.asarray(owner).ravel()][1:]
    return Bases(
        books=distinct[order],
        owner=np.concatenate((np.zeros(len(zero_gain), dtype=np.intp), tight_owner)),
        gain=np.concatenate([zero_gain] + [gain for _, gain, _ in parts]),
        offset=np.concatenate([zero_offset] + [offset for _, _, offset in parts]),
    )


@dataclass(frozen=True)
class Faces:
    """Per vertex, the affine set of its optimal duals: pi = gain @ p + offset + D t.

    At vertex v with profit lambda(p) = floor_v - b_v.p, complementary slackness leaves
    the duals pi >= 0 on v's tight atoms with sum 1 and (M pi)_i = p_i + s_i lambda on its
    support (both affine in p). Those equations leave `dim` free directions D (columns of
    `direction`, zero past `dim`); the optimal duals for p are the t that also keep pi >= 0
    and every forecast within lambda of p, a polytope of dimension at most `dim`.
    """

    gain: FloatArray  # (V, m, n) a particular solution's map
    offset: FloatArray  # (V, m)
    direction: FloatArray  # (V, m, MAX_DIM) the free directions
    dim: IntArray  # (V,)
    slope: FloatArray  # (V, m + 2n, MAX_DIM): the constraints' slopes in t (see `slack`)


def faces(incidence: FloatArray, stakes: FloatArray, floor: FloatArray) -> Faces:
    """The dual faces of every vertex (see `Faces`), from its book and payout floor."""
    n, m = incidence.shape
    count = len(stakes)
    gain = np.zeros((count, m, n))
    offset = np.zeros((count, m))
    direction = np.zeros((count, m, MAX_DIM))
    dim = np.zeros(count, dtype=np.intp)
    payout = stakes @ incidence
    for v in range(count):
        # At b = 0 the profit is 0 and every event's forecast must equal p: all are tight.
        zero = not np.any(np.abs(stakes[v]) > _FEASIBLE)
        support = np.arange(n) if zero else np.flatnonzero(np.abs(stakes[v]) > _FEASIBLE)
        tight = np.flatnonzero(payout[v] <= floor[v] + _FEASIBLE)
        equations = np.vstack((incidence[np.ix_(support, tight)], np.ones((1, len(tight)))))
        _, values, right = np.linalg.svd(equations)
        rank = int(np.sum(values > 1e-9 * values.max()))
        dim[v] = len(tight) - rank
        inverse = np.linalg.pinv(equations, rcond=1e-9)
        rhs = np.zeros((len(support) + 1, n))  # (p_S + s lambda(p), 1) = rhs @ p + rhs0
        sign = np.sign(stakes[v, support])
        rhs[np.arange(len(support)), support] = 1.0
        rhs[: len(support)] -= sign[:, np.newaxis] * stakes[v][np.newaxis, :]
        rhs0 = np.concatenate((sign * floor[v], [1.0]))
        gain[v, tight] = inverse @ rhs
        offset[v, tight] = inverse @ rhs0
        free = right[rank : rank + MAX_DIM].T
        direction[v, tight, : free.shape[1]] = np.where(np.abs(free) > _FEASIBLE, free, 0.0)
    move = np.einsum("nm,vmd->vnd", incidence, direction)
    slope = np.concatenate((direction, -move, move), axis=1)
    return Faces(gain=gain, offset=offset, direction=direction, dim=dim, slope=slope)
