"""The paper's statistics: clustered bootstrap intervals, paired differences, Spearman.

Scores of stock-days that share a date are correlated (the same news moves every
stock), so intervals resample whole dates, not single scores: a percentile bootstrap
over clusters, vectorised with numpy and seeded so every report is reproducible.
"""

from __future__ import annotations

import decimal
import functools
import itertools
import math
import numbers
import sys
import time
from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from scoring import blas
from scoring.inputs import as_real

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_REPS = 20_000
#: Cap on resampled cluster indices held at once (reps x clusters), to bound memory.
_CHUNK_CELLS = 2_000_000
#: Samples resampled together by `cluster_bootstrap_means` (their means held at once).
_BATCH = 64
#: Resampled cluster indices kept for every batch of samples (`_Resamples`): 64 MB at most.
_KEPT_CELLS = 4_000_000
#: Samples resampled together from which the matrix product and its refinement
#: (`_resampled_intervals`) beat gathering (`_gathered_intervals`): measured at 37 clusters
#: and 20,000 replicates.
PRODUCT_FROM_SAMPLES = 4


class Interval(NamedTuple):
    """A point estimate with its percentile bootstrap interval."""

    mean: float
    lo: float
    hi: float

    def excludes_zero(self) -> bool:
        return excludes_zero(self.lo, self.hi)


#: Means closer to zero than this are not told from it: each profit is certified only to
#: within 1e-9 (`scoring.dutch_book.CERTIFY_TOLERANCE`), and one answer set scored in two
#: arms can come out 1e-16 apart in floating point (a referee found -3e-17 [-5.8e-17,
#: -4.2e-18] drawn as an arm effect that excludes zero, between identical answers).
RESOLUTION = 1e-9


def excludes_zero(lo: float, hi: float) -> bool:
    """Whether an interval lies clear of zero by more than `RESOLUTION` (never one with an end
    unknown, NaN: see `MIN_CLUSTERS`; one known end was enough, and an infinite value's
    interval, `[0.55, nan]`, was said to exclude zero)."""
    if math.isnan(lo) or math.isnan(hi):
        return False
    return lo > RESOLUTION or hi < -RESOLUTION


#: Clusters below which no interval is drawn: resampling a single date gives back that date
#: every time, an interval of zero width that says nothing about sampling error (a referee's
#: one-date run read "+0.01207 [+0.01207, +0.01207]" and every difference as significant).
#: Its ends are NaN (null in `summary.json`, "—" in tables); the mean stands.
MIN_CLUSTERS = 2


def _cluster_sums(
    values: npt.ArrayLike,
    clusters: npt.ArrayLike | Sequence[Hashable],
    names: tuple[str, str] = ("values", "clusters"),
) -> tuple[FloatArray, FloatArray]:
    """Per-cluster sum and count of the finite values (NaN scores are left out); errors name
    the values and the clusters as `names` says (`samples[2] values`, `values - baseline`)."""
    name, clusters_name = names
    v = _finite(as_real(values, name).ravel(), name)
    c, shape = _labels(clusters, clusters_name)
    if v.shape != c.shape:
        given, parts = f"{c.size}", ""
        if len(shape) > 1:
            given, parts = f"{c.size}, shape {shape}", " (a label of several parts is a tuple)"
        raise ValueError(
            f"{name} ({v.size}) and {clusters_name} ({given}) must have the same length: one "
            f"label per value{parts}"
        )
    keep = ~np.isnan(v)
    if not keep.any():
        raise ValueError(f"{name} has no finite values to bootstrap (NaN is left out)")
    codes = _codes(c[keep], clusters_name)
    sums = np.bincount(codes, weights=v[keep]).astype(np.float64)
    _summable(sums, c[keep], codes, name)
    counts = np.bincount(codes).astype(np.float64)
    return sums, counts


