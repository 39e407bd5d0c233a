"""The incoherence score: the largest guaranteed Dutch-book profit against a forecast.

`dutch_books` scores many answer sets over one incidence matrix. It solves them in
batches through `BatchModel` and then *certifies* every set without trusting the solver:
the stakes (rescaled into the stake budget) give a lower bound on the profit, the
nearest coherent forecast (an explicit mixture of atoms) gives an upper bound, and the
two must agree to 1e-9. A set that fails the check is re-solved alone (then, if need be,
with its objective scaled: `_LONE_COST_SCALES`); if that fails too, an error is raised
rather than a wrong score returned. So is a set whose bounds leave open whether it is
coherent at all (`_undecided`: a book guaranteeing no more than rounding, a mixture further
than rounding from p): the solver's tolerances let a coherent set come back 1e-10 short,
and the re-solve decides it, a coherent set then scoring 0.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from scoring import blas, vertex_table
from scoring.batch_lp import BatchModel, block_matrix
from scoring.inputs import FloatArray, as_incidence, as_probs

NORMS = ("inf", "l1")

#: Largest gap allowed between the certified lower and upper bounds on a profit.
CERTIFY_TOLERANCE = 1e-9

#: A profit no larger than this is floating-point rounding of a coherent set's zero (sums
#: of atoms' weights err by about 1e-16 per term), reported as exactly 0.
ROUNDING_PROFIT = 1e-12

#: Nonzeros per batched model: big enough to amortise the per-call overhead, small
#: enough that pivots stay cheap. Measured with bench/lp.py: about 32 horizon-1 sets per
#: model, one horizon-4 set.
_TARGET_NONZEROS = 4096
_MAX_CACHED_MODELS = 8
#: Objective scales of a lone re-solve, tried in turn until one is certified. HiGHS's dual
#: feasibility tolerance is absolute and 1e-10 at the finest, and in the l1 norm each of the
#: n contracts may stake 1: a near-coherent set over horizon 2's 52 events stopped up to
#: n x 1e-10 short of optimal on both sides, a gap past CERTIFY_TOLERANCE (about 1 in 10
#: such sets raised). Scaled by 2^10 the tolerance is as much finer; the certificate is the same.
#: An undecided set (`_undecided`) needs its gap under ROUNDING_PROFIT: at 2^10 a coherent
#: set over horizon 2's 52 events still scored up to 2.4e-12 in the l1 norm, at 2^20 (a
#: tolerance of 1e-16, the rounding of the sums themselves) 0.
_LONE_COST_SCALES = (1.0, 1024.0, 1048576.0)
#: Fully answered sets a call needs before it uses (and if need be builds) a vertex
#: table: building one costs about as much as solving a few thousand sets by LP (at 512,
#: a paper-scale campaign's linked sets built 103 tables for about 900 sets each and scored
#: 4.5x slower than by LP alone). The choice depends only on the call's own inputs, so a set
#: scored in a call of the same sets gets the same answer in any process, whatever was
#: scored before.
TABLE_MIN_SETS = 4096
#: The same for a matrix whose table is enumerated exactly (`vertex_table.is_exact`):
#: building the horizon-1 table takes about as long as solving EXACT_TABLE_MIN_SETS sets
#: by LP a few times over, and a campaign reuses it for every call over that matrix.
EXACT_TABLE_MIN_SETS = 256
#: Sets scored against a table at a time: each takes a row of every (sets x vertices)
#: product, so one call of 100,000 horizon-1 sets in the l1 norm (1,595 vertices) peaked at
#: 2.4 GB. A slice holds at most 4096 x MAX_VERTICES scores. The pool's chunks are no larger
#: (`scoring.pool.CHUNK_SETS`, tested), so a run's scores are as before; a direct call of
#: more sets may return another book or nearest forecast as certified (neither is unique),
#: and profits within 1e-14.
TABLE_SLICE_SETS = 4096


@dataclass(frozen=True)
class DutchBookResult:
    """Scores of K answer sets over one incidence matrix.

    `profit` (K,) is the guaranteed profit (0 = coherent; NaN when a set answered
    nothing); `stakes` (K, n) the Dutch book, positive = buy the contract at its stated
    price, negative = sell; `coherent` (K, n) a nearest coherent forecast in `norm`
    (in these norms it need not be unique, nor need the book; the profit is). Both are
    NaN for unanswered events. A 1-D `probs` gives K = 1.
    """

    profit: FloatArray
    stakes: FloatArray
    coherent: FloatArray
    norm: str


_local = threading.local()


def _model_for(incidence: FloatArray, norm: str, capacity: int) -> BatchModel:
    """A cached model per thread: HiGHS objects are not safe to share between threads."""
    cache: OrderedDict[tuple[object, ...], BatchModel] | None = getattr(_local, "models", None)
    if cache is None:
        cache = OrderedDict()
        _local.models = cache
    key = (norm, capacity, incidence.shape, incidence.tobytes())
    model = cache.get(key)
    if model is None:
        model = BatchModel(incidence, norm, capacity)
        cache[key] = model
        while len(cache) > _MAX_CACHED_MODELS:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return model


def _capacity(n_sets: int, nonzeros_per_block: int) -> int:
    """Sets per batch: a power of two (so few distinct models are cached) near the target."""
    limit = max(1, _TARGET_NONZEROS // max(1, nonzeros_per_block))
    capacity = 1
    while capacity < n_sets and 2 * capacity <= limit:
        capacity *= 2
    return capacity


def _certify(
    incidence: FloatArray,
    probs: FloatArray,
    weights: FloatArray,
    stakes: FloatArray,
    norm: str,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Turn raw solver output into (profit, stakes, coherent, gap) checked by weak duality."""
    answered = ~np.isnan(probs)
    p = np.where(answered, probs, 0.0)
    pi = np.clip(weights, 0.0, None)
    totals = pi.sum(axis=1, keepdims=True)
    pi = np.where(totals > 0, pi / np.where(totals > 0, totals, 1.0), 1.0 / pi.shape[1])
    coherent = pi @ incidence.T
    diff = np.where(answered, coherent - p, 0.0)
    upper = np.abs(diff).max(axis=1) if norm == "inf" else np.abs(diff).sum(axis=1)

    book = np.where(answered, stakes, 0.0)
    if norm == "inf":
        total = np.abs(book).sum(axis=1, keepdims=True)
        book = book / np.maximum(total, 1.0)
    else:
        book = np.clip(book, -1.0, 1.0)
    worst_payoff = (book @ incidence).min(axis=1) - (book * p).sum(axis=1)
    gap = upper - worst_payoff

    # A coherent set's nearest forecast is itself, but the mixture's product lands 1e-16 or
    # so away: that rounding is not a profit (and the certificate resolves only 1e-9).
    profit = np.where(upper <= ROUNDING_PROFIT, 0.0, upper)
    profit[~answered.any(axis=1)] = np.nan
    # + 0.0 turns a -0.0 (an untraded contract's stake as HiGHS returns it, a stated -0.0)
    # into 0.0 and leaves every other value as it is: `check` printed "A": -0.0.
    return (
        profit,
        np.where(answered, book, np.nan) + 0.0,
        np.where(answered, coherent, np.nan) + 0.0,
        gap,
    )


