"""The Dutch-book LP as a lookup: a table of its vertices per incidence matrix.

For a fixed incidence matrix M and norm, the bookie's feasible region (books b within
the stake budget, worst-case payout w <= min_j (M^T b)_j) does not depend on the stated
probabilities p; they only enter the objective w - p.b. The profit of a set is therefore
max over the region's vertices v of (floor_v - p.b_v): one matrix product over a table
of vertices, computed once per matrix.

The table is found by solving the batched LP (`BatchModel`) for many directions p drawn
from a fixed seed, so it is the same in every process. A table found this way may miss a
vertex, which is why no table answer is trusted: each set is *certified* exactly as the
LP's answers are (`dutch_book._certify`). The book b_v is feasible by construction (a
lower bound); for the upper bound every vertex carries an affine map p -> pi from the
complementary-slackness equations at that vertex, giving a distribution over atoms whose
forecast M pi is exactly `profit` away from p when v is optimal. A set whose bounds differ
by more than the tolerance, or that left an event unanswered (its region is a slice of
this one, with other vertices), goes to the LP instead.

A matrix whose table would be large (many atoms, many events) gets none: the search
stops once the table exceeds `MAX_VERTICES` and the caller uses the LP alone.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scoring.batch_lp import BatchModel, block_matrix
from scoring.inputs import FloatArray

#: Largest table kept: past it, the matrix product costs more than the LP saves.
MAX_VERTICES = 4096
#: Directions solved per round of the search, and the share of new vertices in a round
#: below which the search stops (the table then covers all but rare directions; those are
#: caught by the certificate and solved by the LP).
_ROUND = 2048
_STOP_SHARE = 0.005
_MAX_ROUNDS = 8
#: Only matrices this small get a search at all: the table of a panel with many atoms
#: (horizon 2 and up, two assets) outgrows MAX_VERTICES and the search is wasted.
MAX_EVENTS = 32
MAX_ATOMS = 8
_SEED = 20_240_601
#: A stake or slack below this is taken as zero when reading a vertex's structure.
_ZERO = 1e-9
_MAX_CACHED = 16
_CHUNK = 1024
#: Bases kept per vertex (the most often seen): a degenerate vertex has many.
_MAX_BASES = 32
#: Share of the search's optimal directions whose vertex the table keeps.
_COVERAGE = 0.998


@dataclass(frozen=True)
class VertexTable:
    """Vertices of one (incidence, norm) LP: V books, each with up to B certificate maps."""

    stakes: FloatArray  # (V, n) the book b_v
    floor: FloatArray  # (V,) min_j (M^T b_v)_j, the book's worst-case payout
    gain: FloatArray  # (V, B, m, n) pi = gain[v, k] @ p + offset[v, k] for basis k of v
    offset: FloatArray  # (V, B, m)
    incidence: FloatArray  # (n, m)
    norm: str

    def vertices(self, probs: FloatArray) -> npt.NDArray[np.intp]:
        """Index of the table vertex with the largest profit for each fully answered set.

        Single precision halves the product's cost; a near-tie it resolves wrongly only
        fails the certificate (the profit is recomputed in double precision there).
        """
        scores = probs.astype(np.float32) @ self.stakes.T.astype(np.float32)
        np.subtract(self.floor.astype(np.float32)[np.newaxis, :], scores, out=scores)
        best: npt.NDArray[np.intp] = np.argmax(scores, axis=1)
        return best

    def weights(
        self, vertices: npt.NDArray[np.intp], probs: FloatArray, bases: int = 1
    ) -> FloatArray:
        """Atom weights pi from the first `bases` bases of each set's vertex.

        Of those, the one whose forecast lies nearest p is kept: at a basis that is
        optimal for p that distance equals the book's profit, which the caller checks.
        """
        width = min(bases, self.gain.shape[1])
        if len(probs) > _CHUNK:  # bound the (sets, bases, m, n) temporaries
            return np.vstack(
                [
                    self.weights(vertices[k : k + _CHUNK], probs[k : k + _CHUNK], width)
                    for k in range(0, len(probs), _CHUNK)
                ]
            )
        gain = self.gain[vertices, :width]
        weights = np.einsum("kbmn,kn->kbm", gain, probs) + self.offset[vertices, :width]
        weights = np.clip(weights, 0.0, None)
        totals = weights.sum(axis=2, keepdims=True)
        weights /= np.where(totals > 0, totals, 1.0)
        if width == 1:
            first: FloatArray = weights[:, 0]
            return first
        gaps = np.abs(weights @ self.incidence.T - probs[:, np.newaxis, :])
        distance = gaps.max(axis=2) if self.norm == "inf" else gaps.sum(axis=2)
        pick = np.argmin(distance, axis=1)
        nearest: FloatArray = weights[np.arange(len(probs)), pick]
        return nearest


def _basis_map(
    incidence: FloatArray,
    norm: str,
    basic_cols: npt.NDArray[np.bool_],
    basic_rows: npt.NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray] | None:
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


def _directions(rng: np.random.Generator, incidence: FloatArray, size: int) -> FloatArray:
    """Stated probabilities to search with: uniform, near-coherent and extreme sets."""
    n, m = incidence.shape
    third = size // 3
    uniform = np.round(rng.uniform(size=(size - 2 * third, n)), 4)
    weights = rng.dirichlet(np.ones(m), size=third)
    near = np.clip(weights @ incidence.T + rng.normal(scale=0.1, size=(third, n)), 0.0, 1.0)
    corners = rng.uniform(size=(third, n)) ** 4
    corners = np.where(rng.uniform(size=(third, n)) < 0.5, corners, 1.0 - corners)
    return np.vstack((uniform, np.round(near, 4), np.round(corners, 4)))


BoolArray = npt.NDArray[np.bool_]
Map = tuple[FloatArray, FloatArray]


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


def _search(incidence: FloatArray, norm: str) -> dict[bytes, tuple[FloatArray, Counter[bytes]]]:
    """Vertex key -> (book, how often each basis was optimal), or {} past MAX_VERTICES."""
    rng = np.random.default_rng(_SEED)
    capacity = 32
    model = BatchModel(incidence, norm, capacity)
    found: dict[bytes, tuple[FloatArray, Counter[bytes]]] = {}
    for _ in range(_MAX_ROUNDS):
        probs = _directions(rng, incidence, _ROUND)
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
        if len(found) > MAX_VERTICES:
            return {}
        if new <= _STOP_SHARE * len(probs):
            break
    return found


def build(incidence: FloatArray, norm: str) -> VertexTable | None:
    """Search the LP's vertices; None when the matrix is too big for a useful table."""
    n, m = incidence.shape
    if n > MAX_EVENTS or m > MAX_ATOMS:
        return None
    found = _search(incidence, norm)
    if not found:
        return None
    entries = sorted(found.values(), key=lambda entry: -entry[1].total())
    # Drop the rarest vertices (those optimal for a sliver of directions): each costs
    # every set a column of the product, and a set that needs one goes to the LP.
    hits = np.array([bases.total() for _, bases in entries])
    keep = int(np.searchsorted(np.cumsum(hits) / hits.sum(), _COVERAGE)) + 1
    entries = entries[:keep]
    stakes = np.array([book for book, _ in entries])
    if norm == "inf":
        stakes = stakes / np.maximum(np.abs(stakes).sum(axis=1, keepdims=True), 1.0)
    else:
        stakes = np.clip(stakes, -1.0, 1.0)
    split = 2 * n + 1
    maps: list[list[Map]] = []
    for _, bases in entries:
        usable: list[Map] = []
        for flags, _ in bases.most_common(_MAX_BASES):
            basic = np.frombuffer(flags, dtype=bool)
            one = _basis_map(incidence, norm, basic[:split], basic[split:])
            if one is not None:
                usable.append(one)
        maps.append(usable or [(np.zeros((m, n)), np.full(m, 1.0 / m))])
    width = max(len(usable) for usable in maps)
    gain = np.zeros((len(maps), width, m, n))
    offset = np.zeros((len(maps), width, m))
    for v, usable in enumerate(maps):
        for k in range(width):  # pad by repeating: a repeat never wins the argmin
            gain[v, k], offset[v, k] = usable[k % len(usable)]
    return VertexTable(
        stakes=stakes,
        floor=(stakes @ incidence).min(axis=1),
        gain=gain,
        offset=offset,
        incidence=incidence,
        norm=norm,
    )


_lock = threading.Lock()
_tables: OrderedDict[tuple[object, ...], VertexTable | None] = OrderedDict()


def key_of(incidence: FloatArray, norm: str) -> tuple[object, ...]:
    """The cache key of a matrix and norm."""
    return (norm, incidence.shape, incidence.tobytes())


def install(tables: dict[tuple[object, ...], VertexTable]) -> None:
    """Put tables built elsewhere (a pool's parent) into this process's cache."""
    with _lock:
        _tables.update(tables)


def table_for(incidence: FloatArray, norm: str) -> VertexTable | None:
    """The cached table of this matrix and norm (built on first use), or None."""
    key = key_of(incidence, norm)
    with _lock:
        if key in _tables:
            _tables.move_to_end(key)
            return _tables[key]
    table = build(incidence, norm)
    with _lock:
        _tables[key] = table
        while len(_tables) > _MAX_CACHED:
            _tables.popitem(last=False)
    return table