def _summable(sums: FloatArray, labels: npt.NDArray[Any], codes: IntArray, name: str) -> None:
    """ValueError naming `name` unless every resample's sum is a float: each cluster's sum,
    and the `sums.size` cluster sums a resample adds (one cluster may be picked every time).

    Finite values can add up past the largest float: the mean was inf and its interval NaN
    with a RuntimeWarning ([1e308] * 4 in two clusters), or the interval of the sums that did
    not overflow, beside an infinite mean.
    """
    largest = float(np.abs(sums).max())
    if math.isfinite(largest * sums.size):  # a Python float: inf, not a warning, past the top
        return
    ceiling = f"the largest float ({sys.float_info.max:.3g}): scale the values down"
    if not math.isfinite(largest):
        label = labels[int(np.argmax(codes == int(np.argmax(~np.isfinite(sums)))))]
        label = label.item() if isinstance(label, np.generic) else label  # 'a', not np.str_
        raise ValueError(f"{name} overflow: the values of cluster {label!r} sum past {ceiling}")
    raise ValueError(
        f"{name} overflow: a resample adds {sums.size} cluster sums of up to {largest:.3g}, "
        f"past {ceiling}"
    )


def _finite(values: FloatArray, name: str) -> FloatArray:
    """`values`, or ValueError naming `name` and its first infinite value: an infinite mean has
    no interval (its mean was inf with [0.35, nan], a warning, and another end resampled
    with other samples), and an infinite pair's difference was NaN, dropped unseen."""
    infinite = np.isinf(values)
    if infinite.any():
        at = ", ".join(str(i) for i in np.argwhere(infinite)[0])
        raise ValueError(
            f"{name}[{at}] is {values[infinite][0]}: values must be finite (NaN is left out)"
        )
    return values


#: What a cluster label may be, as errors say it.
LABELS = "strings, numbers or dates, or tuples of them, of one kind that sorts"


def _labels(
    clusters: npt.ArrayLike | Sequence[Hashable], name: str
) -> tuple[npt.NDArray[Any], tuple[int, ...]]:
    """`clusters` as a flat array of labels, with the shape they came in, or ValueError naming
    `name` for a label that is missing (None, NaN, NaT, or a tuple with one among its parts:
    no date to resample by).

    A list of tuples is a list of labels, one per value: numpy made it a matrix, one column
    per item, said to have twice as many labels as values. numpy's own errors (a ragged list)
    and comparisons (None beside a string) named no argument.
    """
    listed = clusters if isinstance(clusters, list | tuple) else None
    tuples = listed is not None and _checked_list(listed, name)
    if np.ma.isMaskedArray(clusters) and np.ma.getmaskarray(clusters).any():
        # `np.asarray` drops the mask, and the label it hid was resampled as any other.
        masked = ", ".join(str(i) for i in np.argwhere(np.ma.getmaskarray(clusters))[0])
        raise ValueError(
            f"{name}[{masked}] is masked: every value needs a cluster label ({LABELS})"
        )
    if listed is not None and tuples:
        labels = np.fromiter(listed, dtype=object, count=len(listed))
    else:
        try:
            labels = np.asarray(clusters)
        except ValueError as error:
            raise ValueError(f"{name} must be labels ({LABELS}): {error}") from error
    shape = labels.shape
    labels = labels.ravel()
    if labels.dtype.kind in "fc":
        missing = np.isnan(labels)
    elif labels.dtype.kind in "mM":
        missing = np.isnat(labels)
    elif labels.dtype == object:
        missing = np.fromiter(map(_missing, labels), dtype=bool, count=labels.size)
    else:
        return labels, shape
    if missing.any():
        at = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"{name}[{at}] is {labels[at]!r}: every value needs a cluster label ({LABELS})"
        )
    return labels, shape


def _checked_list(labels: Sequence[object], name: str) -> bool:
    """`_one_kind` and `_no_lists` of a list of labels, and whether any is a tuple: one pass
    over the list, for its labels' types (three passes of Python's took 200,000 labels from
    0.07 s to 0.23 s), each check walking the list again only where those types show it
    would refuse (a text type among others; a list or an array)."""
    types = set(map(type, labels))
    if len(types) > 1 and any(issubclass(kind, str | bytes) for kind in types):
        _one_kind(labels, name)
    if any(issubclass(kind, list | np.ndarray) for kind in types):
        _no_lists(labels, name)
    return any(issubclass(kind, tuple) for kind in types)