def _solve(incidence: FloatArray, probs: FloatArray, norm: str) -> tuple[FloatArray, ...]:
    n_sets, n = probs.shape
    capacity = _capacity(n_sets, int(np.count_nonzero(block_matrix(incidence, norm))))
    model = _model_for(incidence, norm, capacity)
    model.reset()
    weights = np.empty((n_sets, incidence.shape[1]))
    stakes = np.empty((n_sets, n))
    for start in range(0, n_sets, capacity):
        chunk = probs[start : start + capacity]
        solution = model.solve(chunk)
        # Not optimal (rare): NaN weights make the certificate send each set to a lone solve.
        weights[start : start + len(chunk)] = solution.atom_weights if solution.ok else np.nan
        stakes[start : start + len(chunk)] = solution.stakes
    return _certify(incidence, probs, weights, stakes, norm)


def uses_table(shape: tuple[int, ...], norm: str, complete_sets: int) -> bool:
    """Whether a call with this many fully answered sets over such a matrix uses a table.

    Decided by the call's own inputs only, so a set gets the same answer in any process
    whatever was scored before (tables are cached per process).
    """
    if vertex_table.is_exact(shape, norm):
        return complete_sets >= EXACT_TABLE_MIN_SETS
    return complete_sets >= TABLE_MIN_SETS


