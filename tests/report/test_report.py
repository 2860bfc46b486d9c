"""Per-avatar distances on frames, direct matches, the Wilson interval, and the report."""

from __future__ import annotations

import itertools
import json
import math
from decimal import Decimal
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import ColumnNotFoundError, ComputeError, DuplicateError, SchemaError

import polars_hidden_rate as phr
from polars_hidden_rate.measures import row_match
from polars_hidden_rate.report import DEFAULT_TARGETS, METRICS, NO_HOLDOUT, PrivacyReport
from tests.helpers import brute_force_counts, examples, without_provenance

DIMS = ["Dim1", "Dim2", "Dim3"]

# The verdict's line without a holdout as the page says it: without the flag's aside.
PAGE_NO_HOLDOUT = NO_HOLDOUT.replace(" (--holdout FILE; holdout= in Python)", "")
assert PAGE_NO_HOLDOUT != NO_HOLDOUT


def make_frames(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Grid data with ties and exact copies; avatars carry their own id, shuffled."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, (n, len(DIMS))).astype(float)
    y = x + rng.integers(-1, 2, (n, len(DIMS))) * 0.5
    originals = pl.DataFrame(x, schema=DIMS).with_columns(id=pl.int_range(n, dtype=pl.Int64))
    avatars = pl.DataFrame(y, schema=DIMS).with_columns(id=pl.int_range(n, dtype=pl.Int32))
    return originals, avatars.sample(fraction=1.0, shuffle=True, seed=seed)


def brute_force_distances(originals: np.ndarray, avatars: np.ndarray) -> tuple[np.ndarray, ...]:
    """DCR and NNDR of each avatar: float64 d2 column by column, sorted, square-rooted."""
    d2 = np.zeros((len(avatars), len(originals)))
    for k in range(originals.shape[1]):
        diff = originals[None, :, k] - avatars[:, k : k + 1]
        d2 += diff * diff
    d2.sort(axis=1)
    first, second = np.sqrt(d2[:, 0]), np.sqrt(d2[:, 1])
    with np.errstate(invalid="ignore"):
        ratio = np.where(second == 0.0, 1.0, first / second)
    return first, ratio


def own_values(frame: pl.DataFrame, originals: pl.DataFrame) -> tuple[np.ndarray, ...]:
    """The expected DCR and NNDR of each row of ``frame``, from that row's own coordinates."""
    return brute_force_distances(originals.select(DIMS).to_numpy(), frame.select(DIMS).to_numpy())


@pytest.mark.parametrize("keyed", [False, True])
def test_per_avatar_columns_eager_and_lazy(keyed: bool) -> None:
    originals, avatars = make_frames(300, seed=1)
    options = {"coords": DIMS, "on": "id"} if keyed else {"coords": DIMS}
    dcr, nndr = own_values(avatars, originals)
    eager = phr.distance_to_closest(originals, avatars, **options)
    assert isinstance(eager, pl.DataFrame)
    assert eager.columns == [*avatars.columns, "distance_to_closest"]
    assert eager.drop("distance_to_closest").equals(avatars)
    np.testing.assert_array_equal(eager["distance_to_closest"].to_numpy(), dcr)
    lazy = originals.lazy().avatar.closest_distances_ratio(avatars.lazy(), **options)  # type: ignore[attr-defined]
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect_schema()["closest_distances_ratio"] == pl.Float64
    for frame in (lazy.collect(), lazy.collect(engine="streaming")):
        assert frame.drop("closest_distances_ratio").equals(avatars)
        np.testing.assert_array_equal(frame["closest_distances_ratio"].to_numpy(), nndr)


@pytest.mark.parametrize("keyed", [False, True])
def test_each_avatar_row_keeps_its_own_value_under_a_reordering_plan(keyed: bool) -> None:
    originals, avatars = make_frames(200, seed=2)
    options = {"coords": DIMS, "on": "id"} if keyed else {"coords": DIMS}
    # The plan sorts the avatars: each output row must carry the value of the row it holds.
    plan = avatars.lazy().sort("Dim2", "Dim1", "Dim3", "id", descending=True)
    out = phr.distance_to_closest(originals.lazy(), plan, **options).collect()
    assert out.drop("distance_to_closest").equals(plan.collect())
    np.testing.assert_array_equal(
        out["distance_to_closest"].to_numpy(), own_values(out, originals)[0]
    )


@pytest.mark.parametrize("decoy", [False, True])
def test_per_avatar_values_linked_by_keys_of_other_names(decoy: bool) -> None:
    """``left_on="id", right_on="key"``: the avatars' own keys are their ``key`` column, even
    when they also hold an ``id`` that means something else."""
    originals, avatars = make_frames(250, seed=13)
    avatars = avatars.rename({"id": "key"})
    if decoy:
        shuffled = np.random.default_rng(13).permutation(250)
        avatars = avatars.with_columns(id=pl.Series(shuffled, dtype=pl.Int64))
    dcr, nndr = own_values(avatars, originals)
    options: phr.CountOptions = {"coords": DIMS, "left_on": "id", "right_on": "key"}
    eager = phr.closest_distances_ratio(
        originals, phr.distance_to_closest(originals, avatars, **options), **options
    )
    lazy = phr.closest_distances_ratio(
        originals, phr.distance_to_closest(originals, avatars.lazy(), **options), **options
    ).collect()
    for result in (eager, lazy):
        assert result.drop("distance_to_closest", "closest_distances_ratio").equals(avatars)
        np.testing.assert_array_equal(result["distance_to_closest"].to_numpy(), dcr)
        np.testing.assert_array_equal(result["closest_distances_ratio"].to_numpy(), nndr)
    report = phr.privacy_report(originals, avatars, **options)
    np.testing.assert_array_equal(np.sort(report.distance_to_closest), np.sort(dcr))


@pytest.mark.parametrize("size", [1, 37, 450])
@pytest.mark.parametrize("lazy", [False, True])
def test_a_synthetic_set_of_any_size_is_measured_without_a_link(size: int, lazy: bool) -> None:
    """Issue 23: a DCR and an NNDR need no link; a synthetic set of another size (a
    holdout, another generator's output) is measured against every original, its rows in
    the order its plan gives, even where the frames share no key or a key that matches
    nothing."""
    originals, _ = make_frames(300, seed=5)
    rng = np.random.default_rng(size)
    synthetic = pl.DataFrame(
        rng.integers(-3, 4, (size, len(DIMS))) * 0.5, schema=DIMS
    ).with_columns(id=pl.int_range(10_000, 10_000 + size, dtype=pl.Int64))
    plan = synthetic.lazy().sort("Dim1", descending=True)
    expected = plan.collect() if lazy else synthetic
    for options in ({"coords": DIMS}, {"coords": DIMS, "on": "id"}):
        if lazy:
            dcr_frame = phr.distance_to_closest(originals, plan, **options).collect()
            nndr_frame = phr.closest_distances_ratio(originals, plan, **options).collect()
        else:
            dcr_frame = phr.distance_to_closest(originals, synthetic, **options)
            nndr_frame = phr.closest_distances_ratio(originals, synthetic, **options)
        dcr, nndr = own_values(expected, originals)
        assert dcr_frame.drop("distance_to_closest").equals(expected)
        np.testing.assert_array_equal(dcr_frame["distance_to_closest"].to_numpy(), dcr)
        np.testing.assert_array_equal(nndr_frame["closest_distances_ratio"].to_numpy(), nndr)


def test_a_synthetic_set_of_another_size_in_the_projected_space() -> None:
    raw = {name: f"raw{k}" for k, name in enumerate(DIMS)}
    originals, _ = (frame.rename(raw) for frame in make_frames(150, seed=6))
    synthetic = originals.head(40).with_columns(pl.col("raw0") + 0.25)
    projection = phr.Projection.fit(originals, features=list(raw.values()), ncp=2)
    names = projection.coordinate_columns(2)
    x = projection.transform(originals).select(names).to_numpy()
    y = projection.transform(synthetic).select(names).to_numpy()
    dcr, _ = brute_force_distances(x, y)
    out = phr.distance_to_closest(originals, synthetic, features=list(raw.values()), ncp=2)
    np.testing.assert_allclose(out["distance_to_closest"].to_numpy(), dcr, rtol=1e-12, atol=1e-12)


def test_per_avatar_in_the_projected_space() -> None:
    raw = {name: f"raw{k}" for k, name in enumerate(DIMS)}
    originals, avatars = (frame.rename(raw) for frame in make_frames(150, seed=3))
    projection = phr.Projection.fit(originals, features=list(raw.values()), ncp=2)
    names = projection.coordinate_columns(2)
    x = projection.transform(originals).select(names).to_numpy()
    y = projection.transform(avatars).select(names).to_numpy()
    dcr, _ = brute_force_distances(x, y)
    out = phr.distance_to_closest(originals, avatars, features=list(raw.values()), ncp=2, on="id")
    np.testing.assert_allclose(out["distance_to_closest"].to_numpy(), dcr, rtol=1e-12, atol=1e-12)


def test_per_avatar_refuses_an_existing_column_and_unknown_options() -> None:
    originals, avatars = make_frames(20, seed=4)
    with pytest.raises(DuplicateError, match="distance_to_closest"):
        phr.distance_to_closest(
            originals, avatars.with_columns(distance_to_closest=0.0), coords=DIMS
        )
    with pytest.raises(TypeError, match="closest_distances_ratio\\(\\) got an unexpected keyword"):
        phr.closest_distances_ratio(originals, avatars, coord=DIMS)  # type: ignore[call-arg]


def test_direct_matches_with_nulls_nan_and_mixed_types() -> None:
    originals = pl.DataFrame(
        {
            "id": [1, 2, 3, 4],
            "age": pl.Series([30, 41, None, 7], dtype=pl.Int32),
            "weight": [70.5, float("nan"), 60.0, 0.0],
            "city": pl.Series(["Lyon", "Nice", None, "Pau"], dtype=pl.Categorical),
        }
    )
    avatars = pl.DataFrame(
        {
            "id": [10, 20, 30, 40, 50],
            "age": [30.0, 41.0, None, 7.0, 30.5],
            "weight": pl.Series([70.5, float("nan"), 60.0, -0.0, 70.5], dtype=pl.Float32),
            "city": ["Lyon", "Nice", None, "Pau", "Lyon"],
        }
    )
    # Rows 1-4 copy an original (nulls equal nulls, NaN equals NaN, -0.0 equals 0.0); the
    # ids differ everywhere, so the default features must leave the key out.
    assert phr.row_direct_match_protection(originals, avatars, on="id") == 20.0
    assert phr.row_direct_match_protection(originals.lazy(), avatars.lazy(), on="id") == 20.0
    # With the ids as a feature, nothing matches.
    assert phr.row_direct_match_protection(originals, avatars) == 100.0
    assert originals.avatar.row_direct_match_protection(avatars, features=["city"]) == 0.0  # type: ignore[attr-defined]
    assert phr.row_direct_match_protection(originals, avatars, features=["age"]) == 20.0


def _as_joined(value: object) -> object:
    """A value as Polars' join compares it: -0.0 as 0.0, every NaN one value."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value + 0.0
    return value


@settings(max_examples=examples(100), deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from([0.0, -0.0, 1.5, float("nan"), None]),
            st.sampled_from(["a", "b", None]),
        ),
        min_size=1,
        max_size=12,
    ),
    picks=st.lists(st.integers(0, 11), min_size=1, max_size=12),
    collide=st.booleans(),
)
def test_direct_matches_equal_a_set_of_the_originals(
    rows: list[tuple[float | None, str | None]],
    picks: list[int],
    collide: bool,
) -> None:
    """Against a brute force: an avatar is a copy when its values, as the join compares
    them, are an original's. With every row hashed alike, the join alone must settle each
    candidate: the hashes only choose the rows it looks at."""
    originals = pl.DataFrame(rows, schema={"x": pl.Float64, "s": pl.String}, orient="row")
    copied = [rows[i % len(rows)] for i in picks]
    avatars = pl.DataFrame(
        [(None if x is None else x * 2 if i % 3 == 0 else x, t) for i, (x, t) in enumerate(copied)],
        schema={"x": pl.Float64, "s": pl.String},
        orient="row",
    )
    seen = {tuple(map(_as_joined, row)) for row in originals.rows()}
    copies = sum(tuple(map(_as_joined, row)) in seen for row in avatars.rows())
    expected = 100.0 * (avatars.height - copies) / avatars.height
    with pytest.MonkeyPatch.context() as patch:
        if collide:
            alike = (pl.struct("x", "s").hash() * 0 + 7).alias("hash")
            patch.setattr(row_match, "_row_hash", lambda dtypes: alike)
        assert phr.row_direct_match_protection(originals, avatars) == pytest.approx(expected)


def test_direct_matches_refuse_what_cannot_be_compared() -> None:
    originals = pl.DataFrame({"flag": [True, False], "n": [2**60, 1], "s": ["a", "b"]})
    avatars = pl.DataFrame({"flag": [1, 0], "n": [1.0, 2.0], "s": ["a", "c"]})
    with pytest.raises(SchemaError, match="feature 'flag' is Boolean in originals but Int64"):
        phr.row_direct_match_protection(originals, avatars)
    with pytest.raises(ComputeError, match="feature 'n' of originals has 1 integer value"):
        phr.row_direct_match_protection(originals, avatars, features=["n"])
    with pytest.raises(ColumnNotFoundError, match="'z' not found in originals"):
        phr.row_direct_match_protection(originals, avatars, features=["z"])
    with pytest.raises(SchemaError, match="share no column"):
        phr.row_direct_match_protection(
            originals, avatars.rename({"flag": "f", "n": "m", "s": "t"})
        )
    with pytest.raises(pl.exceptions.NoDataError):
        phr.row_direct_match_protection(originals, avatars.clear(), features=["s"])


@pytest.mark.parametrize(
    ("n_hidden", "n", "confidence", "expected"),
    [
        (90, 100, 0.95, (82.5634, 94.4771)),
        (5, 10, 0.95, (23.6593, 76.3407)),
        (0, 10, 0.95, (0.0, 27.7533)),
        (10, 10, 0.95, (72.2467, 100.0)),
        (90, 100, 0.99, (79.6249, 95.3974)),
    ],
)
def test_wilson_interval_known_values(
    n_hidden: int, n: int, confidence: float, expected: tuple[float, float]
) -> None:
    low, high = phr.hidden_rate_interval(n_hidden, n, confidence)
    assert low == pytest.approx(expected[0], abs=1e-4)
    assert high == pytest.approx(expected[1], abs=1e-4)
    # Both bounds solve the Wilson equation (p_hat - p)^2 = z^2 p (1 - p) / n.
    z = {0.95: 1.959963984540054, 0.99: 2.5758293035489004}[confidence]
    for bound in (low, high):
        p = bound / 100
        assert (n_hidden / n - p) ** 2 == pytest.approx(z * z * p * (1 - p) / n, abs=1e-12)


def test_wilson_interval_is_symmetric_and_checked() -> None:
    for k in range(0, 31):
        low, high = phr.hidden_rate_interval(k, 30)
        mirror_low, mirror_high = phr.hidden_rate_interval(30 - k, 30)
        assert 0.0 <= low <= 100 * k / 30 <= high <= 100.0
        assert low == pytest.approx(100.0 - mirror_high, abs=1e-12)
        assert high == pytest.approx(100.0 - mirror_low, abs=1e-12)
    with pytest.raises(ValueError, match="`n_hidden` must be at most n=3"):
        phr.hidden_rate_interval(4, 3)
    with pytest.raises(ValueError, match="`n` must be at least 1"):
        phr.hidden_rate_interval(0, 0)
    for bad in (0.0, 1.0, 1.5, math.nan):
        with pytest.raises(ValueError, match="confidence"):
            phr.hidden_rate_interval(1, 2, bad)


@settings(max_examples=examples(100), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 80),
    unit=st.sampled_from([1.0, 2.0**-30, 2.0**300]),
    offset=st.sampled_from([0.0, 2.0**40, -(2.0**45) + 0.25]),
    tie_tol=st.sampled_from([0.0, 1e-9, 9.99e-4]),
)
def test_report_counts_and_distances_equal_the_brute_force(
    seed: int, n: int, unit: float, offset: float, tie_tol: float
) -> None:
    # The read's arrays are counted, then measured, in place, on one scaling of them (the
    # largest tie_tol, below 1e-3, keeps the counts' scale): the same floats.
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, (n, 3)) * unit + offset
    y = (rng.integers(-3, 4, (n, 3)) + rng.integers(-1, 2, (n, 3))) * unit + offset
    y[rng.random(n) < 0.2] = x[rng.integers(0, n)]  # copies of an original, distances 0
    originals, avatars = (pl.DataFrame(a, schema=DIMS) for a in (x, y))
    report = phr.privacy_report(
        originals, avatars, coords=DIMS, tie_tol=tie_tol, allow_unlinked=True
    )
    np.testing.assert_array_equal(report.local_cloaking, brute_force_counts(x, y, tie_tol))
    dcr, nndr = brute_force_distances(x, y)
    np.testing.assert_array_equal(report.distance_to_closest, dcr)
    np.testing.assert_array_equal(report.closest_distances_ratio, nndr)


def test_report_values_match_the_free_functions() -> None:
    originals, avatars = make_frames(400, seed=5)
    report = phr.privacy_report(originals, avatars, coords=DIMS, on="id")
    ordered = avatars.sort("id")
    counts = brute_force_counts(
        originals.select(DIMS).to_numpy(), ordered.select(DIMS).to_numpy(), 1e-9
    )
    dcr, nndr = own_values(ordered, originals)
    np.testing.assert_array_equal(report.local_cloaking, counts)
    np.testing.assert_array_equal(report.distance_to_closest, dcr)
    np.testing.assert_array_equal(report.closest_distances_ratio, nndr)
    assert report.n == 400
    assert report.n_hidden == int(np.count_nonzero(counts))
    assert report.hidden_rate == phr.hidden_rate(originals, avatars, coords=DIMS, on="id")
    assert report.local_cloaking_median == float(np.median(counts))
    assert report.distance_to_closest_median == float(np.median(dcr))
    assert report.closest_distances_ratio_median == float(np.median(nndr))
    assert report.row_direct_match_protection == phr.row_direct_match_protection(
        originals, avatars, on="id"
    )
    assert (report.hidden_rate_low, report.hidden_rate_high) == phr.hidden_rate_interval(
        report.n_hidden, 400
    )
    # By row order on the same links, the same report.
    by_row = originals.avatar.privacy_report(ordered, coords=DIMS, by_row_order=True)  # type: ignore[attr-defined]
    got = by_row.to_dict()
    # Linked by row order, the evidence says what the sorted-link rule saw (none by key).
    checked = {"checked": True, "column": None, "direction": None, "within": None}
    assert got["evidence"]["sorted_link"] == checked
    assert report.to_dict()["evidence"]["sorted_link"] is None
    got["evidence"]["sorted_link"] = None
    # Each states the link it was measured on (its provenance); every figure is the same.
    assert got["provenance"]["settings"]["link"] == {"by": "row order"}
    assert report.to_dict()["provenance"]["settings"]["link"]["by"] == "key"
    assert without_provenance(got) == without_provenance(report.to_dict())


def test_report_dict_keys_and_json() -> None:
    originals, avatars = make_frames(100, seed=6)
    report = phr.privacy_report(originals.lazy(), avatars.lazy(), coords=DIMS, on="id")
    data = json.loads(json.dumps(report.to_dict()))
    assert list(data) == [
        "n",
        "n_hidden",
        "space",
        "confidence",
        "hidden_rate_interval",
        "metrics",
        "evidence",
        "holdout",
        "passed",
        "provenance",
        "correlation_protection_rate",
        "column_direct_match_protection",
        "categorical_hidden_rate",
        # The newer sections' keys, after those of the first releases, in the sections' order.
        "n_synthetic",
        "own_copies",
        "holdout_metrics",
        "link_use",
        "holdout_note",
        "warnings",
        "linkability",
        "singling_out",
        "dcr_baseline_protection",
        "space_comparison",
    ]
    assert data["warnings"] == []  # the Python API raises them as Python warnings
    assert data["holdout"] is None  # without a holdout
    assert data["linkability"] is None  # not asked
    assert data["singling_out"] is None  # not asked
    assert data["dcr_baseline_protection"] is None
    assert data["space_comparison"] is None
    assert data["holdout_metrics"] is None
    assert data["link_use"] == "judged"
    assert data["own_copies"] == {
        "value": report.evidence.own_copies_percent if report.evidence else None,
        "target": 10.0,
        "direction": "<=",
        "passed": True,
        "reason": None,
    }
    # Without `known` the correlation protection rate is not measured; the two metrics
    # without a public definition never are: null, with the reason, and no verdict.
    assert data["correlation_protection_rate"] == {
        "value": None,
        "target": 95.0,
        "passed": None,
        "reason": "not computed: give `known`, the variables an attacker knows (--known)",
    }
    undefined = (("column_direct_match_protection", 50.0), ("categorical_hidden_rate", 90.0))
    for name, target in undefined:
        assert data[name] == {
            "value": None,
            "target": target,
            "passed": None,
            "reason": "not applicable: no public definition",
        }
    assert list(data["evidence"]) == [
        "own_copies",
        "own_copies_percent",
        "hidden_by_ties_only",
        "copy_features",
        "unseen_modalities",
        "link_test",
        "sorted_link",
    ]
    assert list(data["metrics"]) == list(METRICS)
    for name, entry in data["metrics"].items():
        assert set(entry) == {"value", "target", "passed"}
        assert entry["value"] == getattr(report, name)
        assert entry["target"] == DEFAULT_TARGETS[name]
    assert data["hidden_rate_interval"] == [report.hidden_rate_low, report.hidden_rate_high]
    assert data["confidence"] == 0.95
    assert data["space"] == "coords 'Dim1', 'Dim2', 'Dim3' (3 columns)"


def sample_report(**targets: float) -> PrivacyReport:
    return PrivacyReport(
        n=100,
        n_hidden=95,
        hidden_rate=95.0,
        hidden_rate_low=88.8,
        hidden_rate_high=97.8,
        confidence=0.95,
        local_cloaking_median=5.0,
        distance_to_closest_median=0.5,
        closest_distances_ratio_median=0.1,
        row_direct_match_protection=100.0,
        targets=targets,
        local_cloaking=np.arange(100),
        distance_to_closest=np.linspace(0, 1, 100),
        closest_distances_ratio=np.linspace(0, 1, 100),
    )


def test_pass_fail_logic_and_targets() -> None:
    report = sample_report()
    # A value equal to its target fails: targets are strict lower bounds.
    assert report.checks == {
        "hidden_rate": True,
        "local_cloaking_median": False,
        "distance_to_closest_median": True,
        "closest_distances_ratio_median": False,
        "row_direct_match_protection": True,
    }
    assert not report.passed
    relaxed = sample_report(local_cloaking_median=4.5, closest_distances_ratio_median=0.05)
    assert relaxed.passed
    assert relaxed.targets["hidden_rate"] == 90.0
    assert not sample_report(local_cloaking_median=4.5, hidden_rate=95.0).passed
    with pytest.raises(ValueError, match="unknown target 'dcr'; the metrics are hidden_rate, "):
        sample_report(dcr=0.1)
    with pytest.raises(TypeError, match="targets\\['hidden_rate'\\]"):
        phr.privacy_report(pl.DataFrame({"a": [1.0]}), pl.DataFrame({"a": [1.0]}),
                           targets={"hidden_rate": "90"})  # type: ignore[dict-item]  # fmt: skip


class Page(HTMLParser):
    """Collects the tags, the table's body rows and the texts of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.rows: list[list[str]] = []
        self.texts: list[str] = []
        self._in_body = self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend(name for name, _ in attrs)
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
        elif tag == "td":
            self._in_cell = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_body = False
        elif tag == "td":
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        if self._in_cell and self._in_body:
            self.rows[-1].append(data)


def test_html_page() -> None:
    page = Page()
    page.feed(sample_report().to_html(title="<script>alert('x')</script> & co"))
    assert page.tags.count("svg") == 3
    assert page.tags.count("title") == 4  # the page's and one per figure
    assert "script" not in page.tags
    assert not {"src", "href"} & set(page.attributes)  # nothing to fetch
    assert page.texts.count("<script>alert('x')</script> & co") == 2  # title and heading
    assert page.rows == [
        ["Hidden rate (%)", "95", "> 90", "pass"],
        ["Local cloaking, median", "5", "> 5", "FAIL"],
        ["Distance to closest record (DCR), median", "0.5", "> 0.2", "pass"],
        ["Nearest neighbour distance ratio (NNDR), median", "0.1", "> 0.3", "FAIL"],
        ["Row direct match protection (%)", "100", "> 90", "pass"],
        [
            "Correlation protection rate (%)",
            # No Markdown on the page: the code marks of the terminal's words left out.
            "not computed: give known, the variables an attacker knows",  # no flag on the page
            "> 95",
            "not computed",
        ],
        [
            "Column direct match protection (%)",
            "not applicable: no public definition",
            "> 50",
            "not computed",
        ],
        [
            "Categorical hidden rate (%)",
            "not applicable: no public definition",
            "> 90",
            "not computed",
        ],
        # Without a holdout, the verdict's line that says what distances cannot show.
        [PAGE_NO_HOLDOUT],
    ]
    for label in (
        "local cloaking",
        "distance to the closest original",
        "nearest / second distance",
    ):
        assert label in page.texts
    assert page.texts.count("avatars") == 2
    assert page.texts.count("originals") == 1


def test_a_registered_section_shows_in_the_json_the_page_and_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from polars_hidden_rate.report import sections
    from polars_hidden_rate.report.section import Histogram, Row, Section

    def extra(report: PrivacyReport) -> Section:
        rows = (
            Row("extra metric (%)", 97.5, 95.0, True, page_label="Extra metric <page> (%)"),
            Row("extra fact", f"{report.n:,} records & more"),
            Row("extra, terminal only", "said in the terminal", only="text"),
        )
        figure = Histogram(np.arange(10.0), "The extra's histogram", "extra", "records")
        return Section("extra", "The extra <section>", rows, {"extra": {"value": 97.5}}, (figure,))

    keys, lines_before = list(sample_report().to_dict()), sample_report().to_text().splitlines()
    monkeypatch.setattr(sections, "SECTIONS", (*sections.SECTIONS, extra))
    report = sample_report()
    # The JSON: the entry after the keys of the first releases, which keep their order.
    data = report.to_dict()
    assert data["extra"] == {"value": 97.5}
    assert list(data) == [*keys, "extra"]
    # The page: the metric in the table of metrics, the fact in a table under the section's
    # title, the figure beside the others; every text escaped.
    page, html = Page(), report.to_html()
    page.feed(html)
    assert ["Extra metric <page> (%)", "97.5", "> 95", "pass"] in page.rows
    assert "<h2>The extra &lt;section&gt;</h2>" in html
    assert "<tr><th>extra fact</th><td>100 records &amp; more</td></tr>" in html
    assert "said in the terminal" not in html
    assert page.tags.count("svg") == 4
    assert "The extra's histogram" in page.texts
    # The text: a line per row, after those of the registered sections.
    lines = report.to_text().splitlines()
    assert lines[: len(lines_before)] == lines_before
    assert lines[-3:] == [
        f"{'extra metric (%)':<30}{'97.5':<12}target > 95      PASS",
        f"{'extra fact':<30}100 records & more",
        f"{'extra, terminal only':<30}said in the terminal",
    ]


def test_every_section_of_a_report_shows_in_each_format() -> None:
    """Each section's entry is in the JSON, each of its rows in the text and on the page
    that show it: a section one format leaves out fails here."""
    import html as escaping

    originals, avatars = make_frames(120, seed=4)
    holdout, _ = make_frames(60, seed=5)
    report = phr.privacy_report(
        originals,
        avatars,
        coords=DIMS,
        on="id",
        holdout=holdout,
        known=["Dim1", "Dim2"],
        secret="Dim3",
        aux_cols=(["Dim1"], ["Dim2", "Dim3"]),
        singling_out="univariate",
        dcr_baseline=True,
        compare_spaces=True,
    ).with_provenance(
        {
            "inputs": {"originals": {"path": "o.csv", "rows": 120, "size": 9, "sha256": "ab"}},
            "settings": {
                "space": {"coords": DIMS},
                "link": {"by": "row order"},
                "tie_tol": 1e-9,
            },
            "versions": {"polars": "1"},
            "measured_at": "2026-01-01T00:00:00Z",
        }
    )
    report = report.with_warnings(["a warning no measure shows", "a warning no measure shows"])
    data, text, page = report.to_dict(), report.to_text().splitlines(), report.to_html()
    assert data["warnings"] == ["a warning no measure shows"]
    keys = [key for section in report.sections() for key in section.entry]
    assert sorted(keys) == sorted(data)  # no key twice, none from elsewhere
    for section in report.sections():
        for key, value in section.entry.items():
            assert data[key] == value, key
        for row in section.rows_in("text"):
            assert any(line.startswith(f"{row.label:<{section.width}}") for line in text), row
        for row in section.rows_in("page"):
            assert (
                f"<td>{escaping.escape(row.label_in('page'))}</td>" in page
                or (f"<th>{escaping.escape(row.label_in('page'))}</th>" in page)
                or (row.heading and f"<h2>{escaping.escape(row.label)}</h2>" in page)
            ), row
    assert {s.key for s in report.sections()} == {
        "records", "metrics", "release", "verdict", "warnings", "holdout", "linkability",
        "singling_out",
        "dcr_baseline", "spaces", "holdout_metrics", "evidence", "provenance",
    }  # fmt: skip
    assert all(section.rows for section in report.sections())


def test_the_linkability_and_baseline_entries_equal_the_standalone_functions() -> None:
    """The report's ``linkability`` and ``dcr_baseline_protection`` are the values of
    `linkability_risk` and `dcr_baseline_protection` on the same sets and options, in the
    projected space (each side's own projection, the report's for the baseline) and in
    anonymeter's; the report's text and page say them."""
    originals, avatars = make_frames(150, seed=8)
    holdout, _ = make_frames(70, seed=9)
    raw = {"features": DIMS, "ncp": 2}
    sides = (["Dim1"], ["Dim2", "Dim3"])
    for space, options in (("projected", raw), ("gower", {"coords": DIMS})):
        report = phr.privacy_report(
            originals,
            avatars,
            on="id",
            holdout=holdout,
            aux_cols=sides,
            n_neighbors=2,
            attack_space=space,  # type: ignore[arg-type]
            dcr_baseline=True,
            baseline_seed=5,
            **options,
        )
        data = report.to_dict()
        alone = phr.linkability_risk(
            originals,
            avatars,
            holdout,
            aux_cols=sides,
            n_neighbors=2,
            space=space,  # type: ignore[arg-type]
        )
        assert data["linkability"] == alone.to_dict()
        assert data["linkability"]["space"] == space
        assert data["linkability"]["aux_cols"] == [["Dim1"], ["Dim2", "Dim3"]]
        baseline = phr.dcr_baseline_protection(originals, avatars, seed=5, **options)
        assert data["dcr_baseline_protection"] == baseline.to_dict()
        assert data["dcr_baseline_protection"]["seed"] == 5
        text, page = report.to_text(), report.to_html()
        for shown in (f"{alone.risk:.4f}", f"{baseline.score:.4f}"):
            assert shown in text
            assert shown in page
        assert "<h2>Linkability attack</h2>" in page
        assert "<h2>DCR baseline protection</h2>" in page


def test_the_report_refuses_a_linkability_attack_or_baseline_it_cannot_run() -> None:
    originals, avatars = make_frames(40, seed=1)
    holdout, _ = make_frames(20, seed=2)
    options: dict[str, Any] = {"coords": DIMS, "on": "id"}
    sides = (["Dim1"], ["Dim2"])
    with pytest.raises(ValueError, match="needs a holdout"):
        phr.privacy_report(originals, avatars, aux_cols=sides, **options)
    with pytest.raises(ValueError, match="`n_neighbors` sets the linkability attack"):
        phr.privacy_report(originals, avatars, holdout=holdout, n_neighbors=3, **options)
    with pytest.raises(ValueError, match="`attack_space` sets the space"):
        phr.privacy_report(originals, avatars, attack_space="gower", **options)
    with pytest.raises(ValueError, match="`space` must be"):
        phr.privacy_report(originals, avatars, attack_space="euclid", **options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`baseline_seed` seeds"):
        phr.privacy_report(originals, avatars, baseline_seed=3, **options)
    with pytest.raises(ValueError, match="`baseline_seed` must be a non-negative integer"):
        phr.privacy_report(originals, avatars, dcr_baseline=True, baseline_seed=-1, **options)
    with pytest.raises(DuplicateError, match="'Dim1' is in both A and B"):
        phr.privacy_report(
            originals, avatars, holdout=holdout, aux_cols=(["Dim1"], ["Dim1"]), **options
        )
    with pytest.raises(ColumnNotFoundError, match="aux_cols column 'x' not found in originals"):
        phr.privacy_report(
            originals, avatars, holdout=holdout, aux_cols=(["x"], ["Dim2"]), **options
        )
    with pytest.raises(SchemaError, match="lacks 'Dim2'"):  # before the attack's columns
        phr.privacy_report(
            originals, avatars, holdout=holdout.drop("Dim2"), aux_cols=sides, **options
        )
    with pytest.raises(TypeError, match="must be a pair"):
        phr.privacy_report(originals, avatars, holdout=holdout, aux_cols="Dim1", **options)  # type: ignore[arg-type]


def test_benchmark_script_runs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from benchmarks import bench_report

    # Into tmp_path: a test must not overwrite the measured results in benchmarks/results.
    arguments = ["--sizes", "300", "--dims", "3", "--repeat", "1", "--threads", "1"]
    bench_report.main([*arguments, "--out", str(tmp_path)])
    assert "n=300 d=3: local_cloaking" in capsys.readouterr().out
    assert (tmp_path / "report.md").exists()


def test_report_in_the_projected_space_and_its_checks() -> None:
    originals, avatars = make_frames(120, seed=7)
    # Shared but not projected: the report judges copies on the projected features only.
    originals = originals.with_columns(note=pl.lit("o"))
    avatars = avatars.with_columns(note=pl.lit("a"))
    report = phr.privacy_report(originals, avatars, features=DIMS, ncp=2, on="id")
    assert report.row_direct_match_protection == phr.row_direct_match_protection(
        originals, avatars, features=DIMS
    )
    assert report.row_direct_match_protection < 100.0  # some avatars copy an original
    dcr = phr.distance_to_closest(originals, avatars, features=DIMS, ncp=2, on="id")
    median = dcr["distance_to_closest"].median()
    assert isinstance(median, float)
    assert report.distance_to_closest_median == float(median)
    with pytest.raises(ValueError, match="`confidence` must lie strictly between 0 and 1"):
        phr.privacy_report(originals, avatars, confidence=1.0, coords=DIMS)
    with pytest.raises(TypeError, match="privacy_report\\(\\) got an unexpected keyword"):
        phr.privacy_report(originals, avatars, min_rate=90)  # type: ignore[call-arg]


class Figures(HTMLParser):
    """The figures of a page: per ``<svg>``, its title, bars, texts and target line."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: list[dict[str, Any]] = []
        self._text: dict[str, str] | None = None
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {name: value or "" for name, value in attrs}
        if tag == "svg":
            self.figures.append({"title": "", "bars": [], "texts": [], "targets": []})
        elif not self.figures:
            return
        elif tag == "title":
            self._in_title = True
        elif tag == "rect" and named.get("class") == "bar":
            self.figures[-1]["bars"].append(named)
        elif tag == "line" and named.get("class") == "target":
            self.figures[-1]["targets"].append(named)
        elif tag == "text":
            self._text = named

    def handle_endtag(self, tag: str) -> None:
        self._in_title = self._in_title and tag != "title"
        if tag == "text":
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.figures[-1]["title"] += data
        elif self._text is not None:
            self.figures[-1]["texts"].append({**self._text, "text": data})


def figures_of(page: str) -> list[dict[str, Any]]:
    parsed = Figures()
    parsed.feed(page)
    return parsed.figures


def histogram_of(values: Any, **options: Any) -> dict[str, Any]:
    from polars_hidden_rate.report.svg import svg_histogram

    (figure,) = figures_of(svg_histogram(values, "title", "x", "y", **options))
    return figure


def below_axis(figure: dict[str, Any]) -> list[dict[str, str]]:
    """The texts under the x axis: ticks and the labels of the bars of their own."""
    axis = max(float(bar["y"]) + float(bar["height"]) for bar in figure["bars"])
    return [
        t
        for t in figure["texts"]
        if axis < float(t["y"]) < axis + 30 and t.get("text-anchor") == "middle"
    ]


def number(text: str) -> Decimal:
    return Decimal(text.replace(",", ""))


def assert_round_ticks(figure: dict[str, Any]) -> list[Decimal]:
    """The x ticks are multiples of one step, 1, 2 or 5 times a power of ten."""
    own = [
        float(bar["x"]) + float(bar["width"]) / 2
        for bar in figure["bars"]
        if bar["data-low"] == bar["data-high"] or bar["data-high"] == "inf"
    ]
    ticks = [
        number(t["text"])
        for t in below_axis(figure)
        if all(abs(float(t["x"]) - x) > 1 for x in own)  # not a bar's own label
    ]
    steps = {b - a for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1, ticks
    (step,) = steps
    mantissa = step.scaleb(-step.adjusted()).normalize()
    assert mantissa in (1, 2, 5), step
    assert all(tick % step == 0 for tick in ticks)
    return ticks


def test_a_local_cloaking_of_0_has_a_bar_of_its_own_labelled_with_its_count() -> None:
    """Bins of many counts used to hide the records not hidden in the first bar."""
    rng = np.random.default_rng(11)
    counts = np.concatenate([np.zeros(1234, dtype=np.int64), rng.integers(1, 400, 20_000)])
    figure = histogram_of(counts, target=5.0, discrete=True, zero_bar=True)
    bars = figure["bars"]
    zero = [bar for bar in bars if float(bar["data-low"]) == float(bar["data-high"]) == 0.0]
    assert len(zero) == 1
    assert int(zero[0]["data-count"]) == 1234
    others = [bar for bar in bars if bar is not zero[0]]
    assert all(float(bar["data-low"]) >= 0.5 for bar in others)  # no other bar holds a 0
    assert all(float(bar["x"]) > float(zero[0]["x"]) for bar in others)
    assert sum(int(bar["data-count"]) for bar in bars) == counts.size
    texts = [t["text"] for t in figure["texts"]]
    assert "1,234" in texts  # its count, with a thousands separator
    zero_x = float(zero[0]["x"]) + float(zero[0]["width"]) / 2
    assert any(t["text"] == "0" and abs(float(t["x"]) - zero_x) < 1 for t in below_axis(figure))
    # Each ranged bar holds what its range says, and the counts have separators.
    for bar in others:
        low, high = float(bar["data-low"]), float(bar["data-high"])
        inside = (counts > low) & (counts <= high) if high < math.inf else counts > low
        assert int(bar["data-count"]) == int(np.count_nonzero(inside))
    assert "1,000" in texts
    assert "1000" not in texts


def test_values_past_the_99th_percentile_have_a_labelled_bar() -> None:
    values = np.concatenate([np.arange(10_000) % 97, np.full(37, 5_000)])
    figure = histogram_of(values, target=5.0, discrete=True, zero_bar=True)
    rest = [bar for bar in figure["bars"] if bar["data-high"] == "inf"]
    assert len(rest) == 1
    edge = float(rest[0]["data-low"])
    assert int(rest[0]["data-count"]) == int(np.count_nonzero(values > edge)) == 37
    assert edge >= np.quantile(values, 0.99)
    centre = float(rest[0]["x"]) + float(rest[0]["width"]) / 2
    labels = [t["text"] for t in below_axis(figure) if abs(float(t["x"]) - centre) < 1]
    assert labels == [f"> {int(edge - 0.5):,}"]  # the last count the other bars hold
    assert "37" in [t["text"] for t in figure["texts"]]
    # Without a tail, no such bar.
    plain = histogram_of(np.arange(50), target=5.0, discrete=True, zero_bar=True)
    assert all(bar["data-high"] != "inf" for bar in plain["bars"])


@pytest.mark.parametrize(
    ("values", "options"),
    [
        (np.linspace(0.0, 0.2682, 1001), {"target": 0.2, "zero_bar": True}),
        (np.linspace(0.0, 1.0, 300), {"target": 0.3, "limits": (0.0, 1.0)}),
        (np.arange(0, 3_717), {"target": 5.0, "discrete": True, "zero_bar": True}),
        (np.array([0.0, 1e-7, 3.3e-7]), {"zero_bar": True}),
        (np.array([12_345.0, 98_765.4]), {}),
    ],
)
def test_ticks_are_round_numbers_with_thousands_separators(
    values: np.ndarray, options: dict[str, Any]
) -> None:
    figure = histogram_of(values, **options)
    ticks = assert_round_ticks(figure)
    assert len(ticks) >= 2
    for text in (t["text"] for t in below_axis(figure)):
        digits = text.removeprefix("> ").split(".")[0].replace("-", "")
        assert digits == f"{int(digits.replace(',', '')):,}"  # 12,345, never 12345
    left = min(float(bar["x"]) for bar in figure["bars"])
    counts = [t["text"] for t in figure["texts"] if 20 < float(t["x"]) < left]  # y ticks
    assert all(c == f"{int(c.replace(',', '')):,}" for c in counts)  # the y axis too
    # Each bar's range starts and ends on a multiple of the bins' width.
    widths = {
        Decimal(bar["data-high"]) - Decimal(bar["data-low"])
        for bar in figure["bars"]
        if bar["data-high"] != "inf" and bar["data-low"] != bar["data-high"]
    }
    assert len({round(w, 12) for w in widths}) == 1


def test_the_target_line_is_drawn_when_every_value_is_below_it() -> None:
    """The failing case: every record exposed or nearly; the line must not vanish."""
    figure = histogram_of(np.array([0, 1, 1, 0, 1]), target=5.0, discrete=True, zero_bar=True)
    (line,) = figure["targets"]
    x = float(line["x1"])
    ranged = [bar for bar in figure["bars"] if float(bar["data-low"]) > 0]
    last = max(ranged, key=lambda bar: float(bar["x"]))
    assert float(last["data-high"]) >= 5.0  # the bars reach the target
    assert float(ranged[0]["x"]) + float(ranged[0]["width"]) < x  # right of the bar of 1
    assert "target 5" in [t["text"] for t in figure["texts"]]
    dcr = histogram_of(np.zeros(50), target=0.2, zero_bar=True)
    assert len(dcr["targets"]) == 1


def test_the_report_says_in_which_space_it_measured() -> None:
    originals, avatars = make_frames(200, seed=12)
    originals = originals.with_columns(group=pl.col("id") % 3)
    avatars = avatars.with_columns(group=pl.col("id") % 3)
    features = [*DIMS, "group"]
    report = phr.privacy_report(
        originals, avatars, features=features, categorical=["group"], ncp=2, on="id"
    )
    fitted = phr.Projection.fit(originals, features=features, categorical=["group"], ncp=2)
    # Of every component of the scaled space (3 numbers, 3 modalities), which the originals span
    # but one of: the modalities of a variable sum to one.
    space = "FAMD, 2 of 6 components (the originals span 5)"
    assert (fitted.max_ncp, fitted.n_components) == (6, 5)
    assert report.space == space
    assert report.to_dict()["space"] == space
    page = report.to_html()
    titles = [figure["title"] for figure in figures_of(page)]
    assert len(titles) == 3
    assert all(title.endswith(f" — {space}") for title in titles)
    assert f"Measured in {space}." in page
    by_coords = phr.privacy_report(originals, avatars, coords=DIMS[:2], on="id")
    assert by_coords.space == "coords 'Dim1', 'Dim2' (2 columns)"
    pca = phr.privacy_report(originals, avatars, features=DIMS, on="id")
    assert pca.space == "PCA, 3 of 3 components"
    from polars_hidden_rate.cli import format_report

    assert "space                         PCA, 3 of 3 components" in format_report(pca)
    every = phr.privacy_report(
        originals, avatars, features=features, categorical=["group"], ncp="all", on="id"
    )
    assert every.space == "FAMD, 6 of 6 components (the originals span 5)"


def test_values_beside_their_targets_show_the_digits_that_decide() -> None:
    """A hidden rate of 89.995 fails a target of 90: the page and the text never say 90."""
    from polars_hidden_rate.cli import format_report

    close = PrivacyReport(
        n=20_000,
        n_hidden=17_999,
        hidden_rate=89.995,
        hidden_rate_low=89.57,
        hidden_rate_high=90.41,
        confidence=0.95,
        local_cloaking_median=5.0,
        distance_to_closest_median=0.20001,
        closest_distances_ratio_median=0.3,
        row_direct_match_protection=90.00004,
    )
    page = Page()
    page.feed(close.to_html())
    assert [row[1:] for row in page.rows] == [
        ["89.995", "> 90", "FAIL"],
        ["5", "> 5", "FAIL"],
        ["0.20001", "> 0.2", "pass"],
        ["0.3", "> 0.3", "FAIL"],
        ["90.00004", "> 90", "pass"],
        [
            # No Markdown on the page: the code marks of the terminal's words left out.
            "not computed: give known, the variables an attacker knows",  # no flag on the page
            "> 95",
            "not computed",
        ],
        ["not applicable: no public definition", "> 50", "not computed"],
        ["not applicable: no public definition", "> 90", "not computed"],
        [],  # the verdict's line without a holdout, a fact (its text in the one cell)
    ]
    assert PAGE_NO_HOLDOUT in close.to_html()
    assert "20,000 records; 17,999 hidden" in close.to_html()
    lines = [line.split() for line in format_report(close).splitlines()]
    assert ["hidden", "rate", "(%)", "89.995", "target", ">", "90", "FAIL"] in lines
    assert ["median", "DCR", "0.20001", "target", ">", "0.2", "PASS"] in lines
    assert ["direct", "match", "protection", "(%)", "90.00004", "target", ">", "90", "PASS"] in (
        lines
    )


@pytest.mark.parametrize("name", ["hidden_rate", "row_direct_match_protection"])
def test_a_fraction_is_refused_as_a_percentage_target(name: str) -> None:
    with pytest.raises(ValueError, match=rf"`targets\['{name}'\]` is a percentage: 0.9 means"):
        sample_report(**{name: 0.9})
    assert sample_report(**{name: 0.0}).targets[name] == 0.0
    assert sample_report(distance_to_closest_median=0.9).targets["distance_to_closest_median"]


def test_wilson_bounds_at_the_ends_are_exactly_0_and_100() -> None:
    for n in range(1, 400):
        assert phr.hidden_rate_interval(n, n)[1] == 100.0
        assert phr.hidden_rate_interval(0, n)[0] == 0.0
        for k in (0, n // 2, n):
            low, high = phr.hidden_rate_interval(k, n, 0.99)
            assert 0.0 <= low <= high <= 100.0


@pytest.mark.parametrize("categorical", ["auto", ["flag"], None])
def test_a_secret_declared_categorical_stays_categorical_in_anonymeter_space(
    categorical: str | list[str] | None,
) -> None:
    """A 0/1 code the report takes as categorical (named, or by the auto rule) is guessed by
    equality in anonymeter's space too, as in the projected one (its figures then those of
    `inference_risk` asked for a categorical secret); not declared, it stays a number."""
    rng = np.random.default_rng(3)

    def cohort(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {"x": rng.normal(size=n), "y": rng.normal(size=n), "flag": rng.integers(0, 2, n)}
        )

    originals, holdout = cohort(120), cohort(60)
    synthetic = originals.with_columns(
        pl.col("x") + rng.normal(scale=0.3, size=120), pl.col("y") + rng.normal(scale=0.3, size=120)
    )
    extra = {} if categorical is None else {"categorical": categorical}
    report = phr.privacy_report(
        originals,
        synthetic,
        holdout=holdout,
        known=["x", "y"],
        secret="flag",
        attack_space="gower",
        **extra,  # type: ignore[arg-type]
    )
    found = report.to_dict()["holdout"]["inference"]
    kind: Literal["numeric", "categorical"] = "numeric" if categorical is None else "categorical"
    assert found["secret_kind"] == kind
    alone = phr.inference_risk(
        originals, synthetic, holdout, known=["x", "y"], secret="flag", secret_kind=kind,
        space="gower",
    )  # fmt: skip
    assert found["risk"] == alone.risk