def _one_kind(labels: Sequence[object], name: str) -> None:
    """ValueError naming `name` for a list that mixes text (str, or bytes) with other labels:
    numpy spelled them all as strings, so 1 and "1" (or b"1" and "1") were one cluster, and
    a NaN among strings the cluster "nan" where a missing label is refused."""
    kinds = [str if isinstance(label, str) else bytes if isinstance(label, bytes) else None
             for label in labels]  # fmt: skip
    text = str if str in kinds else bytes if bytes in kinds else None
    if text is None or kinds.count(text) == len(kinds):
        return
    at = next(i for i, kind in enumerate(kinds) if kind is not text)
    if _missing(labels[at]):
        raise ValueError(
            f"{name}[{at}] is {labels[at]!r}: every value needs a cluster label ({LABELS})"
        )
    first = kinds.index(text)
    raise ValueError(
        f"{name}[{at}] is {labels[at]!r} where {name}[{first}] is {labels[first]!r}: "
        f"labels must be {LABELS}"
    )


def _no_lists(labels: Sequence[object], name: str) -> None:
    """ValueError naming `name` for a list (or array) among a list's labels: numpy read them
    as a matrix and flattened it, so [[1], [1], [2], [2]] was four labels and [[1, 2], [3,
    4]] four more, where a list, unhashable, is no label (nor the rows of one)."""
    at = next((i for i, label in enumerate(labels) if isinstance(label, list | np.ndarray)), None)
    if at is not None:
        label = labels[at]
        raise ValueError(
            f"{name} must be labels ({LABELS}), one per value: {name}[{at}] is {label!r}, of "
            f"type {type(label).__name__}, unhashable (a label of several parts is a tuple)"
        )


def _missing(label: object) -> bool:
    """Whether `label` is None, NaN or NaT (the only labels unequal to themselves), or a tuple
    with such a part: a tuple compares its parts by identity first, so `(1, nan)` was a
    cluster of its own for each NaN object, and one cluster for a NaN shared."""
    if label is None:
        return True
    if isinstance(label, tuple):
        return any(map(_missing, label))
    try:
        return bool(label != label)
    except (TypeError, ValueError):  # an array's elementwise answer: not a label, `_codes` says
        return False
    except ArithmeticError:  # a signaling NaN (`Decimal("sNaN")`) refuses to be compared
        return True


def _codes(labels: npt.NDArray[Any], name: str) -> IntArray:
    """Each label's rank among the distinct labels, sorted: `np.unique`'s inverse (an error
    names `name`).

    Python's objects (tuples, a polars column's strings) are told apart by hash and equality,
    not by numpy's sort: a sort that cannot order two labels (frozensets) left equal ones
    apart, and a dict's or None's comparison was numpy's TypeError. Sorting the distinct
    labels then ranks them as `np.unique` does wherever it could.
    """
    if labels.dtype != object:
        codes: IntArray = np.unique(labels, return_inverse=True)[1]
        return codes
    first: dict[Hashable, int] = {}
    try:
        found = np.fromiter(
            (first.setdefault(label, len(first)) for label in labels), np.int64, labels.size
        )
    except TypeError as error:
        raise ValueError(f"{name} must be labels ({LABELS}): {error}") from error
    distinct: list[Any] = list(first)  # sorted if they sort, refused below if not
    try:
        order = sorted(range(len(distinct)), key=distinct.__getitem__)
    except TypeError as error:
        raise ValueError(f"{name} must be labels ({LABELS}): {error}") from error
    rank = np.empty(len(distinct), dtype=np.int64)
    rank[order] = np.arange(len(distinct))
    ranked: IntArray = rank[found]
    return ranked


#: The most replicates an interval is drawn from. Each sample's replicate means are held at
#: once, 8 bytes each and several copies while their quantiles are read (64 samples at a
#: time): reps=10**12 was a MemoryError for 7 TiB, and 10**9 would be gigabytes and hours.
#: A million replicates already pin a 95% interval's ends to about a thousandth of its width.
MAX_REPS = 10_000_000