def _from_table(
    table: vertex_table.VertexTable, incidence: FloatArray, sets: FloatArray, norm: str
) -> tuple[FloatArray, ...]:
    """Certified answers from the table, `TABLE_SLICE_SETS` sets at a time."""
    if len(sets) <= TABLE_SLICE_SETS:  # a run's every call (the pool's chunks): no copy
        return _from_table_slice(table, incidence, sets, norm)
    parts = [
        _from_table_slice(table, incidence, sets[start : start + TABLE_SLICE_SETS], norm)
        for start in range(0, len(sets), TABLE_SLICE_SETS)
    ]
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def _from_table_slice(
    table: vertex_table.VertexTable, incidence: FloatArray, sets: FloatArray, norm: str
) -> tuple[FloatArray, ...]:
    """Certified answers from the table (a set's gap says whether it is certified).

    First the best vertex in single precision with a dual from `table.weights`; a set
    that fails that, or that it leaves undecided (`_undecided`), gets the best vertex in
    double precision (a coherent set: b = 0, whose face rebuilds p as a mixture) with a
    dual from `table.weights` again, then from every one of its bases (a degenerate
    vertex has several, and only one may be optimal for this p) when it has few; a later
    answer replaces an uncertified one, or a certified one of more profit (each is an
    upper bound). What is still uncertified is left to the LP.
    """
    vertices = table.vertices(sets)
    found = _certify(incidence, sets, table.weights(vertices, sets), table.stakes[vertices], norm)
    for every_basis in (False, True):
        certified = found[3] <= CERTIFY_TOLERANCE
        again = np.flatnonzero(~certified | _undecided(found[0], found[3]))
        best = table.best_exactly(sets[again])
        if every_basis:
            few = table.few_bases(best)
            again, best = again[few], best[few]
        if not again.size:
            continue
        if every_basis:
            weights = table.weights_all(best, sets[again])[0]
        else:
            weights = table.weights(best, sets[again])
        second = _certify(incidence, sets[again], weights, table.stakes[best], norm)
        tighter = (second[3] <= CERTIFY_TOLERANCE) & (second[0] < found[0][again])
        better = ~certified[again] | tighter
        for part, value in zip(found, second, strict=True):
            part[again[better]] = value[better]
    return found


