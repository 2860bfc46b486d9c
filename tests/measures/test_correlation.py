"""The correlation protection rate against a brute force of its published definition."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import ColumnNotFoundError, DuplicateError, SchemaError

import polars_hidden_rate as phr
from polars_hidden_rate.engine.boxes import count_in_boxes
from polars_hidden_rate.measures.correlation import CorrelationProtection, correlation_protection
from polars_hidden_rate.report import PrivacyReport
from tests.helpers import examples


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def brute_force(
    originals: dict[str, list[Any]],
    avatars: dict[str, list[Any]],
    numeric: list[str],
    categorical: list[str],
    hidden_rate: float,
    tolerance: float = 0.05,
) -> tuple[int, int, float]:
    """avatar-paper's ``metrics/correlation_protection_rate.py`` (commit 614cb6d) in plain
    Python: a loop over the unique originals, a loop over every avatar."""
    known = [*numeric, *categorical]
    n = len(originals[known[0]])
    rows = [tuple(originals[c][i] for c in known) for i in range(n)]
    complete = [row for row in rows if not any(missing(v) for v in row)]
    times: dict[tuple[Any, ...], int] = {}
    for row in complete:
        key = tuple(v + 0.0 if isinstance(v, float) else v for v in row)
        times[key] = times.get(key, 0) + 1
    unique = [row for row in complete if times[row] == 1]
    half = {}
    for c in numeric:
        present = [float(v) for v in originals[c] if not missing(v)]
        mean = math.fsum(present) / len(present) if present else math.nan
        half[c] = mean * tolerance
    m = len(avatars[known[0]])
    singled_out = 0
    for row in unique:
        matches = 0
        for j in range(m):
            ok = True
            for c, x in zip(known, row, strict=True):
                a = avatars[c][j]
                if missing(a):
                    ok = False
                elif c in half:
                    ok = (x - half[c]) < float(a) < (x + half[c])
                else:
                    ok = a == x
                if not ok:
                    break
            matches += ok
        singled_out += matches == 1
    rate = (1 - round(singled_out * (1 - hidden_rate / 100)) / n) * 100
    return len(unique), singled_out, rate


BASE = [0.0, -0.0, 1.0, 2.0, 2.5, 3.0, 1e16, -1e16, 0.1, 7.25]


@st.composite
def releases(draw: st.DrawFn) -> tuple[dict[str, list[Any]], dict[str, list[Any]], float]:
    """Originals on few values (duplicates, nulls, NaN, -0.0), and avatars on the originals'
    values, on each tolerance bound exactly and one float beside it."""
    n = draw(st.integers(1, 10))
    tolerance = draw(st.sampled_from([0.05, 0.25, 0.5, 1.0, 0.0]))
    x = draw(st.lists(st.sampled_from([*BASE, None, math.nan]), min_size=n, max_size=n))
    y = draw(st.lists(st.sampled_from([-4.0, 0.0, 1.0, 4.0, 8.0, None]), min_size=n, max_size=n))
    s = draw(st.lists(st.sampled_from(["a", "b", None]), min_size=n, max_size=n))
    originals: dict[str, list[Any]] = {"x": x, "y": y, "s": s}
    half = {}
    for c in ("x", "y"):
        present = [v for v in originals[c] if not missing(v)]
        half[c] = (math.fsum(present) / len(present) if present else math.nan) * tolerance

    def moved(value: Any, t: float, how: str) -> Any:
        if how == "null":
            return None
        if missing(value) or math.isnan(t):
            return value
        return {
            "same": value,
            "low": value - t,
            "high": value + t,
            "in_low": math.nextafter(value - t, math.inf),
            "in_high": math.nextafter(value + t, -math.inf),
        }[how]

    # Each avatar starts from one original, every column moved on its own: near matches,
    # bounds hit exactly, on several columns at once.
    m = draw(st.integers(0, 12))
    hows = st.sampled_from(["same", "low", "high", "in_low", "in_high", "null"])
    avatars: dict[str, list[Any]] = {"x": [], "y": [], "s": []}
    for _ in range(m):
        i = draw(st.integers(0, n - 1))
        for c in ("x", "y"):
            avatars[c].append(moved(originals[c][i], half[c], draw(hows)))
        avatars["s"].append(draw(st.sampled_from([originals["s"][i], originals["s"][i], "b"])))
    return originals, avatars, tolerance


KNOWN_SETS = [["x"], ["s"], ["x", "s"], ["x", "y"], ["y", "s", "x"]]


@settings(max_examples=examples(400), deadline=None)
@given(releases(), st.sampled_from(KNOWN_SETS), st.sampled_from([0.0, 37.5, 90.0, 100.0]))
def test_equals_the_brute_force(
    release: tuple[dict[str, list[Any]], dict[str, list[Any]], float],
    known: list[str],
    hidden_rate: float,
) -> None:
    originals, avatars, tolerance = release
    schema = {"x": pl.Float64, "y": pl.Float64, "s": pl.String}
    left = pl.DataFrame(originals, schema=schema)
    right = pl.DataFrame(avatars, schema=schema)
    numeric = [c for c in known if c != "s"]
    categorical = [c for c in known if c == "s"]
    unique, singled_out, rate = brute_force(
        originals, avatars, numeric, categorical, hidden_rate, tolerance
    )
    got = correlation_protection(
        left.lazy(), right.lazy(), known, hidden_rate=hidden_rate, tolerance=tolerance
    )
    assert (got.unique, got.singled_out) == (unique, singled_out)
    assert got.rate == rate
    assert got.n == left.height
    assert (
        phr.correlation_protection_rate(
            left, right, known, tolerance=tolerance, hidden_rate=hidden_rate
        )
        == rate
    )
    # Order-invariant: the rows of either side in any order give the same counts.
    shuffled = correlation_protection(
        left.reverse().lazy(),
        right.sample(fraction=1.0, shuffle=True, seed=3).lazy(),
        known,
        hidden_rate=hidden_rate,
        tolerance=tolerance,
    )
    assert (shuffled.unique, shuffled.singled_out) == (unique, singled_out)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.integers(0, 30).flatmap(
        lambda m: st.tuples(
            st.lists(
                st.tuples(
                    st.tuples(
                        st.sampled_from([0.0, 0.5, 1.0, 2.0]), st.sampled_from([0.0, 0.5, 1.0, 2.0])
                    ),
                    st.integers(0, 2),
                ),
                min_size=m,
                max_size=m,
            ),
            st.lists(
                st.tuples(
                    st.tuples(
                        st.sampled_from([0.0, 0.5, 1.0, math.nan]),
                        st.sampled_from([0.0, 0.5, 1.0, math.nan]),
                    ),
                    st.sampled_from([0.5, 1.0, 2.0, -1.0]),
                    st.integers(0, 2),
                ),
                min_size=1,
                max_size=8,
            ),
        )
    )
)
def test_box_counts_equal_a_loop(
    case: tuple[
        list[tuple[tuple[float, float], int]], list[tuple[tuple[float, float], float, int]]
    ],
) -> None:
    points, queries = case
    values = np.array([p for p, _ in points], dtype=np.float64).reshape(-1, 2)
    groups = np.array([g for _, g in points], dtype=np.int64)
    lower = np.array([q for q, _, _ in queries], dtype=np.float64)
    upper = np.array([[q[0] + w, q[1] + 2 * w] for q, w, _ in queries], dtype=np.float64)
    query_groups = np.array([g for _, _, g in queries], dtype=np.int64)
    got = count_in_boxes(values, groups, lower, upper, query_groups, 3, cap=2)
    expected = [
        min(
            2,
            sum(
                1
                for (_, g), v in zip(points, values, strict=True)
                if g == query_groups[k] and all(lower[k] < v) and all(v < upper[k])
            ),
        )
        for k in range(len(queries))
    ]
    assert got.tolist() == expected


def test_known_values() -> None:
    originals = pl.DataFrame({"age": [30, 40, 50, 50], "sex": ["F", "M", "F", "F"]})
    avatars = pl.DataFrame({"age": [31, 39, 60, 52], "sex": ["F", "M", "M", "F"]})
    got = correlation_protection(originals.lazy(), avatars.lazy(), ["age", "sex"], hidden_rate=50)
    # Unique: (30, F) and (40, M); within 5 % of the mean 42.5 (2.125): one avatar each.
    assert (got.n, got.unique, got.singled_out) == (4, 2, 2)
    assert got.rate == 75.0  # 100 * (1 - round(2 * 0.5) / 4)
    # On the bound itself is no match: 30 +/- 2.125 excludes 32.125.
    edge = avatars.with_columns(pl.Series("age", [32.125, 39.0, 60.0, 52.0]))
    assert (
        correlation_protection(
            originals.lazy(), edge.lazy(), ["age", "sex"], hidden_rate=50
        ).singled_out
        == 1
    )
    # Python's rounding is half to even: round(2.5) = 2, round(0.5) = 0.
    assert CorrelationProtection(("a",), 10, 5, 5, 50.0).rate == 80.0
    assert CorrelationProtection(("a",), 10, 5, 1, 50.0).rate == 100.0
    assert CorrelationProtection(("a",), 10, 5, 3, 50.0).rate == 80.0


def test_the_mean_is_that_of_the_exact_sum() -> None:
    # Summed in order, 1e16 + 1 - 1e16 + 1 + 3 is 4 (mean 0.8, t = 0.04); exactly it is 5
    # (mean 1, t = 0.05): the avatar at 3.045 matches the original 3.0 only by the latter.
    originals = pl.DataFrame({"x": [1e16, 1.0, -1e16, 1.0, 3.0]})
    avatars = pl.DataFrame({"x": [3.045]})
    for frame in (originals, originals.reverse()):
        got = correlation_protection(frame.lazy(), avatars.lazy(), ["x"], hidden_rate=0)
        assert (got.unique, got.singled_out) == (3, 1)


def test_types_mixed_across_the_two_sides() -> None:
    originals = pl.DataFrame(
        {"age": pl.Series([30, 40, 41], dtype=pl.Int16), "city": ["Lyon", "Nice", "Pau"]}
    )
    avatars = pl.DataFrame(
        {
            "age": [30.5, 40.0, 41.0],
            "city": pl.Series(["Lyon", "Nice", "Pau"], dtype=pl.Categorical),
        }
    )
    got = correlation_protection(originals.lazy(), avatars.lazy(), ["age", "city"], hidden_rate=0)
    # mean 37 -> t = 1.85: each unique original matches its own avatar only.
    assert (got.unique, got.singled_out) == (3, 3)
    # A variable of mean 0 or below matches nothing, as in the original code.
    negative = originals.with_columns(pl.col("age") * -1)
    assert (
        correlation_protection(
            negative.lazy(), avatars.with_columns(pl.col("age") * -1).lazy(), ["age"], hidden_rate=0
        ).singled_out
        == 0
    )


def test_the_hidden_rate_is_this_package_s() -> None:
    rng = np.random.default_rng(4)
    originals = pl.DataFrame({"Dim1": rng.normal(5, 1, 60), "g": rng.choice(["a", "b"], 60)})
    avatars = originals.with_columns(pl.col("Dim1") + rng.normal(0, 0.05, 60))
    rate = phr.hidden_rate(originals, avatars, coords="Dim1")
    assert phr.correlation_protection_rate(
        originals, avatars, ["Dim1", "g"], coords="Dim1"
    ) == phr.correlation_protection_rate(originals, avatars, ["Dim1", "g"], hidden_rate=rate)
    assert originals.avatar.correlation_protection_rate(  # type: ignore[attr-defined]
        avatars, "g", coords="Dim1"
    ) == phr.correlation_protection_rate(originals, avatars, "g", hidden_rate=rate)


@pytest.mark.parametrize(
    ("known", "error", "message"),
    [
        (["agee"], ColumnNotFoundError, "known column 'agee' not found in originals"),
        (["id"], ColumnNotFoundError, "known column 'id' not found in avatars"),
        ([], ColumnNotFoundError, "selects no column"),
        (["age", "age"], DuplicateError, "twice"),
        (["city"], SchemaError, "'city' is String in originals but Int64 in avatars"),
    ],
)
def test_bad_known_variables_are_refused(known: list[str], error: type, message: str) -> None:
    originals = pl.DataFrame({"id": [1, 2], "age": [30, 40], "city": ["a", "b"]})
    avatars = pl.DataFrame({"age": [30, 41], "city": [1, 2]})
    with pytest.raises(error, match=message):
        phr.correlation_protection_rate(originals, avatars, known, hidden_rate=50)
    with pytest.raises(error, match=message):
        phr.privacy_report(originals, avatars, coords="age", known=known)


def test_bad_options_are_refused() -> None:
    frame = pl.DataFrame({"age": [30, 40]})
    with pytest.raises(ValueError, match="tolerance"):
        phr.correlation_protection_rate(frame, frame, "age", hidden_rate=50, tolerance=-0.1)
    with pytest.raises(ValueError, match="hidden_rate"):
        phr.correlation_protection_rate(frame, frame, "age", hidden_rate=101)
    with pytest.raises(ValueError, match="not both"):
        phr.correlation_protection_rate(frame, frame, "age", hidden_rate=50, coords="age")
    huge = pl.DataFrame({"age": [2**60, 1]})
    with pytest.raises(Exception, match="age"):
        phr.correlation_protection_rate(huge, huge, "age", hidden_rate=50)


def test_the_report_measures_it_and_gates_on_it() -> None:
    rng = np.random.default_rng(5)
    originals = pl.DataFrame({"Dim1": rng.normal(5, 1, 80), "g": rng.choice(["a", "b"], 80)})
    avatars = originals.with_columns(pl.col("Dim1") + rng.normal(0, 0.3, 80))
    report = phr.privacy_report(originals, avatars, coords="Dim1", known=["Dim1", "g"])
    expected = phr.correlation_protection_rate(originals, avatars, ["Dim1", "g"], coords="Dim1")
    assert report.correlation_protection is not None
    assert report.correlation_protection.rate == expected
    assert report.to_dict()["correlation_protection_rate"]["value"] == expected
    assert report.correlation_protection.hidden_rate == report.hidden_rate
    without = phr.privacy_report(originals, avatars, coords="Dim1")
    assert without.correlation_protection is None
    assert without.release_checks == {}
    assert without.checks == report.checks  # the five metrics decide as before
    # A target for it, without `known`, would judge nothing: refused, never ignored.
    with pytest.raises(
        ValueError, match=r"`targets\['correlation_protection_rate'\]` needs `known`"
    ):
        phr.privacy_report(
            originals, avatars, coords="Dim1", targets={"correlation_protection_rate": 90}
        )


def passing(**fields: Any) -> PrivacyReport:
    return PrivacyReport(
        n=100,
        n_hidden=99,
        hidden_rate=99.0,
        hidden_rate_low=94.0,
        hidden_rate_high=99.8,
        confidence=0.95,
        local_cloaking_median=9.0,
        distance_to_closest_median=0.5,
        closest_distances_ratio_median=0.5,
        row_direct_match_protection=100.0,
        **fields,
    )


def test_passed_counts_the_rate_only_when_measured() -> None:
    assert passing().passed
    assert passing().release_checks == {}
    low = CorrelationProtection(("a",), 100, 50, 50, 90.0)  # 100 * (1 - 5/100) = 95: not above
    assert low.rate == 95.0
    assert not passing(correlation_protection=low).passed
    high = CorrelationProtection(("a",), 100, 50, 40, 90.0)  # 96
    assert passing(correlation_protection=high).passed
    assert not passing(
        correlation_protection=high, targets={"correlation_protection_rate": 96.0}
    ).passed
    entry = passing(correlation_protection=high).to_dict()["correlation_protection_rate"]
    assert entry == {
        "value": 96.0,
        "known": ["a"],
        "n": 100,
        "unique": 50,
        "singled_out": 40,
        "hidden_rate": 90.0,
        "tolerance": 0.05,
        "target": 95.0,
        "passed": True,
        "reason": None,
    }
    # Never a verdict from the metrics without a public definition.
    data = passing(correlation_protection=high).to_dict()
    assert data["column_direct_match_protection"]["passed"] is None
    assert data["categorical_hidden_rate"]["value"] is None
    with pytest.raises(ValueError, match="percentage"):
        passing(targets={"correlation_protection_rate": 0.95})
