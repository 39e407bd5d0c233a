"""The Dutch-book LP as a lookup: a table of its vertices per incidence matrix.

For a fixed incidence matrix M and norm, the bookie's feasible region (books b within
the stake budget, worst-case payout w <= min_j (M^T b)_j) does not depend on the stated
probabilities p; they only enter the objective w - p.b. The profit of a set is therefore
max over the region's vertices v of (floor_v - p.b_v): one matrix product over a table
of vertices, computed once per matrix, and the argmax is the book.

Sup-norm tables of small matrices (such as the horizon-1 panel: 723 vertices) are
*exact*: every vertex and every basis is enumerated (`scoring.vertex_exact`). Other
tables come from a seeded LP search (`scoring.vertex_search`), which may miss a vertex.
Either way no table answer is trusted: each set is *certified* as the LP's answers are
(`dutch_book._certify`). The book b_v is feasible by construction (a lower bound); for
the upper bound every vertex carries the affine maps p -> pi of its bases (the
complementary-slackness equations), giving a distribution over atoms whose forecast
M pi is exactly `profit` away from p at a basis that is optimal for p. Exact tables also
carry each vertex's dual face (`vertex_exact.Faces`), on which an optimal pi for p is
found directly, without trying bases. A set whose bounds differ by more than the
tolerance goes to the LP instead.

A matrix whose table would be large (many atoms, many events) gets none.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from scoring import vertex_exact, vertex_search
from scoring.inputs import FloatArray

IntArray = npt.NDArray[np.intp]
#: Largest table kept: past it, the matrix product costs more than the LP saves.
MAX_VERTICES = 4096
#: Sup-norm matrices whose enumeration solves at most this many small systems get an
#: exact table (horizon 1: 30,776 systems, built in about 0.2 s; a 7 x 7 matrix 51,641 in
#: 0.3 s; 8 x 8 would be 277,168 in 1.5 s, more than its LP solves cost).
MAX_CANDIDATES = 60_000
#: Only matrices this small get a search at all: the table of a panel with many atoms
#: (horizon 2 and up, two assets) outgrows MAX_VERTICES and the search is wasted.
MAX_EVENTS = 32
MAX_ATOMS = 8
#: A best profit at most this is taken as 0 (a coherent set): the b = 0 vertex's face
#: (p rebuilt as a mixture of atoms; unique when the atoms' columns are independent, as
#: at horizon 1) or its bases are then the ones to try.
_COHERENT = 1e-12
#: (set, basis) pairs evaluated per numpy call (bounds the temporaries).
_PAIRS = 16_384
#: Bases of a vertex beyond which a set is sent to the LP rather than trying them all.
_FEW = 32
#: A face direction's effect on a constraint below this is taken as none.
_SLOPE = 1e-12
_MAX_CACHED = 16


@dataclass(frozen=True)
class VertexTable:
    """Vertices of one (incidence, norm) LP, each with its bases' certificate maps.

    The bases of vertex v are rows start[v]:start[v + 1] of gain and offset (a searched
    table's most often optimal first); pi = gain[k] @ p + offset[k] at basis k.
    """

    stakes: FloatArray  # (V, n) the book b_v, within the stake budget
    floor: FloatArray  # (V,) min_j (M^T b_v)_j, the book's worst-case payout
    gain: FloatArray  # (B, m, n)
    offset: FloatArray  # (B, m)
    start: IntArray  # (V + 1,)
    incidence: FloatArray  # (n, m)
    norm: str
    exact: bool  # every vertex enumerated; vertex 0 is then b = 0
    faces: vertex_exact.Faces | None = None  # exact tables: each vertex's optimal duals

    @cached_property
    def _single(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        return self.stakes.T.astype(np.float32), self.floor.astype(np.float32)

    def vertices(self, probs: FloatArray) -> IntArray:
        """Index of the table vertex with the largest profit for each fully answered set.

        Single precision halves the product's cost; a near-tie it resolves wrongly only
        fails the certificate, and `best_exactly` then decides in double precision.
        """
        stakes, floor = self._single
        scores = probs.astype(np.float32) @ stakes
        np.subtract(floor[np.newaxis, :], scores, out=scores)
        best: IntArray = np.argmax(scores, axis=1)
        return best

    def best_exactly(self, probs: FloatArray) -> IntArray:
        """As `vertices` in double precision; a coherent set (profit 0) gets b = 0."""
        scores = self.floor[np.newaxis, :] - probs @ self.stakes.T
        best: IntArray = np.argmax(scores, axis=1)
        if self.exact:
            best[scores[np.arange(len(probs)), best] <= _COHERENT] = 0
        return best

    def weights(self, vertices: IntArray, probs: FloatArray) -> FloatArray:
        """Atom weights pi for each set at its vertex by the cheap route, NaN where none.

        Exact tables solve for a dual on the vertex's face (`face_weights`) where that has
        two dimensions at most; their other vertices get NaN, which fails the
        certificate. Search-built tables take each vertex's first (most often optimal)
        basis.
        """
        if self.faces is None:
            basis = self.start[vertices]
            raw = np.einsum("kmn,kn->km", self.gain[basis], probs) + self.offset[basis]
            return _distribution(raw)
        out = np.full((len(probs), self.incidence.shape[1]), np.nan)
        small = self.faces.dim[vertices] <= vertex_exact.MAX_DIM
        out[small] = self.face_weights(vertices[small], probs[small])
        return out

    def few_bases(self, vertices: IntArray) -> npt.NDArray[np.bool_]:
        """Whether trying every basis of each vertex is cheaper than the LP (few bases)."""
        few: npt.NDArray[np.bool_] = self.start[vertices + 1] - self.start[vertices] <= _FEW
        return few

    def face_weights(self, vertices: IntArray, probs: FloatArray) -> FloatArray:
        """A dual pi on each vertex's face (of dimension 2 at most) that is optimal for p.

        pi(t) = pi0 + D t must be >= 0 and its forecast within lambda of p in every event:
        constraints a + G t >= 0. One free direction: each constraint bounds t on one side
        and the middle of the interval is taken. Two: Fourier-Motzkin elimination of t2
        (every pair of a lower and an upper bound on t2 gives a bound on t1) picks t1 in the
        middle of its exact range, then t2 in the middle of its interval at that t1.
        """
        assert self.faces is not None
        faces = self.faces
        base = np.einsum("kmn,kn->km", faces.gain[vertices], probs) + faces.offset[vertices]
        profit = self.floor[vertices] - np.einsum("kn,kn->k", probs, self.stakes[vertices])
        miss = base @ self.incidence.T - probs
        dim = faces.dim[vertices]
        for size in (1, 2):  # dim 0: the face is one point, base itself
            sets = np.flatnonzero(dim == size)
            if not sets.size:
                continue
            on = vertices[sets]
            slack = np.hstack(
                (base[sets], (profit[sets] - miss[sets].T).T, (profit[sets] + miss[sets].T).T)
            )  # pi >= 0, then forecast within profit of p from above and from below
            slope = faces.slope[on]
            t = np.zeros((sets.size, 2))
            if size == 2:
                t[:, 0] = _middle(*_eliminate(slack, slope))
                slack = slack + slope[:, :, 0] * t[:, :1]
            t[:, size - 1] = _middle(slack, slope[:, :, size - 1])
            base[sets] += np.einsum("kmd,kd->km", faces.direction[on], t)
        return _distribution(base)

    def weights_all(self, vertices: IntArray, probs: FloatArray) -> tuple[FloatArray, IntArray]:
        """Atom weights pi from every basis of each set's vertex, the one nearest p kept.

        At a basis that is optimal for p the forecast M pi lies exactly `profit` from p,
        and no distribution lies nearer, so the nearest is the one the caller certifies.
        Also returns which basis that was. One matrix product per vertex.
        """
        n, m = self.incidence.shape
        weights = np.empty((len(probs), m))
        chosen = np.empty(len(probs), dtype=np.intp)
        for v in np.unique(vertices):
            sets = np.flatnonzero(vertices == v)
            bases = slice(int(self.start[v]), int(self.start[v + 1]))
            count = bases.stop - bases.start
            for lo in range(0, len(sets), max(1, _PAIRS // count)):
                part = sets[lo : lo + max(1, _PAIRS // count)]
                raw = self.gain[bases].reshape(count * m, n) @ probs[part].T
                raw = raw.reshape(count, m, -1) + self.offset[bases, :, np.newaxis]
                pi = _distribution(raw.transpose(2, 0, 1).reshape(-1, m))  # (set, basis)
                gaps = np.abs(pi @ self.incidence.T - np.repeat(probs[part], count, axis=0))
                distance = gaps.max(axis=1) if self.norm == "inf" else gaps.sum(axis=1)
                pick = np.argmin(distance.reshape(len(part), count), axis=1)
                weights[part] = pi.reshape(len(part), count, m)[np.arange(len(part)), pick]
                chosen[part] = bases.start + pick
        return weights, chosen


def _distribution(raw: FloatArray) -> FloatArray:
    """Clip solver-free rounding below 0 and renormalise: pi must be a distribution."""
    weights = np.clip(raw, 0.0, None)
    totals = weights.sum(axis=1, keepdims=True)
    weights /= np.where(totals > 0, totals, 1.0)
    return weights


def _middle(slack: FloatArray, slope: FloatArray) -> FloatArray:
    """Per row, the middle of the interval of t where slack + slope t >= 0 holds throughout.

    A row whose interval is unbounded on one side gets its finite end, one with no
    bound at all 0; an empty interval (the face missed: a tie or rounding) still gets a
    value, which the certificate then rejects or accepts.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = -slack / slope
    low = np.max(np.where(slope > _SLOPE, bound, -np.inf), axis=1, initial=-np.inf)
    high = np.min(np.where(slope < -_SLOPE, bound, np.inf), axis=1, initial=np.inf)
    both = np.isfinite(low) & np.isfinite(high)
    middle = np.where(both, (np.where(both, low, 0.0) + np.where(both, high, 0.0)) / 2, 0.0)
    ends = np.where(np.isfinite(low), low, np.where(np.isfinite(high), high, 0.0))
    out: FloatArray = np.where(both, middle, ends)
    return out


def _eliminate(slack: FloatArray, slope: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Constraints on t1 alone implied by slack + slope @ (t1, t2) >= 0 (Fourier-Motzkin).

    A constraint with t2's coefficient g > 0 bounds t2 below by -(a + g1 t1) / g, one with
    g < 0 above; every such pair must be ordered, which is linear in t1. Constraints
    without t2 are kept as they are. Non-pairs are padded with 1 + 0 t1 >= 0.
    """
    g2 = slope[:, :, 1]
    lower = g2 > _SLOPE
    upper = g2 < -_SLOPE
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(lower | upper, slack / g2, 0.0)
        g = np.where(lower | upper, slope[:, :, 0] / g2, 0.0)
    pair = lower[:, :, np.newaxis] & upper[:, np.newaxis, :]
    pair_slack = np.where(pair, a[:, :, np.newaxis] - a[:, np.newaxis, :], 1.0)
    pair_slope = np.where(pair, g[:, :, np.newaxis] - g[:, np.newaxis, :], 0.0)
    alone = ~(lower | upper)
    return (
        np.hstack((pair_slack.reshape(len(slack), -1), np.where(alone, slack, 1.0))),
        np.hstack((pair_slope.reshape(len(slack), -1), np.where(alone, slope[:, :, 0], 0.0))),
    )


def _in_budget(books: FloatArray, norm: str) -> FloatArray:
    """Books scaled (or clipped) into the stake budget exactly, as `_certify` reads them."""
    if norm == "inf":
        scaled: FloatArray = books / np.maximum(np.abs(books).sum(axis=1, keepdims=True), 1.0)
        return scaled
    clipped: FloatArray = np.clip(books, -1.0, 1.0)
    return clipped


def _assemble(
    incidence: FloatArray,
    norm: str,
    books: FloatArray,
    owner: IntArray,
    gain: FloatArray,
    offset: FloatArray,
    exact: bool,
) -> VertexTable:
    """A table from books and bases (basis k belongs to book owner[k]), grouped by book."""
    order = np.argsort(owner, kind="stable")
    stakes = _in_budget(books, norm)
    floor = (stakes @ incidence).min(axis=1)
    return VertexTable(
        stakes=stakes,
        floor=floor,
        gain=gain[order],
        offset=offset[order],
        start=np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=len(books))))),
        incidence=incidence,
        norm=norm,
        exact=exact,
        faces=vertex_exact.faces(incidence, stakes, floor) if exact else None,
    )


def is_exact(shape: tuple[int, ...], norm: str) -> bool:
    """Whether a matrix of this shape gets an enumerated (exact) table in this norm."""
    n, m = shape
    return norm == "inf" and vertex_exact.candidate_count(n, m, MAX_CANDIDATES) <= MAX_CANDIDATES


def build(incidence: FloatArray, norm: str) -> VertexTable | None:
    """Enumerate (or search) the LP's vertices; None when the table would be too big."""
    n, m = incidence.shape
    if is_exact(incidence.shape, norm):
        found = vertex_exact.enumerate_bases(incidence)
        if len(found.books) > MAX_VERTICES:
            return None
        return _assemble(
            incidence, norm, found.books, found.owner, found.gain, found.offset, exact=True
        )
    if n > MAX_EVENTS or m > MAX_ATOMS:
        return None
    searched = vertex_search.search(incidence, norm, MAX_VERTICES)
    if not searched:
        return None
    owner = np.repeat(np.arange(len(searched)), [len(maps) for _, maps in searched])
    maps = [one for _, usable in searched for one in usable]
    return _assemble(
        incidence,
        norm,
        np.array([book for book, _ in searched]),
        owner,
        np.array([g for g, _ in maps]),
        np.array([o for _, o in maps]),
        exact=False,
    )


_lock = threading.Lock()
_tables: OrderedDict[tuple[object, ...], VertexTable | None] = OrderedDict()


def _new_locks() -> None:
    """In a forked child: the cache's lock made anew. Another thread of the parent may have
    held it at the fork, and the child's copy stayed held: its first table waited for ever.
    The tables are kept: each is put in whole, under the lock.

    So is the lock that `functools.cached_property` holds as it computes `_single`, on
    Python 3.11 (one for the class, not one a table; 3.12 has none): held at the fork, it
    stopped the child's first product with any table not used before."""
    global _lock
    _lock = threading.Lock()
    single = vars(VertexTable)["_single"]
    if hasattr(single, "lock"):
        single.lock = threading.RLock()


os.register_at_fork(after_in_child=_new_locks)


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