def _from_tables(
    incidence: FloatArray, probs: FloatArray, norm: str, out: tuple[FloatArray, ...]
) -> npt.NDArray[np.bool_]:
    """Fill `out` with the table's certified answers; True where a set still needs the LP.

    Sets are taken by the events they answered: an unanswered event drops out of the LP,
    so a set missing some is scored over the matrix of the rest, whose own table (exact
    and cheap when small) is used when enough sets share that pattern.
    """
    answered = ~np.isnan(probs)
    complete = answered.all(axis=1)
    groups = [(np.flatnonzero(complete), np.ones(probs.shape[1], dtype=bool))]
    partial = np.flatnonzero(~complete & answered.any(axis=1))
    if partial.size:
        patterns, inverse = np.unique(answered[partial], axis=0, return_inverse=True)
        inverse = np.asarray(inverse).ravel()
        groups += [(partial[inverse == k], pattern) for k, pattern in enumerate(patterns)]
    rest = np.ones(len(probs), dtype=bool)
    for members, events in groups:
        sub = incidence[events]
        if not uses_table(sub.shape, norm, members.size):
            continue
        table = vertex_table.table_for(sub, norm)
        if table is None:
            continue
        found = _from_table(table, sub, probs[np.ix_(members, events)], norm)
        certified = found[3] <= CERTIFY_TOLERANCE
        done = members[certified]
        for part, value in zip(out, found, strict=True):
            if part.ndim == 1:
                part[done] = value[certified]
            else:
                part[np.ix_(done, events)] = value[certified]
        rest[done] = False
    return rest


def _solve_fast(incidence: FloatArray, probs: FloatArray, norm: str) -> tuple[FloatArray, ...]:
    """Certified answers from vertex tables where they have them, the batched LP elsewhere."""
    n_sets, n = probs.shape
    out = (
        np.full(n_sets, np.nan),
        np.full((n_sets, n), np.nan),
        np.full((n_sets, n), np.nan),
        np.full(n_sets, np.inf),
    )
    rest = _from_tables(incidence, probs, norm, out)
    if rest.any():
        solved = _solve(incidence, probs[rest], norm)
        for part, value in zip(out, solved, strict=True):
            part[rest] = value
    return out


class UncertifiedError(RuntimeError):
    """A set whose profit no solve could certify to `CERTIFY_TOLERANCE`: raised rather than
    an inexact score returned (a RuntimeError, as it was before it had a name).

    `set_index` is the set's row in the probabilities of the call that raised it, `gap` the
    duality gap its last solve left; `job` is None from `dutch_books`, and from a call given
    a list of jobs or groups (`scoring.solve_grouped`, `scoring.pool.score_groups`) the one
    the set is in, `set_index` then its row there (`placed`): a caller that knows what each
    job is can name the set, where "set 17" of a batch named nothing it knew. They cross
    from a pool's worker with the error (pickled with its `__dict__`, its message as its one
    argument)."""

    def __init__(
        self,
        message: str,
        *,
        set_index: int | None = None,
        gap: float | None = None,
        job: int | None = None,
    ) -> None:
        super().__init__(message)
        self.set_index, self.gap, self.job = set_index, gap, job

    def placed(self, job: int, set_index: int | None) -> UncertifiedError:
        """The same set, as the row `set_index` of the `job`th of a caller's jobs."""
        where = f"set {set_index} of job {job}" if set_index is not None else f"job {job}"
        return UncertifiedError(self.says(where), set_index=set_index, gap=self.gap, job=job)

    def says(self, where: str) -> str:
        """This error's message for its set as a caller names it (`where`)."""
        return _uncertified_says(where, self.gap)


def _uncertified_says(where: str, gap: float | None) -> str:
    """`UncertifiedError`'s message for the set `where`, whose last solve left `gap`."""
    left = "" if gap is None else f" (duality gap {gap:.3g} > {CERTIFY_TOLERANCE:g})"
    return f"Dutch-book LP for {where} could not be certified{left}"


def _undecided(profit: FloatArray, gap: FloatArray) -> npt.NDArray[np.bool_]:
    """Sets whose certificate leaves open whether they are coherent at all.

    Such a set's book guarantees at most `ROUNDING_PROFIT` (its lower bound, profit - gap),
    yet its mixture is further than that from p (the profit, its upper bound, is not 0). The
    solver's tolerances are absolute, 1e-10: it took a probability 1e-10 for 0 and stopped a
    coherent set's mixture 1e-10 short (a tester's (0.3337, 1e-10) over exclusive events
    scored 1e-10), within the certificate's 1e-9 but not 0. A set proven incoherent, its
    book above rounding, is decided whatever its gap.
    """
    undecided: npt.NDArray[np.bool_] = (profit > 0) & (profit - gap <= ROUNDING_PROFIT)
    return undecided


