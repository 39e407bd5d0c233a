"""Behaviour of `scoring.stats`: clustered bootstrap, paired differences, Spearman."""

from __future__ import annotations

import decimal
import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import spearmanr

from scoring import stats

REPS = 2_000  # enough to test behaviour; the default (20,000) is for reports


def clustered_sample(n_clusters: int, per_cluster: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Values sharing a strong per-cluster shock, as stock-days on one date do."""
    rng = np.random.default_rng(seed)
    shock = rng.normal(size=n_clusters)
    clusters = np.repeat(np.arange(n_clusters), per_cluster)
    return shock[clusters] + 0.1 * rng.normal(size=clusters.size), clusters


@pytest.mark.filterwarnings("ignore:An input array is constant")
@given(
    pairs=st.lists(
        st.tuples(st.integers(0, 6), st.integers(-3, 3)),  # small ranges force ties
        min_size=3,
        max_size=40,
    )
)
def test_spearman_matches_scipy_with_ties(pairs: list[tuple[int, int]]) -> None:
    x, y = (np.array(v, dtype=float) for v in zip(*pairs, strict=True))
    expected = spearmanr(x, y).statistic
    got = stats.spearman(x, y)
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_spearman_drops_incomplete_pairs() -> None:
    assert stats.spearman([1, 2, np.nan, 3], [1, 2, 5, 3]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_bootstrap_interval_contains_the_mean_and_is_deterministic() -> None:
    values, clusters = clustered_sample(30, 5, seed=1)
    first = stats.cluster_bootstrap_mean(values, clusters, reps=REPS, seed=11)
    again = stats.cluster_bootstrap_mean(values, clusters, reps=REPS, seed=11)
    other = stats.cluster_bootstrap_mean(values, clusters, reps=REPS, seed=12)
    assert first == again
    assert other != first and other.mean == first.mean
    assert first.lo < first.mean < first.hi
    assert first.mean == pytest.approx(values.mean())


def test_interval_shrinks_with_more_clusters() -> None:
    small = stats.cluster_bootstrap_mean(*clustered_sample(20, 5, seed=2), reps=REPS, seed=0)
    large = stats.cluster_bootstrap_mean(*clustered_sample(500, 5, seed=2), reps=REPS, seed=0)
    assert (large.hi - large.lo) < 0.5 * (small.hi - small.lo)


def test_clustering_widens_the_interval_when_values_move_together() -> None:
    values, clusters = clustered_sample(40, 10, seed=3)
    by_date = stats.cluster_bootstrap_mean(values, clusters, reps=REPS, seed=0)
    naive = stats.cluster_bootstrap_mean(values, np.arange(values.size), reps=REPS, seed=0)
    assert (by_date.hi - by_date.lo) > 2 * (naive.hi - naive.lo)


def test_default_is_twenty_thousand_replicates_and_nan_is_dropped() -> None:
    values = np.array([1.0, 2.0, np.nan, 4.0])
    result = stats.cluster_bootstrap_mean(values, ["d1", "d1", "d2", "d2"])
    assert result.mean == pytest.approx(7 / 3)
    assert stats.DEFAULT_REPS == 20_000
    # two clusters: means {1.5, 4, 7/3 (both)}, so the interval spans the cluster means
    assert result.lo == pytest.approx(1.5) and result.hi == pytest.approx(4.0)


def test_paired_difference_is_the_bootstrap_of_differences() -> None:
    values, clusters = clustered_sample(25, 4, seed=4)
    baseline = values - 0.3 + 0.01 * np.random.default_rng(0).normal(size=values.size)
    paired = stats.paired_difference(values, baseline, clusters, reps=REPS, seed=5)
    direct = stats.cluster_bootstrap_mean(values - baseline, clusters, reps=REPS, seed=5)
    assert paired == direct
    assert paired.excludes_zero() and paired.mean == pytest.approx(0.3, abs=0.01)
    # pairing removes the shared shock that separate intervals would carry
    alone = stats.cluster_bootstrap_mean(values, clusters, reps=REPS, seed=5)
    assert (paired.hi - paired.lo) < 0.1 * (alone.hi - alone.lo)


def test_count_pairwise_significant() -> None:
    values, clusters = clustered_sample(30, 4, seed=6)
    noise = np.random.default_rng(1).normal(scale=0.01, size=(3, values.size))
    models = {
        "a": values + noise[0],
        "b": values + 0.5 + noise[1],
        "c": values + 1.0 + noise[2],
    }
    assert stats.count_pairwise_significant(models, clusters, reps=REPS, seed=0) == 3
    same = {"a": values + noise[0], "b": values + noise[1], "c": values + noise[2] + 1.0}
    pairs = stats.pairwise_differences(same, clusters, reps=REPS, seed=0)
    assert set(pairs) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert not pairs[("a", "b")].excludes_zero()
    assert stats.count_pairwise_significant(same, clusters, reps=REPS, seed=0) == 2


def test_misaligned_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="same length"):
        stats.cluster_bootstrap_mean([1.0, 2.0], ["d1"])
    with pytest.raises(ValueError, match="paired"):
        stats.paired_difference([1.0, 2.0], [1.0], ["d1", "d2"])
    with pytest.raises(ValueError, match="no finite"):
        stats.cluster_bootstrap_mean([np.nan], ["d1"])


_NONE = [np.nan, np.nan]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: stats.cluster_bootstrap_mean(_NONE, ["d1", "d2"]), r"^values has no finite"),
        # said "no finite values to bootstrap" of whichever sample, pair or model
        (
            lambda: stats.cluster_bootstrap_means([([0.1, 0.2], ["d1", "d2"]), (_NONE, [1, 2])]),
            r"^samples\[1\] values has no finite values to bootstrap",
        ),
        (
            lambda: stats.paired_difference([np.nan, 0.2], [0.1, np.nan], ["d1", "d2"]),
            r"^values - baseline has no finite values to bootstrap",
        ),
        (
            lambda: stats.pairwise_differences(
                {"a": [0.1, 0.2], "b": [0.1, 0.2], "c": _NONE}, ["d1", "d2"], reps=REPS
            ),
            r"^values_by_model\['a'\] - values_by_model\['c'\] has no finite values",
        ),
        # the pairs' clusters were named as cluster_bootstrap_means's, an argument it has not
        (
            lambda: stats.pairwise_differences({"a": [0.1], "b": [0.2]}, ["d1", "d2"]),
            r"^values_by_model\['a'\] - values_by_model\['b'\] \(1\) and clusters \(2\)",
        ),
        (
            lambda: stats.pairwise_differences({"a": [0.1, 0.2], "b": [0.2, 0.3]}, ["d1", None]),
            r"^clusters\[1\] is None",
        ),
        # numpy's unpacking message, and a TypeError: 'NoneType' object is not iterable
        (
            lambda: stats.cluster_bootstrap_means([([0.1, 0.2],)]),  # type: ignore[list-item]
            r"^samples\[0\] must be a \(values, clusters\) pair: not enough values to unpack",
        ),
        (
            lambda: stats.cluster_bootstrap_means(None),  # type: ignore[arg-type]
            r"^samples must be a sequence of \(values, clusters\) pairs, got NoneType",
        ),
        # TypeErrors: '<' not supported between 'str' and 'int'; a list indexed by a list
        (
            lambda: stats.pairwise_differences({1: [0.1, 0.2], "b": [0.1, 0.2]}, ["d1", "d2"]),  # type: ignore[dict-item]
            r"^values_by_model's keys must be model names \(str\), got 1 \(int\)",
        ),
        (
            lambda: stats.count_pairwise_significant([[0.1, 0.2]] * 2, ["d1", "d2"]),  # type: ignore[arg-type]
            r"^values_by_model must be a mapping of model names \(str\) to values, got list",
        ),
        # a MemoryError (7 TiB) at once; 10**9 would have been gigabytes and hours
        (
            lambda: stats.cluster_bootstrap_mean([0.1, 0.2], ["d1", "d2"], reps=10**12),
            r"^reps must be at most 10,000,000 .*got 1,000,000,000,000",
        ),
    ],
)
def test_an_unusable_sample_is_one_value_error_naming_it(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


_UNITS = ["d1", "d1", "d2", "d2"]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda v: stats.cluster_bootstrap_mean(v, _UNITS, reps=REPS), "values"),
        (
            lambda v: stats.cluster_bootstrap_means([([0.1] * 4, _UNITS), (v, _UNITS)]),
            r"samples\[1\] values",
        ),
        (lambda v: stats.paired_difference(v, [0.1] * 4, _UNITS, reps=REPS), "values"),
        (lambda v: stats.paired_difference([0.1] * 4, v, _UNITS, reps=REPS), "baseline"),
        (lambda v: stats.spearman([0.1, 0.2, 0.3, 0.4], v), "y"),
        (
            lambda v: stats.pairwise_differences({"a": [0.1] * 4, "b": v}, _UNITS, reps=REPS),
            r"values_by_model\['b'\]",
        ),
        (
            lambda v: stats.count_pairwise_significant({"a": v, "b": [0.1] * 4}, _UNITS),
            r"values_by_model\['a'\]",
        ),
    ],
)
@pytest.mark.parametrize(
    "bad",
    [
        # numpy kept the real parts (a ComplexWarning at most): an interval of 0.1 .. 0.4
        np.array([0.1 + 2j, 0.2, 0.3, 0.4]),
        # a list of them was a TypeError from float(), a ragged list numpy's own message
        [0.1 + 2j, 0.2, 0.3, 0.4],
        [[0.1], 0.2, 0.3, 0.4],
        # read as counts since 1970 and as the numbers strings spell
        np.array(["1970-01-01", "1970-01-02", "1970-01-03", "1970-01-04"], dtype="datetime64[D]"),
        np.array([1, 2, 3, 4], dtype="timedelta64[s]"),
        ["0.1", "0.2", "0.3", "0.4"],
        [0.1, None, "0.3", 0.4],
        # float() of it is an OverflowError, which escaped as itself
        [10**400, 0.2, 0.3, 0.4],
    ],
)
def test_values_that_are_not_real_numbers_are_one_value_error_naming_the_argument(
    call: Any, named: str, bad: object
) -> None:
    with pytest.raises(ValueError, match=f"^{named} must be real numbers"):
        call(bad)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # the mean was inf, its interval [0.35, nan] (a RuntimeWarning), another with others
        (lambda v: stats.cluster_bootstrap_mean(v, _UNITS, reps=REPS), r"^values\[1\] is -inf"),
        (
            lambda v: stats.cluster_bootstrap_means([([0.1] * 4, _UNITS)] * 4 + [(v, _UNITS)]),
            r"^samples\[4\] values\[1\] is -inf",
        ),
        # inf - inf was NaN, the pair dropped unseen
        (lambda v: stats.paired_difference(v, v, _UNITS, reps=REPS), r"^values\[1\] is -inf"),
        (lambda v: stats.paired_difference([0.1] * 4, v, _UNITS), r"^baseline\[1\] is -inf"),
        (
            lambda v: stats.pairwise_differences({"a": v, "b": v}, _UNITS),
            r"^values_by_model\['a'\]\[1\] is -inf",
        ),
    ],
)
def test_an_infinite_value_is_one_value_error_naming_it(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message + ": values must be finite"):
        call([0.1, -np.inf, np.nan, 0.4])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        # the mean was inf and its interval [nan, nan], with a RuntimeWarning
        (
            lambda: stats.cluster_bootstrap_mean([1e308] * 4, _UNITS, reps=REPS),
            r"^values overflow: the values of cluster 'd1' sum past the largest float",
        ),
        (
            lambda: stats.cluster_bootstrap_mean([1.0, 2.0, 1e308, 1e308], _UNITS, reps=REPS),
            r"^values overflow: the values of cluster 'd2' sum",
        ),
        # each cluster's sum is a float, two of them added are not: the mean was inf
        (
            lambda: stats.cluster_bootstrap_mean([1e308, 1e308], ["d1", "d2"], reps=REPS),
            r"^values overflow: a resample adds 2 cluster sums of up to 1e\+308, past",
        ),
        (
            lambda: stats.cluster_bootstrap_means([([0.1] * 4, _UNITS), ([1e308] * 4, _UNITS)]),
            r"^samples\[1\] values overflow: the values of cluster 'd1'",
        ),
        # the difference overflowed, said as "values[0] is inf" of a finite value
        (
            lambda: stats.paired_difference([1e308, 0, 0, 0], [-1e308, 0, 0, 0], _UNITS),
            r"^values\[0\] - baseline\[0\] overflows: 1e\+308 - -1e\+308 is past the largest",
        ),
        (
            lambda: stats.pairwise_differences(
                {"a": [0, -1e308, 0, 0], "b": [0, 1e308, 0, 0]}, _UNITS
            ),
            r"^values_by_model\['a'\]\[1\] - values_by_model\['b'\]\[1\] overflows",
        ),
    ],
)
def test_values_whose_sums_or_differences_overflow_are_one_value_error(
    call: Any, message: str
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way
        with pytest.raises(ValueError, match=message + ".*: scale the values down$"):
            call()


def test_spearman_ranks_an_infinite_value_as_the_largest_or_smallest() -> None:
    assert stats.spearman([np.inf, 0.2, 0.3, -np.inf], [4, 2, 3, 1]) == 1.0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        # numpy's own words, naming no argument
        ({"reps": True}, r"^reps must be a positive integer, got True"),
        ({"reps": 100.5}, r"^reps must be a positive integer, got 100.5"),
        ({"reps": 0}, r"^reps must be a positive integer"),
        ({"seed": -1}, r"^seed must be a non-negative integer"),
        ({"seed": 1.5}, r"^seed must be a non-negative integer"),
        # a seed of None drew fresh entropy: an interval no second call reproduced
        ({"seed": None}, r"^seed must be a non-negative integer \(intervals are seeded\)"),
        ({"level": "0.9"}, r"^level must be a number in \(0, 1\), got '0.9'"),
        ({"level": 1.0}, r"^level must be a number in \(0, 1\), got 1.0"),
        ({"level": decimal.Decimal("sNaN")}, r"^level must be a number in \(0, 1\)"),
    ],
)
def test_reps_seed_and_level_are_checked_by_name(arguments: dict[str, Any], message: str) -> None:
    samples = [([0.1, 0.2, 0.3, 0.4], _UNITS)]
    with pytest.raises(ValueError, match=message):
        stats.cluster_bootstrap_mean(*samples[0], **{"reps": REPS, **arguments})
    with pytest.raises(ValueError, match=message):
        stats.cluster_bootstrap_means(samples, **{"reps": REPS, **arguments})
    with pytest.raises(ValueError, match=message):
        stats.count_pairwise_significant({"a": [0.1] * 4, "b": [0.2] * 4}, _UNITS, **arguments)


def test_a_decimal_level_is_the_number_it_spells() -> None:
    """`Decimal("0.95")` was refused as not lying in (0, 1), where `values` take Decimals."""
    values = [0.1, 0.2, 0.3, 0.4]
    assert stats.cluster_bootstrap_mean(
        values, _UNITS, reps=REPS, level=decimal.Decimal("0.9")  # type: ignore[arg-type]
    ) == stats.cluster_bootstrap_mean(values, _UNITS, reps=REPS, level=0.9)


def test_a_signaling_nan_label_is_a_missing_label() -> None:
    """Its comparison raised decimal.InvalidOperation, out of the statistics as itself."""
    labels = [decimal.Decimal(text) for text in ("1", "sNaN", "2", "3")]
    with pytest.raises(ValueError, match=r"^clusters\[1\] is Decimal\('sNaN'\): every value"):
        stats.cluster_bootstrap_mean([0.1, 0.2, 0.3, 0.4], labels, reps=REPS)


def test_numpy_integers_are_reps_and_seeds() -> None:
    values = [0.1, 0.2, 0.3, 0.4]
    expected = stats.cluster_bootstrap_mean(values, _UNITS, reps=REPS, seed=3)
    got = stats.cluster_bootstrap_mean(values, _UNITS, reps=np.int64(REPS), seed=np.uint32(3))  # type: ignore[arg-type]
    assert got == expected


def test_masked_values_are_dropped_as_nan_is() -> None:
    """`np.asarray` drops a mask: the hidden 9.0 was bootstrapped as a value."""
    masked = np.ma.masked_array([1.0, 2.0, 9.0, 4.0], mask=[False, False, True, False])
    as_nan = [1.0, 2.0, np.nan, 4.0]
    assert stats.cluster_bootstrap_mean(masked, _UNITS, reps=REPS) == (
        stats.cluster_bootstrap_mean(as_nan, _UNITS, reps=REPS)
    )
    assert stats.spearman(masked, [1.0, 2.0, 3.0, 4.0]) == 1.0


def test_cluster_labels_may_be_tuples_or_any_hashable_labels_that_sort() -> None:
    """A list of tuples was read as a matrix ("values (6) and clusters (12) must have the same
    length"); frozensets, which numpy's sort cannot order, were each their own cluster."""
    values = [0.1, 0.5, 0.2, 0.9, 0.3, 0.4]
    named = ["a1", "b2", "a1", "c3", "b2", "c3"]
    expected = stats.cluster_bootstrap_mean(values, named, reps=REPS)
    as_tuples = [(label[0], int(label[1])) for label in named]
    assert stats.cluster_bootstrap_mean(values, as_tuples, reps=REPS) == expected
    assert stats.cluster_bootstrap_mean(values, tuple(as_tuples), reps=REPS) == expected
    as_sets = [frozenset({label}) for label in "abacbc"]
    assert stats.cluster_bootstrap_mean(values, as_sets, reps=REPS).lo == expected.lo
    # a polars column's strings come as Python objects: ranked as numpy ranks its strings
    objects = np.array(named, dtype=object)
    assert stats.cluster_bootstrap_mean(values, objects, reps=REPS) == expected
    assert stats.paired_difference(values, [0.0] * 6, as_tuples, reps=REPS) == expected


@pytest.mark.parametrize(
    ("clusters", "message"),
    [
        # numpy's TypeError ("'<' not supported between instances of 'NoneType' and 'str'")
        (["d1", None, "d2", "d2"], r"^clusters\[1\] is None: every value needs a cluster label"),
        ([None] * 4, r"^clusters\[0\] is None"),
        # a tuple compares its parts by identity first: (1, nan) was a cluster of its own for
        # each NaN object (three clusters here), one for a NaN shared
        (
            [(1, math.nan), (1, float("nan")), (2, 1.0), (2, 1.0)],
            r"^clusters\[0\] is \(1, nan\): every value needs a cluster label",
        ),
        ([("d", 1), ("d", 1), ("d", None), ("d", 2)], r"^clusters\[2\] is \('d', None\)"),
        ([("d", (1, math.nan))] * 4, r"^clusters\[0\] is \('d', \(1, nan\)\)"),
        # NaN and NaT labels were pooled into one cluster, a date that is none
        ([1.0, np.nan, 2.0, np.nan], r"^clusters\[1\] is .*nan"),
        (np.array(["2025-01-02", "NaT", "2025-01-03", "2025-01-03"], "datetime64[D]"), "NaT"),
        (np.array(["d1", None, "d2", "d2"], dtype=object), r"^clusters\[1\] is None"),
        # the mask was dropped, and the label it hid resampled as any other
        (
            np.ma.masked_array(["d1", "d1", "d2", "d3"], [False, False, False, True]),
            r"^clusters\[3\] is masked",
        ),
        # numpy's TypeErrors and its unnamed message for a ragged list
        ([{"d": 1}] * 4, "^clusters must be labels .*unhashable type: 'dict'"),
        (np.array(["d1", 1, "d2", "d2"], dtype=object), "^clusters must be labels .*of one kind"),
        ([("d", 1), "d1", ("d", 2), ("d", 2)], r"^clusters\[0\] is \('d', 1\) where .*"),
        # numpy spelled a list's labels all as strings: 1 and "1" were one cluster, b"1" and
        # "1" too, and a NaN among strings the cluster "nan"
        ([1, "1", 2, "2"], r"^clusters\[0\] is 1 where .*clusters\[1\] is '1': labels must be"),
        (["1", b"1", "2", b"2"], r"^clusters\[1\] is b'1' where .*clusters\[0\] is '1'"),
        (("d1", "d2", np.nan, "d1"), r"^clusters\[2\] is nan: every value needs a cluster label"),
        ([["d1"], ["d1", "x"], ["d2"], ["d2"]], r"^clusters must be .*\['d1'\], of type list"),
        # a list label is unhashable: numpy read a list of lists as a matrix, refused only when
        # its size was not the values' ("clusters (8, shape (4, 2))"); flattened and taken
        # when it was, [[1], [1], [2], [2]] four labels
        ([["d", 1], ["d", 1], ["d", 2], ["d", 2]], r"\['d', 1\], of type list, unhashable \("),
        ([[1], [1], [2], [2]], r"^clusters must be labels .*clusters\[0\] is \[1\], of type list"),
        ([["d1", "d1"], ["d2", "d2"]], r"^clusters must be labels .*of several parts is a tuple"),
        ([np.array([1])] * 4, r"clusters\[0\] is array\(\[1\]\), of type ndarray, unhashable"),
    ],
)
def test_a_missing_or_unusable_cluster_label_is_one_value_error_naming_clusters(
    clusters: object, message: str
) -> None:
    values = [0.1, 0.2, 0.3, 0.4]
    with pytest.raises(ValueError, match=message):
        stats.cluster_bootstrap_mean(values, clusters, reps=REPS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        stats.paired_difference(values, [0.2] * 4, clusters, reps=REPS)  # type: ignore[arg-type]
    samples = [(values, ["d1", "d1", "d2", "d2"]), (values, clusters)]
    with pytest.raises(ValueError, match=message.replace("^clusters", r"^samples\[1\] clusters")):
        stats.cluster_bootstrap_means(samples, reps=REPS)  # type: ignore[arg-type]


def _percentile(sorted_values: list[float], q: float) -> float:
    """The 'linear' percentile, by hand: interpolate between the two nearest order statistics."""
    h = (len(sorted_values) - 1) * q
    lower = int(h)
    upper = min(lower + 1, len(sorted_values) - 1)
    return sorted_values[lower] + (h - lower) * (sorted_values[upper] - sorted_values[lower])


def test_cluster_bootstrap_matches_a_plain_loop_on_a_small_case() -> None:
    """Independent code: for each replicate, take the drawn dates one by one, pool every
    value of each (a date drawn twice counts twice), average; then the 2.5/97.5 percentiles.
    Unequal cluster sizes and a NaN make the pooled mean differ from a mean of date means."""
    values = [0.010, 0.002, 0.030, float("nan"), 0.004, 0.0, 0.021, 0.006, 0.012]
    dates = ["d3", "d1", "d3", "d2", "d2", "d1", "d4", "d4", "d4"]
    reps, seed = 400, 7
    kept = [(v, d) for v, d in zip(values, dates, strict=True) if v == v]
    labels = sorted({d for _, d in kept})  # the dates that have a value, in sorted order
    by_date = {d: [v for v, dd in kept if dd == d] for d in labels}
    # the same draws the function makes: replicate r picks len(labels) dates with replacement
    picks = np.random.default_rng(seed).integers(0, len(labels), size=(reps, len(labels)))
    means = []
    for row in picks:
        pooled: list[float] = []
        for index in row:
            pooled.extend(by_date[labels[int(index)]])
        means.append(sum(pooled) / len(pooled))
    means.sort()
    got = stats.cluster_bootstrap_mean(values, dates, reps=reps, seed=seed)
    assert got.mean == pytest.approx(sum(v for v, _ in kept) / len(kept), abs=1e-15)
    assert got.lo == pytest.approx(_percentile(means, 0.025), abs=1e-15)
    assert got.hi == pytest.approx(_percentile(means, 0.975), abs=1e-15)


def _bootstrap_one_at_a_time(
    values: np.ndarray, clusters: np.ndarray, reps: int, seed: int, chunk_cells: int
) -> stats.Interval:
    """The interval as computed before samples were resampled together (issue 12): a fresh
    generator per sample, its cluster indices drawn in chunks of `chunk_cells` cells."""
    keep = ~np.isnan(values)
    _, codes = np.unique(clusters[keep], return_inverse=True)
    sums = np.bincount(codes, weights=values[keep]).astype(np.float64)
    counts = np.bincount(codes).astype(np.float64)
    rng = np.random.default_rng(seed)
    n = sums.size
    if n < 2:  # one cluster: no interval (`stats.MIN_CLUSTERS`)
        return stats.Interval(float(sums.sum() / counts.sum()), math.nan, math.nan)
    chunk = max(1, chunk_cells // n)
    means = np.empty(reps)
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        picks = rng.integers(0, n, size=(size, n))
        means[start : start + size] = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    tail = (1.0 - 0.95) / 2.0  # not quite 0.025 in floating point, as before
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return stats.Interval(float(sums.sum() / counts.sum()), float(lo), float(hi))


@pytest.mark.parametrize("kept_cells", [stats._KEPT_CELLS, 0])
@pytest.mark.parametrize(
    ("units", "n_clusters", "reps"),
    [(37, 37, 2_000), (200, 30, 1_500), (3_000, 900, 3_000), (10, 3, 100)],
)
def test_resampling_many_samples_together_is_identical_to_one_at_a_time(
    units: int, n_clusters: int, reps: int, kept_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bit for bit, including several chunks of draws (900 clusters), samples whose NaNs leave
    a cluster empty (fewer clusters, other draws), equal and unequal counts, and more samples
    than one batch; with the draws kept for every batch and drawn again for each."""
    monkeypatch.setattr(stats, "_BATCH", 4)  # batches of 4 take the product, of 2 gather
    monkeypatch.setattr(stats, "_KEPT_CELLS", kept_cells)
    rng = np.random.default_rng(units)
    clusters = rng.integers(0, n_clusters, units).astype(str)
    samples = []
    for k in range(10):
        values = rng.random(units)
        if k % 2:
            values[rng.random(units) < 0.2] = np.nan
        if k == 3:
            values[clusters == clusters[0]] = np.nan  # one cluster fewer
        samples.append((values, clusters))
    together = stats.cluster_bootstrap_means(samples, reps=reps, seed=9)
    alone = [stats.cluster_bootstrap_mean(v, c, reps=reps, seed=9) for v, c in samples]
    reference = [
        _bootstrap_one_at_a_time(v, c, reps, 9, stats._CHUNK_CELLS) for v, c in samples
    ]
    assert together == alone == reference
    assert len(set(together)) == len(together)  # the samples differ, so must their intervals


def test_pairwise_differences_are_each_pairs_paired_difference() -> None:
    values, clusters = clustered_sample(30, 6, seed=8)
    noise = np.random.default_rng(2).normal(scale=0.05, size=(4, values.size))
    noise[1, 3] = np.nan  # one pair drops a unit
    models = {name: values + noise[i] for i, name in enumerate("abcd")}
    pairs = stats.pairwise_differences(models, clusters, reps=REPS, seed=3)
    for (a, b), interval in pairs.items():
        assert interval == stats.paired_difference(
            models[a], models[b], clusters, reps=REPS, seed=3
        )


@pytest.mark.parametrize(
    ("values", "clusters", "reps"),
    [
        # two clusters and twenty values: most replicates tie, so every one near a quantile is
        # a candidate
        (np.tile([0.25, 0.75], 10), np.tile(["a", "b"], 10), 2_000),
        # every value equal: every replicate's mean is the same number
        (np.full(30, 0.1), np.arange(30) % 7, 500),
        # signs and scales mixed (paired differences), so sums cancel
        (
            np.array([1e12, -1e12, 3e-9, -7.5, 2.0, 1e-300, -3.25, 4e5] * 3),
            np.arange(24) % 5,
            4_000,
        ),
        # very few replicates: the ranks around each virtual index reach both ends
        (np.linspace(-1.0, 1.0, 12), np.arange(12) % 4, 1),
        (np.linspace(-1.0, 1.0, 12), np.arange(12) % 4, 2),
        (np.linspace(-1.0, 1.0, 12), np.arange(12) % 4, 5),
        # many clusters: several chunks of draws, drawn again for the exact sums
        (np.random.default_rng(3).normal(size=2_500), np.arange(2_500) % 1_300, 3_100),
    ],
)
@pytest.mark.parametrize("product_from", [1, stats.PRODUCT_FROM_SAMPLES])
def test_exact_quantiles_where_approximate_means_tie_cancel_or_run_out(
    values: np.ndarray,
    clusters: np.ndarray,
    reps: int,
    product_from: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The matrix product's means are only approximations; the intervals must still be bit for
    bit those of summing each replicate's gathered values (the reference above), whether one
    sample takes the product (forced here) or gathers (as by default)."""
    monkeypatch.setattr(stats, "PRODUCT_FROM_SAMPLES", product_from)
    got = stats.cluster_bootstrap_mean(values, clusters, reps=reps, seed=5)
    assert got == _bootstrap_one_at_a_time(
        np.asarray(values, dtype=float), np.asarray(clusters), reps, 5, stats._CHUNK_CELLS
    )


def test_the_exact_step_is_what_makes_the_quantiles_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the candidates' exact sums (every replicate left approximate), some intervals
    of a cancelling sample differ from the reference: the test above would catch a broken
    refinement, not pass by luck."""
    rng = np.random.default_rng(11)
    samples = [(rng.normal(size=60) * 10.0 ** rng.integers(-3, 8, 60), np.arange(60) % 37)]
    samples += [(rng.normal(size=60) * 1e6 + 1e-3 * rng.random(60), np.arange(60) % 37)]
    reference = [
        _bootstrap_one_at_a_time(v, c, 20_000, 2, stats._CHUNK_CELLS) for v, c in samples
    ]
    monkeypatch.setattr(stats, "PRODUCT_FROM_SAMPLES", 1)  # two samples take the product
    assert stats.cluster_bootstrap_means(samples, reps=20_000, seed=2) == reference
    none = np.zeros(0, dtype=np.int64)
    monkeypatch.setattr(stats, "_candidates", lambda approx, slack, tail: [none for _ in approx])
    assert stats.cluster_bootstrap_means(samples, reps=20_000, seed=2) != reference


def test_the_draws_are_made_once_per_number_of_clusters_while_they_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten samples in three batches (two by the product, one gathered) share one draw when
    it is kept; drawn again for every use when it is not."""
    monkeypatch.setattr(stats, "_BATCH", 4)
    drawn: list[int] = []
    draws = stats._draws

    def counting(n_clusters: int, reps: int, seed: int) -> Any:
        drawn.append(n_clusters)
        return draws(n_clusters, reps, seed)

    monkeypatch.setattr(stats, "_draws", counting)
    values, clusters = clustered_sample(30, 6, seed=8)
    samples = [(values + k, clusters) for k in range(10)]
    kept = stats.cluster_bootstrap_means(samples, reps=1_000, seed=1)
    assert drawn == [30]
    drawn.clear()
    monkeypatch.setattr(stats, "_KEPT_CELLS", 0)
    assert stats.cluster_bootstrap_means(samples, reps=1_000, seed=1) == kept
    assert drawn == [30] * 5  # each product batch draws twice (means, then exact sums)


def _bits(pairs: Any) -> bytes:
    """The exact bits of quantile pairs: -0.0 and 0.0 compare equal but are not the same."""
    return np.asarray(pairs, dtype=np.float64).tobytes()


def _signed_zero_rows(rows: int, length: int) -> np.ndarray:
    rng = np.random.default_rng(4)
    return rng.choice([-0.0, 0.0, 1.0, -1.0], size=(rows, length), p=[0.3, 0.3, 0.2, 0.2])


@pytest.mark.parametrize("reps", [1, 2, 3, 5, 40, 999, 20_000])
@pytest.mark.parametrize("level", [0.95, 0.9, 0.5, 0.999])
def test_sorted_quantiles_are_np_quantiles_bit_for_bit(reps: int, level: float) -> None:
    """Read from sorted rows, the quantiles are `np.quantile`'s to the bit: rows of distinct
    means, of ties, of signed zeros, with a NaN, with infinities."""
    rng = np.random.default_rng(reps)
    means = np.vstack(
        [
            rng.normal(size=(6, reps)),
            rng.integers(0, 3, size=(3, reps)).astype(np.float64) / 7.0,
            _signed_zero_rows(3, reps),
            np.where(rng.random((2, reps)) < 0.1, np.inf, rng.normal(size=(2, reps))),
        ]
    )
    means[-1, reps // 2] = -np.inf
    with_nan = rng.normal(size=(1, reps))
    with_nan[0, reps // 3] = np.nan
    means = np.vstack([means, with_nan])
    tail = (1.0 - level) / 2.0
    with np.errstate(invalid="ignore"):  # inf - inf where both read infinities, both ways
        assert _bits(stats._sorted_quantiles(means.copy(), tail)) == _bits(
            stats._quantiles(means, tail)
        )


@pytest.mark.parametrize("partition", [True, False])
def test_ordered_at_holds_at_each_rank_what_a_sort_holds(
    partition: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partitioned (where this machine partitions faster than it sorts) or sorted, at every
    rank asked for each row holds its sorted copy's value, ties, infinities and NaNs (the
    largest) included."""
    monkeypatch.setattr(stats, "_partition_is_faster", lambda: partition)
    rng = np.random.default_rng(9)
    values = np.vstack([rng.normal(size=(4, 500)),
                        rng.integers(0, 4, size=(3, 500)).astype(np.float64)])  # fmt: skip
    values[0, ::7], values[1, ::11], values[2, 5] = np.nan, np.inf, -np.inf
    ranks = [0, 1, 12, 13, 250, 486, 487, 499]
    got, expected = stats._ordered_at(values, ranks[::-1]), np.sort(values, axis=1)
    assert np.array_equal(got[:, ranks], expected[:, ranks], equal_nan=True)


def test_candidates_are_those_read_from_sorted_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read from rows partitioned at each window's ends, the replicates `_candidates` keeps
    are exactly those the sorted rows' ends would keep."""
    monkeypatch.setattr(stats, "_partition_is_faster", lambda: True)
    rng = np.random.default_rng(10)
    approx = np.vstack([rng.normal(size=(5, 2_000)),
                        np.round(rng.normal(size=(3, 2_000)), 2)])  # ties  # fmt: skip
    slack = np.full((8, 1), 1e-3)
    for tail in (0.025, 0.05, 0.25):
        ordered = np.sort(approx, axis=1)
        keep = np.zeros(approx.shape, dtype=bool)
        for q in (tail, 1.0 - tail):
            at = int(np.floor(1_999 * q))
            low, high = max(at - 1, 0), min(at + 2, 1_999)
            keep |= (approx >= ordered[:, low : low + 1] - slack) & (
                approx <= ordered[:, high : high + 1] + slack
            )
        got = stats._candidates(approx, slack, tail)
        assert [row.tolist() for row in got] == [np.flatnonzero(row).tolist() for row in keep]


def test_signed_zeros_take_np_quantile_where_a_sort_would_differ() -> None:
    """A sort and `np.quantile`'s partition put -0.0 and 0.0 in different places: read from
    the sort alone, some of these rows' quantiles differ in sign from `np.quantile`'s (so the
    case is real), yet `_sorted_quantiles` gives `np.quantile`'s."""
    means, tail = _signed_zero_rows(200, 51), 0.25
    expected = stats._quantiles(means, tail)
    ordered = np.sort(means, axis=1)
    read_from_sort = []
    for q in (tail, 1.0 - tail):
        index = 50 * q
        below = int(np.floor(index))
        read_from_sort.append(np.quantile(ordered[:, below : below + 2], index - below, axis=1))
    assert _bits(np.column_stack(read_from_sort)) != _bits(expected)
    assert _bits(stats._sorted_quantiles(means, tail)) == _bits(expected)


def test_an_interval_within_the_profits_resolution_of_zero_does_not_exclude_it() -> None:
    """Each profit is certified to 1e-9: a referee's run showed -3e-17 [-5.8e-17, -4.2e-18]
    between identical answers in two arms, drawn and counted as excluding zero."""
    from scoring.dutch_book import CERTIFY_TOLERANCE
    from scoring.stats import RESOLUTION, Interval

    assert RESOLUTION == CERTIFY_TOLERANCE
    assert not Interval(-2.98e-17, -5.8e-17, -4.2e-18).excludes_zero()
    assert not Interval(5e-10, 1e-10, 9e-10).excludes_zero()
    assert Interval(2e-9, 1.5e-9, 3e-9).excludes_zero()
    assert Interval(-0.01, -0.02, -0.005).excludes_zero()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf
def test_an_interval_with_an_unknown_end_never_excludes_zero() -> None:
    """A tester: an infinite value's bootstrap gave [0.55, nan], said to exclude zero, where
    an end unknown is documented never to count (an infinite value is now refused)."""
    from scoring.stats import Interval

    with pytest.raises(ValueError, match="must be finite"):
        stats.cluster_bootstrap_mean([0.5, 0.6, np.inf, 0.7], [0, 1, 2, 3], reps=200, seed=1)
    assert not Interval(math.inf, 0.55, math.nan).excludes_zero()  # the tester's interval
    for lo, hi in ((math.nan, -1.0), (1.0, math.nan), (math.nan, math.nan)):
        assert not Interval(0.0, lo, hi).excludes_zero()


def test_one_cluster_gives_no_interval_and_nothing_significant() -> None:
    """A referee's run on one date read "+0.01207 [+0.01207, +0.01207]", excluding zero, and
    every model pair as significantly different: resampling one date returns it every time."""
    values = np.array([0.01, 0.02, 0.015])
    result = stats.cluster_bootstrap_mean(values, ["d1", "d1", "d1"], reps=REPS, seed=0)
    assert result.mean == pytest.approx(0.015)
    assert np.isnan(result.lo) and np.isnan(result.hi) and not result.excludes_zero()
    difference = stats.paired_difference(values + 0.01, values, ["d1"] * 3, reps=REPS)
    assert difference.mean == pytest.approx(0.01) and not difference.excludes_zero()
    many = stats.cluster_bootstrap_means(
        [(values, ["d1"] * 3), (values, ["d1", "d2", "d2"])], reps=REPS, seed=0
    )
    assert np.isnan(many[0].lo) and np.isfinite(many[1].lo)
    assert stats.count_pairwise_significant({"a": values, "b": values + 1.0}, ["d1"] * 3) == 0
    assert stats.count_pairwise_significant(
        {"a": values, "b": values + 1.0}, ["d1", "d2", "d3"], reps=REPS
    ) == 1