def _check(reps: int, level: float, seed: int) -> None:
    """ValueError for arguments numpy would refuse in its own words ("an integer is
    required" for reps=True, "expected non-negative integer" for seed=-1), or take: a seed of
    None drew fresh entropy, an interval no second report reproduces; reps past `MAX_REPS`."""
    if not _is_int(reps) or reps < 1:
        raise ValueError(f"reps must be a positive integer, got {reps!r}")
    if reps > MAX_REPS:
        raise ValueError(
            f"reps must be at most {MAX_REPS:,} (every replicate's mean is held in memory), "
            f"got {reps:,}"
        )
    if not 0.0 < _fraction(level) < 1.0:
        raise ValueError(f"level must be a number in (0, 1), got {level!r}")
    if not _is_int(seed) or seed < 0:
        raise ValueError(
            f"seed must be a non-negative integer (intervals are seeded), got {seed!r}"
        )


def _fraction(level: object) -> float:
    """`level` as a float (a `Decimal` too, as `values` may hold them); NaN for anything else,
    or a signaling NaN, which float() refuses."""
    if not isinstance(level, numbers.Real | decimal.Decimal):
        return math.nan
    try:
        return float(level)
    except (ValueError, OverflowError):
        return math.nan


def _is_int(number: object) -> bool:
    """An integer, Python's or numpy's, that is not a bool."""
    return isinstance(number, numbers.Integral) and not isinstance(number, bool | np.bool_)


