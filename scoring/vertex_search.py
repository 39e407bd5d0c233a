"""Vertices of a Dutch-book LP found by solving it for many directions (any norm).

Used where exact enumeration (`scoring.vertex_exact`) would be too big, such as the
per-contract (l1) norm: the batched LP (`BatchModel`) is solved for stated probabilities
drawn from a fixed seed, so the result is the same in every process, and each optimal
basis seen is kept with the affine map p -> pi of its atom duals. A search may miss a
vertex, which is why no table answer is trusted without the duality certificate.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from scoring.batch_lp import BatchModel, block_matrix
from scoring.inputs import FloatArray

BoolArray = npt.NDArray[np.bool_]
Map = tuple[FloatArray, FloatArray]
#: Directions solved per round of the search, and the share of new vertices in a round
#: below which the search stops (the table then covers all but rare directions; those are
#: caught by the certificate and solved by the LP).
_ROUND = 2048
_STOP_SHARE = 0.005
_MAX_ROUNDS = 8
_SEED = 20_240_601
#: A stake below this is taken as zero when reading a vertex's structure.
_ZERO = 1e-9
#: Bases kept per vertex (the most often seen): a degenerate vertex has many.
_MAX_BASES = 32
#: Share of the search's optimal directions whose vertex the table keeps.
_COVERAGE = 0.998


def _basis_map(
    incidence: FloatArray,
    norm: str,
    basic_cols: BoolArray,
    basic_rows: BoolArray,
) -> Map | None:
    """The affine map p -> pi (atom duals) of one optimal basis of the batched LP's block.

    Duals y make every basic column's reduced cost zero (a_j.y = c_j(p), where the
    contracts cost -p and +p and w costs 1) and vanish on rows whose slack is basic:
    a square system whose solution is affine in p. None if it is singular.
    """
    n, m = incidence.shape
    block = block_matrix(incidence, norm)
    rows = block.shape[0]
    cols = np.flatnonzero(basic_cols)
    slack = np.flatnonzero(basic_rows)
    if cols.size + slack.size != rows:
        return None
    a = np.zeros((rows, rows))
    a[: cols.size] = block[:, cols].T
    a[cols.size + np.arange(slack.size), slack] = 1.0
    c = np.zeros((rows, n))
    e = np.zeros(rows)
    for k, col in enumerate(cols):
        if col < n:
            c[k, col] = -1.0
        elif col < 2 * n:
            c[k, col - n] = 1.0
        else:
            e[k] = 1.0
    try:
        inverse = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return None
    return (inverse @ c)[:m], (inverse @ e)[:m]


def directions(rng: np.random.Generator, incidence: FloatArray, size: int) -> FloatArray:
    """Stated probabilities to search with: uniform, near-coherent and extreme sets."""
    n, m = incidence.shape
    third = size // 3
    uniform = np.round(rng.uniform(size=(size - 2 * third, n)), 4)
    weights = rng.dirichlet(np.ones(m), size=third)
    near = np.clip(weights @ incidence.T + rng.normal(scale=0.1, size=(third, n)), 0.0, 1.0)
    corners = rng.uniform(size=(third, n)) ** 4
    corners = np.where(rng.uniform(size=(third, n)) < 0.5, corners, 1.0 - corners)
    return np.vstack((uniform, np.round(near, 4), np.round(corners, 4)))


def _solve_round(model: BatchModel, probs: FloatArray) -> tuple[FloatArray, BoolArray]:
    """Optimal books and basis flags (basic columns, then rows) of one batch.

    Books are cleaned of solver dust and rounded to 1e-9 so that one vertex found from
    two directions compares equal; a batch the solver did not finish is dropped.
    """
    solution = model.solve(probs)
    if not solution.ok:
        width = model.cols_per_block + model.rows_per_block
        return np.empty((0, model.n)), np.empty((0, width), dtype=bool)
    cols, rows = model.basic(len(probs))
    books = np.round(np.where(np.abs(solution.stakes) > _ZERO, solution.stakes, 0.0), 9)
    return np.asarray(books + 0.0, dtype=np.float64), np.concatenate(
        (cols, rows), axis=1
    )  # + 0.0: no -0.0 keys


def _search(
    incidence: FloatArray, norm: str, max_vertices: int
) -> dict[bytes, tuple[FloatArray, Counter[bytes]]]:
    """Vertex key -> (book, how often each basis was optimal), or {} past max_vertices."""
    rng = np.random.default_rng(_SEED)
    capacity = 32
    model = BatchModel(incidence, norm, capacity)
    found: dict[bytes, tuple[FloatArray, Counter[bytes]]] = {}
    for _ in range(_MAX_ROUNDS):
        probs = directions(rng, incidence, _ROUND)
        batches = [
            _solve_round(model, probs[start : start + capacity])
            for start in range(0, len(probs), capacity)
        ]
        new = 0
        for books, flags in batches:
            for book, basis in zip(books, flags, strict=True):
                key = book.tobytes()
                if key not in found:
                    found[key] = (book, Counter())
                    new += 1
                found[key][1][basis.tobytes()] += 1
        if len(found) > max_vertices:
            return {}
        if new <= _STOP_SHARE * len(probs):
            break
    return found


def search(
    incidence: FloatArray, norm: str, max_vertices: int
) -> list[tuple[FloatArray, list[Map]]]:
    """The books found, most often optimal first, each with its bases' maps (best first).

    Empty when the search found more than `max_vertices` vertices.
    """
    n, m = incidence.shape
    found = _search(incidence, norm, max_vertices)
    if not found:
        return []
    entries = sorted(found.values(), key=lambda entry: -entry[1].total())
    # Drop the rarest vertices (those optimal for a sliver of directions): each costs
    # every set a column of the product, and a set that needs one goes to the LP.
    hits = np.array([bases.total() for _, bases in entries])
    keep = int(np.searchsorted(np.cumsum(hits) / hits.sum(), _COVERAGE)) + 1
    split = 2 * n + 1
    out: list[tuple[FloatArray, list[Map]]] = []
    for book, bases in entries[:keep]:
        usable: list[Map] = []
        for flags, _ in bases.most_common(_MAX_BASES):
            basic = np.frombuffer(flags, dtype=bool)
            one = _basis_map(incidence, norm, basic[:split], basic[split:])
            if one is not None:
                usable.append(one)
        out.append((book, usable or [(np.zeros((m, n)), np.full(m, 1.0 / m))]))
    return out