def _solve_certified(
    matrix: FloatArray, sets: FloatArray, norm: str
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(profit, stakes, coherent) of every set, each certified or an error raised.

    A set that failed the certificate is solved again alone; so is one it left undecided
    (`_undecided`), from the first scale past a batch's 1, keeping its certified
    answer unless a lone one is tighter.
    """
    profit, stakes, coherent, gap = _solve_fast(matrix, sets, norm)
    failed = ~(gap <= CERTIFY_TOLERANCE) & ~np.isnan(profit)
    for k in np.flatnonzero(failed | _undecided(profit, gap)):
        scales = _LONE_COST_SCALES if failed[k] else _LONE_COST_SCALES[1:]
        fixed = _solve_lone(matrix, sets[k : k + 1], norm, scales)
        if not fixed[3][0] <= CERTIFY_TOLERANCE:
            if not failed[k]:
                continue  # the batch's answer is certified, and no tighter one was found
            left = float(fixed[3][0])
            raise UncertifiedError(_uncertified_says(f"set {k}", left), set_index=int(k), gap=left)
        if failed[k] or fixed[0][0] < profit[k]:
            profit[k], stakes[k], coherent[k] = fixed[0][0], fixed[1][0], fixed[2][0]
    return profit, stakes, coherent


def _solve_lone(
    matrix: FloatArray, one: FloatArray, norm: str, scales: tuple[float, ...]
) -> tuple[FloatArray, ...]:
    """One set solved alone, from a cleared basis, at each objective scale in turn until
    its answer is certified and decided (`_undecided`), then the same with the other simplex
    (`BatchModel.use_other_simplex`): the first certified and decided answer is returned,
    whatever the profits of the undecided ones before it (all certified within 1e-9 of it);
    else the certified answer of the least profit (each is an upper bound), else the last
    try's (with its gap). The model is left with its own simplex, whatever happens."""
    lone = _model_for(matrix, norm, 1)
    best: tuple[FloatArray, ...] | None = None
    try:
        for other, scale in itertools.product((False, True), scales):
            lone.use_other_simplex(other)
            lone.reset()
            solution = lone.solve(one, cost_scale=scale)
            fixed = _certify(matrix, one, solution.atom_weights, solution.stakes, norm)
            if fixed[3][0] <= CERTIFY_TOLERANCE:
                if not _undecided(fixed[0], fixed[3])[0]:
                    return fixed
                if best is None or fixed[0][0] < best[0][0]:
                    best = fixed
    finally:
        lone.use_other_simplex(False)
    return fixed if best is None else best


def dutch_books(
    incidence: npt.ArrayLike, probs: npt.ArrayLike, norm: str = "inf"
) -> DutchBookResult:
    """Score each answer set by its largest guaranteed Dutch-book profit.

    `incidence` is (n events, m atoms), 1 where the event holds in the atom. `probs` is
    (n,) or (K, n); NaN marks an unanswered event, and that set is scored on its
    answered events only. `norm="inf"` caps the total stake at 1 (the paper's metric,
    equal to the sup-norm distance to the coherent set); `norm="l1"` caps each contract
    at 1 (the family benchmark's, equal to the L1 distance).
    """
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    matrix = as_incidence(incidence)
    sets, _ = as_probs(probs, matrix.shape[0])
    n_sets, n = sets.shape
    if n_sets == 0 or n == 0:
        nan_sets = np.full((n_sets, n), np.nan)
        return DutchBookResult(np.full(n_sets, np.nan), nan_sets, nan_sets.copy(), norm)

    with blas.one_thread():
        profit, stakes, coherent = _solve_certified(matrix, sets, norm)
    return DutchBookResult(profit=profit, stakes=stakes, coherent=coherent, norm=norm)