def _draws(n_clusters: int, reps: int, seed: int) -> Iterator[tuple[int, IntArray]]:
    """(first replicate, resampled cluster indices) chunk by chunk: the same for the same
    seed and number of clusters, whatever is resampled with them."""
    chunk = max(1, _CHUNK_CELLS // n_clusters)
    rng = np.random.default_rng(seed)
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        yield start, rng.integers(0, n_clusters, size=(size, n_clusters))


def _times_picked(picks: IntArray) -> FloatArray:
    """(clusters, rows): how often each row of `picks` picked each cluster."""
    size, n = picks.shape
    flat = (picks + (np.arange(size) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=size * n).reshape(size, n).T.astype(np.float64)


class _Resamples:
    """The resampled clusters of one (number of clusters, reps, seed), chunk by chunk
    (`_draws`), with how often each chunk picked each cluster (`_times_picked`).

    Every batch of samples with that many clusters reads the same chunks: they are drawn
    and counted once and kept when they hold at most `_KEPT_CELLS` indices (16 bytes each,
    the indices and their counts), else drawn again for each use. The same values either
    way; kept, the report's 300-pass curve (155 clusters, five batches) skipped four of
    its five draws and counts, about a third of its time.
    """

    def __init__(self, n_clusters: int, reps: int, seed: int) -> None:
        self.n_clusters, self.reps, self.seed = n_clusters, reps, seed
        self._keep = n_clusters * reps <= _KEPT_CELLS
        self._chunks: list[tuple[int, IntArray, FloatArray]] | None = None

    def picks(self) -> Iterator[tuple[int, IntArray]]:
        """(first replicate, resampled cluster indices) of each chunk."""
        if self._chunks is not None:
            return ((start, picks) for start, picks, _ in self._chunks)
        return _draws(self.n_clusters, self.reps, self.seed)

    def counted(self) -> Iterator[tuple[int, IntArray, FloatArray]]:
        """Each chunk's picks with `_times_picked` of them."""
        if self._chunks is not None:
            return iter(self._chunks)
        chunks = (
            (start, picks, _times_picked(picks))
            for start, picks in _draws(self.n_clusters, self.reps, self.seed)
        )
        if not self._keep:
            return chunks
        self._chunks = list(chunks)
        return iter(self._chunks)


def _resampled_intervals(
    samples: Sequence[tuple[FloatArray, FloatArray]], resamples: _Resamples, tail: float
) -> list[tuple[float, float]]:
    """The (tail, 1 - tail) quantiles of each sample's `reps` bootstrap means, all samples
    with the same number of clusters (so the same resampled indices, drawn once).

    Bit for bit what summing each replicate's picked values one replicate at a time gives
    (numpy's sum of the gathered row, then `np.quantile`), without gathering 20,000 x
    clusters values per sample: a matrix product of the samples by how often each cluster
    was picked gives every mean to within a proven bound (below); only the replicates whose
    mean could be one of the order statistics `np.quantile` reads are then summed the
    gathering way, and the quantiles are read from the means with those put in
    (`_sorted_quantiles`). Replicates farther out keep their approximate means, on the same
    side of every candidate as their exact ones, so the order statistics, hence the
    quantiles, are the exact ones (tested).

    The bound: both sums are of n = clusters terms whose magnitudes add up to A (the
    sample's |sums| times how often each cluster was picked), so each is within
    n*u*A/(1 - n*u) of the true sum (u = 2**-53; the product rounds each term once more);
    the denominators are integers, exact either way; the division rounds each by u
    relatively. 4*(n + 2)*u*A/den covers the difference of the two means with room to
    spare. A/den is a mean of the clusters' |sums|/counts (weighted by counts times picks),
    so the largest of those bounds it for every replicate without a third product (which
    cost about a fifth of this function for the report's 300-pass curve).
    """
    n_clusters, reps = resamples.n_clusters, resamples.reps
    numerators = np.stack([sums for sums, _ in samples])
    first_with: dict[bytes, int] = {}
    for i, (_, counts) in enumerate(samples):
        first_with.setdefault(counts.tobytes(), i)
    counts_rows = np.stack([samples[i][1] for i in first_with.values()])
    row_of = {key: row for row, key in enumerate(first_with)}
    counts_row = [row_of[counts.tobytes()] for _, counts in samples]
    approx = np.empty((len(samples), reps))
    with blas.one_thread():  # small products: OpenBLAS's threads would spin beside the figures
        for start, picks, picked in resamples.counted():
            denominators = (counts_rows @ picked)[counts_row]  # integers: exact in any order
            approx[:, start : start + picks.shape[0]] = (numerators @ picked) / denominators
    # A/den is a mean of |sums|/counts weighted by counts times picks: at most the largest
    # (every count is at least 1: `_cluster_sums` returns only clusters that hold a value).
    largest_bound = np.stack(
        [(np.abs(sums) / counts).max(keepdims=True) for sums, counts in samples]
    )
    slack = 2.0 * 4.0 * (n_clusters + 2) * 2.0**-53 * largest_bound
    candidates = _candidates(approx, slack, tail)
    means = approx  # from here on, the candidates' exact means replace their approximations
    for start, picks in resamples.picks():
        stop = start + picks.shape[0]
        for row, (sums, counts) in enumerate(samples):
            mine = candidates[row][(candidates[row] >= start) & (candidates[row] < stop)]
            if mine.size:
                means[row, mine] = _gathered_means(sums, counts, picks[mine - start])
    return _sorted_quantiles(means, tail)


def _gathered_intervals(
    samples: Sequence[tuple[FloatArray, FloatArray]], resamples: _Resamples, tail: float
) -> list[tuple[float, float]]:
    """`_resampled_intervals` by gathering every replicate's picked values, the definition:
    faster for a few samples than the product and its refinement (tested equal)."""
    means = np.empty((len(samples), resamples.reps))
    for start, picks in resamples.picks():
        for row, (sums, counts) in enumerate(samples):
            means[row, start : start + picks.shape[0]] = _gathered_means(sums, counts, picks)
    return _quantiles(means, tail)


def _gathered_means(sums: FloatArray, counts: FloatArray, picks: IntArray) -> FloatArray:
    """Each row of `picks`'s bootstrap mean, its picked clusters' sums and counts added up by
    numpy row by row: the definition both ways of resampling must equal bit for bit."""
    means: FloatArray = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    return means


def _quantiles(means: FloatArray, tail: float) -> list[tuple[float, float]]:
    """The (tail, 1 - tail) quantiles of each row of `means`."""
    return [(float(lo), float(hi)) for lo, hi in np.quantile(means, [tail, 1.0 - tail], axis=1).T]


def _sorted_quantiles(means: FloatArray, tail: float) -> list[tuple[float, float]]:
    """`_quantiles`, bit for bit, from the order statistics it reads, each row partitioned
    at their ranks (`_ordered_at`).

    `np.quantile` reads the two order statistics around (reps - 1) * q and interpolates by
    the fraction past the first; that interpolation is left to `np.quantile` itself, on the
    pair with the same fraction as its quantile (the same arithmetic on the same numbers).
    A row whose pair holds a zero, or that holds a NaN, takes `np.quantile` whole: two
    orderings may put -0.0 and 0.0 (equal) in different places, and a NaN makes the
    quantile NaN, not an order statistic.
    """
    reps = means.shape[1]
    lo_q, hi_q = tail, 1.0 - tail
    if reps < 2 or (reps - 1) * hi_q >= reps - 1:  # the last rank: np.quantile's own case
        return _quantiles(means, tail)
    belows = [math.floor((reps - 1) * q) for q in (lo_q, hi_q)]
    ordered = _ordered_at(means, [rank for below in belows for rank in (below, below + 1)])
    ends = []
    unsorted = np.isnan(means).any(axis=1)
    for q, below in zip((lo_q, hi_q), belows, strict=True):
        index = (reps - 1) * q
        pair = ordered[:, below : below + 2]
        unsorted |= (pair == 0.0).any(axis=1)
        ends.append(np.quantile(pair, index - below, axis=1))
    found = [(float(lo), float(hi)) for lo, hi in zip(*ends, strict=True)]
    for row in np.flatnonzero(unsorted):
        found[row] = _quantiles(means[row : row + 1], tail)[0]
    return found


def _ordered_at(values: FloatArray, ranks: Sequence[int]) -> FloatArray:
    """`values` with each row holding at each of `ranks` what its sorted copy holds there (a
    NaN counting as the largest, as in a sort): the rows sorted, or partitioned at `ranks`,
    whichever this machine does faster (`_partition_is_faster`); the same values either way."""
    if _partition_is_faster():
        return np.partition(values, sorted(set(ranks)), axis=1)
    return np.sort(values, axis=1)


@functools.cache
def _partition_is_faster() -> bool:
    """Whether numpy partitions rows at a few ranks faster than it sorts them here, timed
    once per process on rows like the report's (a few ms). Machines differ by numpy's
    SIMD sort: 64 rows of 20,000 means sorted in 5 ms and partitioned in 14 on one of this
    project's machines, and took 40 and 17 on another (AMD EPYC); the report's 300-pass
    curve orders 10 such batches twice."""
    rows = (np.sin(np.arange(80_000.0)) * 43_758.5453 % 1.0).reshape(4, 20_000)  # no order
    ranks = [499, 500, 19_499, 19_500]
    spent = {}
    for kind, order in (("sort", lambda: np.sort(rows, axis=1)),
                        ("partition", lambda: np.partition(rows, ranks, axis=1))):  # fmt: skip
        order()  # the first call pays for dispatch set-up, not ordering
        start = time.perf_counter()
        order()
        spent[kind] = time.perf_counter() - start
    return spent["partition"] < spent["sort"]


def _candidates(approx: FloatArray, slack: FloatArray, tail: float) -> list[IntArray]:
    """Per row of `approx`, the replicates whose exact mean could sit at a rank `np.quantile`
    reads for `tail` or `1 - tail` (the two around each virtual index, and one more either
    side for its rounding): every approximate mean within `slack` (twice the row's bound) of
    those ranks' approximate values, since each rank's exact value is within the bound of
    its own."""
    reps = approx.shape[1]
    windows = []
    for q in (tail, 1.0 - tail):
        at = int(np.floor((reps - 1) * q))
        windows.append((max(at - 1, 0), min(at + 2, reps - 1)))
    ordered = _ordered_at(approx, [rank for window in windows for rank in window])
    keep = np.zeros(approx.shape, dtype=bool)
    for low, high in windows:
        keep |= (approx >= ordered[:, low : low + 1] - slack) & (
            approx <= ordered[:, high : high + 1] + slack
        )
    return [np.flatnonzero(row) for row in keep]


def _bootstrap_many(
    samples: Sequence[tuple[FloatArray, FloatArray]], reps: int, seed: int, level: float
) -> list[Interval]:
    """The interval of each (sums, counts) from its clusters resampled `reps` times (its
    ends NaN under `MIN_CLUSTERS` clusters).

    Samples with equally many clusters are resampled together, `_BATCH` at a time so that
    memory stays bounded however many there are.
    """
    _check(reps, level, seed)
    tail = (1.0 - _fraction(level)) / 2.0
    out: dict[int, Interval] = {}
    by_size: dict[int, list[int]] = {}
    for i, (sums, _) in enumerate(samples):
        by_size.setdefault(sums.size, []).append(i)
    for size, members in by_size.items():
        if size < MIN_CLUSTERS:
            for i in members:
                sums, counts = samples[i]
                out[i] = Interval(float(sums.sum() / counts.sum()), math.nan, math.nan)
            continue
        resamples = _Resamples(size, reps, seed)
        for first in range(0, len(members), _BATCH):
            batch = members[first : first + _BATCH]
            # Both ways give the same bits; the product pays only from a few samples on.
            resample = (
                _resampled_intervals if len(batch) >= PRODUCT_FROM_SAMPLES else _gathered_intervals
            )
            quantiles = resample([samples[i] for i in batch], resamples, tail)
            for i, (lo, hi) in zip(batch, quantiles, strict=True):
                sums, counts = samples[i]
                out[i] = Interval(float(sums.sum() / counts.sum()), lo, hi)
    return [out[i] for i in range(len(samples))]


def cluster_bootstrap_mean(
    values: npt.ArrayLike,
    clusters: npt.ArrayLike | Sequence[Hashable],
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Mean of `values` with a percentile interval from resampling whole clusters.

    `clusters` labels each value (the paper uses the date; any hashable labels of one kind
    that sorts, tuples among them: `LABELS`; None, NaN or NaT, or a tuple with one among its
    parts, is a ValueError, a value with no date to resample by). NaN values are dropped, so
    are None and a masked array's masked entries; an infinite value is a ValueError
    (`_finite`), and so are values that are not real numbers (complex numbers, dates,
    strings), naming the argument (`scoring.inputs.as_real`, as `dutch_books` reads `probs`):
    numpy kept a complex number's real part, a warning at most, and read a date as its count
    of days since 1970.
    Returns (mean, lo, hi) as an `Interval`, identical for identical inputs and seed.
    """
    _check(reps, level, seed)
    return _bootstrap_many([_cluster_sums(values, clusters)], reps, seed, level)[0]


def cluster_bootstrap_means(
    samples: Sequence[tuple[npt.ArrayLike, npt.ArrayLike | Sequence[Hashable]]],
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    level: float = 0.95,
) -> list[Interval]:
    """`cluster_bootstrap_mean` of each (values, clusters) pair, in order, with one seed.

    Each interval is identical to `cluster_bootstrap_mean(values, clusters, reps, seed,
    level)`; many samples (the report's k = 1..passes curve) cost one draw of resampled
    clusters per number of clusters instead of one per sample.
    """
    _check(reps, level, seed)
    sums = [
        _cluster_sums(v, c, (f"samples[{i}] values", f"samples[{i}] clusters"))
        for i, (v, c) in enumerate(_pairs(samples))
    ]
    return _bootstrap_many(sums, reps, seed, level)


def _pairs(samples: object) -> list[tuple[Any, Any]]:
    """`samples` as a list of (values, clusters), or ValueError naming `samples`: None was
    a TypeError ("not iterable"), and a 1-tuple numpy's unpacking message, naming neither."""
    try:
        items = list(samples)  # type: ignore[call-overload]
    except TypeError as error:
        raise ValueError(
            f"samples must be a sequence of (values, clusters) pairs, got {type(samples).__name__}"
        ) from error
    pairs = []
    for i, item in enumerate(items):
        try:
            values, clusters = item
        except (TypeError, ValueError) as error:
            raise ValueError(f"samples[{i}] must be a (values, clusters) pair: {error}") from error
        pairs.append((values, clusters))
    return pairs


def paired_difference(
    values: npt.ArrayLike,
    baseline: npt.ArrayLike,
    clusters: npt.ArrayLike | Sequence[Hashable],
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Mean of `values - baseline` (paired by position) with a clustered interval.

    Pairing removes the variation the two share (the same stock-day asked both ways),
    which is why arms are compared this way rather than by two separate intervals.
    Pairs with a NaN on either side are dropped; errors about the differences name them
    `values - baseline`.
    """
    _check(reps, level, seed)
    differences = _difference(values, baseline)
    sums = _cluster_sums(differences, clusters, ("values - baseline", "clusters"))
    return _bootstrap_many([sums], reps, seed, level)[0]


def _difference(
    values: npt.ArrayLike,
    baseline: npt.ArrayLike,
    names: tuple[str, str] = ("values", "baseline"),
) -> FloatArray:
    """`values - baseline`, each read as finite reals (`as_real`, `_finite`: an error names
    the argument), their difference finite too (an error names the pair)."""
    v = _finite(as_real(values, names[0]), names[0])
    b = _finite(as_real(baseline, names[1]), names[1])
    if v.shape != b.shape:
        raise ValueError(f"{names[0]} {v.shape} and {names[1]} {b.shape} must be paired")
    with np.errstate(over="ignore"):  # refused below, naming the pair
        difference = v - b
    overflowed = np.isinf(difference)
    if overflowed.any():
        # Said of the difference: `_finite` said "values[0] is inf" of a finite value.
        index = tuple(np.argwhere(overflowed)[0])
        at = ", ".join(str(i) for i in index)
        raise ValueError(
            f"{names[0]}[{at}] - {names[1]}[{at}] overflows: {float(v[index])!r} - "
            f"{float(b[index])!r} is past the largest float ({sys.float_info.max:.3g}): scale "
            "the values down"
        )
    return difference


def _average_ranks(x: FloatArray) -> FloatArray:
    """Ranks 1..n, ties sharing the average of the ranks they span."""
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_x[1:] != sorted_x[:-1])))
    ends = np.concatenate((starts[1:], [x.size]))
    average = (starts + ends + 1) / 2.0  # mean of ranks start+1 .. end
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(average, ends - starts)
    return ranks


def spearman(x: npt.ArrayLike, y: npt.ArrayLike) -> float:
    """Spearman rank correlation (average ranks for ties); NaN pairs are dropped.

    Returns NaN when either side is constant, as the correlation is then undefined.
    """
    a = as_real(x, "x").ravel()
    b = as_real(y, "y").ravel()
    if a.shape != b.shape:
        raise ValueError(f"x ({a.size}) and y ({b.size}) must have the same length")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if a.size < 2:
        raise ValueError("spearman needs at least two complete pairs")
    ra = _average_ranks(a) - (a.size + 1) / 2.0
    rb = _average_ranks(b) - (b.size + 1) / 2.0
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / denom) if denom > 0 else float("nan")


def pairwise_differences(
    values_by_model: Mapping[str, npt.ArrayLike],
    clusters: npt.ArrayLike | Sequence[Hashable],
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    level: float = 0.95,
) -> dict[tuple[str, str], Interval]:
    """Paired clustered interval of (first - second) for every pair of models.

    Each model's values must be aligned on the same units (and `clusters`). Each interval is
    `paired_difference`'s, the pairs resampled together (as `cluster_bootstrap_means` does);
    errors name the models (`values_by_model['a'] - values_by_model['b']`).
    """
    _check(reps, level, seed)
    models = _models(values_by_model)
    pairs = list(itertools.combinations(sorted(models), 2))
    sums = []
    for a, b in pairs:
        names = (f"values_by_model[{a!r}]", f"values_by_model[{b!r}]")
        differences = _difference(models[a], models[b], names)
        sums.append(_cluster_sums(differences, clusters, (" - ".join(names), "clusters")))
    intervals = _bootstrap_many(sums, reps, seed, level)
    return dict(zip(pairs, intervals, strict=True))


def _models(values_by_model: object) -> Mapping[str, npt.ArrayLike]:
    """`values_by_model`, or ValueError naming it unless it maps model names (str) to values:
    a list was indexed by its own items (TypeError), and a name beside a number could not be
    sorted into pairs (TypeError)."""
    if not isinstance(values_by_model, Mapping):
        raise ValueError(
            "values_by_model must be a mapping of model names (str) to values, got "
            f"{type(values_by_model).__name__}"
        )
    for name in values_by_model:
        if not isinstance(name, str):
            raise ValueError(
                f"values_by_model's keys must be model names (str), got {name!r} "
                f"({type(name).__name__})"
            )
    return values_by_model


def count_pairwise_significant(
    values_by_model: Mapping[str, npt.ArrayLike],
    clusters: npt.ArrayLike | Sequence[Hashable],
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    level: float = 0.95,
) -> int:
    """How many model pairs differ with an interval that excludes zero (the paper's count)."""
    intervals = pairwise_differences(values_by_model, clusters, reps=reps, seed=seed, level=level)
    return sum(interval.excludes_zero() for interval in intervals.values())
