"""A gate that cannot be fooled: reordering plans, rescaling and hostile values.

Each case here once went wrong silently; each test fails on the code before its fix.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import polars.selectors as cs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import polars_hidden_rate as phr
from polars_hidden_rate.frames.files import scan
from polars_hidden_rate.gate import cloaking_summary
from polars_hidden_rate.measures.summary import summarize
from polars_hidden_rate.namespace import AvatarNamespace
from tests.helpers import brute_force_counts, examples, hidden_share

COORDS = ["d1", "d2"]


def noisy_pair(n: int, seed: int, d: int = 2) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals with an id and a payload, and avatars = originals + noise (integer grid)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, (n, d)).astype(float)
    y = x + rng.integers(-2, 3, (n, d))
    names = [f"d{k + 1}" for k in range(d)]
    originals = pl.DataFrame(x, schema=names).with_columns(
        id=pl.Series(rng.permutation(n) * 3, dtype=pl.Int64), site=pl.int_range(n) % 5
    )
    avatars = pl.DataFrame(y, schema=names).with_columns(originals["id"])
    return originals, avatars


def counts_by_id(
    originals: pl.DataFrame, avatars: pl.DataFrame, coords: list[str] = COORDS
) -> dict[int, int]:
    """The float64 brute force, keyed by id (avatars matched to originals by id)."""
    matched = originals.select("id", *coords).join(
        avatars.select("id", *coords), on="id", suffix="_a", maintain_order="left"
    )
    counts = brute_force_counts(
        matched.select(coords).to_numpy(),
        matched.select(f"{c}_a" for c in coords).to_numpy(),
        1e-9,
    )
    return dict(zip(matched["id"].to_list(), counts.tolist(), strict=True))


def assert_counts_by_id(result: pl.DataFrame, expected: dict[int, int]) -> None:
    got = dict(zip(result["id"].to_list(), result["local_cloaking"].to_list(), strict=True))
    assert got == expected
    assert result["hidden"].to_list() == [count > 0 for count in result["local_cloaking"]]


# --- 1. Every record keeps its own count under any lazy plan --------------------------------


def _join(frame: pl.LazyFrame) -> pl.LazyFrame:
    rng = np.random.default_rng(7)
    ids = frame.select("id").collect()["id"].to_numpy()
    lookup = pl.LazyFrame({"id": rng.permutation(ids), "region": rng.integers(0, 5, len(ids))})
    return frame.join(lookup, on="id")


REORDERING_PLANS: dict[str, Callable[[pl.LazyFrame], pl.LazyFrame]] = {
    "join": _join,
    "unique": lambda frame: frame.unique(),
    "group_by_explode": lambda frame: (
        frame.group_by("site").agg(pl.all()).explode(cs.exclude("site"))
    ),
    # A new random order at every read.
    "shuffle": lambda frame: frame.select(pl.struct(pl.all()).shuffle()).unnest(cs.all()),
    "sort_with_ties": lambda frame: frame.sort("site", maintain_order=False),
    "filter": lambda frame: frame.filter(pl.col("id") % 2 == 0).unique(),
}


def _collectors(tmp_path: Path) -> dict[str, Callable[[pl.LazyFrame], pl.DataFrame]]:
    def sunk(frame: pl.LazyFrame) -> pl.DataFrame:
        path = tmp_path / "out.parquet"
        frame.sink_parquet(path)
        return pl.read_parquet(path)

    return {
        "collect": lambda frame: frame.collect(),
        "streaming": lambda frame: frame.collect(engine="streaming"),
        "sink": sunk,
    }


@pytest.mark.parametrize("plan", sorted(REORDERING_PLANS))
def test_keyed_counts_follow_their_records(plan: str, tmp_path: Path) -> None:
    originals, avatars = noisy_pair(3000, seed=1)
    reorder = REORDERING_PLANS[plan]
    left = reorder(originals.lazy())
    right = avatars.lazy()
    if plan == "filter":  # filters on both sides: the avatars lose the same records
        right = right.filter(pl.col("id") % 2 == 0)
    kept = left.collect()
    expected = counts_by_id(kept, right.collect())
    per_record = phr.local_cloaking(left, right, coords=COORDS, on="id")
    assert isinstance(per_record, pl.LazyFrame)
    for name, collect in _collectors(tmp_path).items():
        result = collect(per_record)
        assert result.height == kept.height, name
        assert_counts_by_id(result, expected)
    eager = phr.local_cloaking(kept, avatars.filter(pl.col("id").is_in(kept["id"].implode())),
                               coords=COORDS, on="id")  # fmt: skip
    assert_counts_by_id(eager, expected)


@pytest.mark.parametrize("plan", ["shuffle", "join", "group_by_explode"])
def test_row_order_link_counts_the_rows_it_shows(plan: str, tmp_path: Path) -> None:
    # By row order the link *is* the order the plan gives: each output row must carry the
    # count of the row it shows, linked to the avatar of the same position.
    originals, avatars = noisy_pair(2000, seed=2)
    left = REORDERING_PLANS[plan](originals.lazy())
    per_record = phr.local_cloaking(left, avatars.lazy(), coords=COORDS)
    for collect in _collectors(tmp_path).values():
        result = collect(per_record)
        expected = brute_force_counts(
            result.select(COORDS).to_numpy(), avatars.select(COORDS).to_numpy(), 1e-9
        )
        np.testing.assert_array_equal(result["local_cloaking"].to_numpy(), expected)


def test_a_plan_that_changes_its_records_between_reads_is_refused() -> None:
    # Two versions of each record; each read keeps a random one of them.
    originals, avatars = noisy_pair(500, seed=3)
    doubled = pl.concat([originals, originals.with_columns(pl.col("d1") + 100.0)])
    either = (
        doubled.lazy()
        .with_columns(draw=pl.int_range(pl.len()).shuffle())
        .sort("draw")
        .unique("id", keep="first")
        .drop("draw")
    )
    with pytest.raises(pl.exceptions.ComputeError, match="gave other records when read again"):
        phr.local_cloaking(either, avatars.lazy(), coords=COORDS, on="id").collect()


def test_keyed_join_back_keeps_the_originals_order() -> None:
    originals, avatars = noisy_pair(4000, seed=4)
    result = phr.local_cloaking(
        originals.lazy(), avatars.sample(fraction=1.0, shuffle=True, seed=0).lazy(),
        coords=COORDS, on="id",
    ).collect()  # fmt: skip
    assert result.drop("local_cloaking", "hidden").equals(originals)
    assert_counts_by_id(result, counts_by_id(originals, avatars))


def test_projected_keyed_counts_follow_their_records() -> None:
    originals, avatars = noisy_pair(1500, seed=5, d=4)
    left = REORDERING_PLANS["shuffle"](originals.lazy())
    features = ["d1", "d2", "d3", "d4"]
    result = phr.local_cloaking(left, avatars.lazy(), features=features, ncp=3, on="id").collect()
    projection = phr.Projection.fit(originals, features=features, ncp=3)
    dims = projection.coordinate_columns()
    expected = counts_by_id(
        projection.transform(originals), projection.transform(avatars), coords=dims
    )
    assert_counts_by_id(result, expected)


# --- 4. No rescaling changes a count ---------------------------------------------------------


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 40),
    d=st.integers(1, 4),
    exponent=st.integers(-1000, 1000),
    offset=st.sampled_from([0.0, 0.5, 1024.0, 2.0**20]),
)
def test_counts_survive_power_of_two_scales_and_reordering(
    seed: int, n: int, d: int, exponent: int, offset: float
) -> None:
    rng = np.random.default_rng(seed)
    # Dyadic grids with duplicates, zero distances and exact ties, around an offset.
    x = rng.integers(-3, 4, (n, d)) * 0.25 + offset
    y = x + rng.integers(-2, 3, (n, d)) * 0.25
    scaled_x, scaled_y = np.ldexp(x, exponent), np.ldexp(y, exponent)
    assume(np.array_equal(np.ldexp(scaled_x, -exponent), x))
    assume(np.array_equal(np.ldexp(scaled_y, -exponent), y))
    names = [f"d{k + 1}" for k in range(d)]
    ids = pl.Series("id", rng.permutation(n), dtype=pl.Int64)
    originals = pl.DataFrame(scaled_x, schema=names).with_columns(ids)
    avatars = pl.DataFrame(scaled_y, schema=names).with_columns(ids)
    order = pl.Series("draw", rng.permutation(n))
    reordered = originals.lazy().with_columns(order).sort("draw").drop("draw")
    expected = dict(zip(ids.to_list(), brute_force_counts(x, y, 1e-9).tolist(), strict=True))
    result = phr.local_cloaking(reordered, avatars.lazy(), coords=names, on="id").collect()
    assert_counts_by_id(result, expected)
    rate = phr.hidden_rate(originals, avatars, coords=names)
    assert rate == hidden_share(np.array(list(expected.values())))


def _rate_pair() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The issue's example: 25 % hidden at scale 1."""
    originals = pl.DataFrame({"d1": [0.0, 1.0, 3.0, 4.0]})
    avatars = pl.DataFrame({"d1": [0.5, 1.5, 3.0, 4.0]})
    return originals, avatars


@pytest.mark.parametrize("factor", [1.0, 1e155, 1e-170, 2.0**600, 2.0**-600, 1e300, 1e-300])
def test_hidden_rate_does_not_move_with_scale(factor: float) -> None:
    originals, avatars = _rate_pair()
    assert phr.hidden_rate(originals * factor, avatars * factor, coords="d1") == 25.0


@pytest.mark.parametrize("factor", [2.0**500, 2.0**-500, 1e154, 1e160, 1e-160])
def test_projection_does_not_move_with_scale(factor: float) -> None:
    rng = np.random.default_rng(11)
    n = 300
    originals = pl.DataFrame({k: rng.normal(size=n) for k in ("x", "y", "z")})
    avatars = originals.with_columns(pl.all() + pl.Series(rng.normal(size=n) * 0.5))
    baseline = phr.local_cloaking(originals, avatars, ncp=3)["local_cloaking"]
    scaled = phr.local_cloaking(
        originals.with_columns(pl.col("x") * factor),
        avatars.with_columns(pl.col("x") * factor),
        ncp=3,
    )["local_cloaking"]
    assert scaled.to_list() == baseline.to_list()


@pytest.mark.parametrize("exponent", [-900, -300, 300, 900])
def test_projection_fit_scales_exactly_by_powers_of_two(exponent: int) -> None:
    rng = np.random.default_rng(12)
    originals = pl.DataFrame({"x": rng.normal(size=200), "y": rng.normal(size=200) * 3})
    base = phr.Projection.fit(originals, ncp=2)
    scaled = phr.Projection.fit(originals.with_columns(pl.col("x") * 2.0**exponent), ncp=2)
    np.testing.assert_array_equal(scaled.eigenvalues, base.eigenvalues)
    np.testing.assert_array_equal(scaled.components, base.components)
    x = scaled.scaling.features[0]
    assert isinstance(x, phr.projection.NumericFeature)
    assert x.scale == np.ldexp(base.scaling.features[0].scale, exponent)  # type: ignore[union-attr]


def test_integers_beyond_float64_precision_are_refused() -> None:
    big = 2**63 - 1
    originals = pl.DataFrame({"id": [1, 2, 3], "d1": [big, big - 1, big - 4]})
    avatars = pl.DataFrame({"id": [1, 2, 3], "d1": [big, big - 2, big - 3]})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* beyond 2\^53"):
        phr.local_cloaking(originals, avatars, coords="d1", on="id")
    small = originals.with_columns(pl.col("d1") - (big - 2**53))
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of avatars .* beyond 2\^53"):
        phr.hidden_rate(small, avatars, coords="d1")
    # At 2^53 and below, integers count exactly: [0, 1, 0] as in integer arithmetic.
    shift = big - 2**53
    exact = phr.local_cloaking(
        originals.with_columns(pl.col("d1") - shift),
        avatars.with_columns(pl.col("d1") - shift),
        coords="d1",
    )
    assert exact["local_cloaking"].to_list() == [0, 1, 0]


@pytest.mark.parametrize("value", [2**53 + 1, -(2**53) - 1])
def test_integers_one_past_2_53_are_refused(value: int) -> None:
    # The limit is 2^53 exactly: 2^53 + 1 is the first integer float64 cannot hold.
    originals = pl.DataFrame({"d1": [value, 0, 5]})
    avatars = pl.DataFrame({"d1": [2**53, 1, 4]})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* beyond 2\^53"):
        phr.hidden_rate(originals, avatars, coords="d1")
    phr.hidden_rate(avatars, avatars, coords="d1")  # 2^53 itself is held exactly


def test_unsigned_integers_beyond_float64_precision_are_refused() -> None:
    frame = pl.DataFrame({"d1": pl.Series([2**64 - 1, 0, 5], dtype=pl.UInt64)})
    with pytest.raises(pl.exceptions.ComputeError, match="'d1' of originals"):
        phr.hidden_rate(frame, frame, coords="d1")


# --- 8. Smaller holes ------------------------------------------------------------------------


def test_hidden_rate_accepts_originals_that_hold_output_columns() -> None:
    originals, avatars = _rate_pair()
    holding = originals.with_columns(local_cloaking=pl.lit(7), hidden=pl.lit(True))
    assert phr.hidden_rate(holding, avatars, coords="d1") == 25.0
    with pytest.raises(pl.exceptions.DuplicateError, match="local_cloaking"):
        phr.local_cloaking(holding, avatars, coords="d1")


@pytest.mark.parametrize(
    "name",
    [
        "__polars_hidden_rate_avatar_row",
        "__polars_hidden_rate_dim1",
        "__polars_hidden_rate_fingerprint",
        "__polars_hidden_rate_key0",
    ],
)
def test_reserved_names_are_refused_by_name(name: str) -> None:
    originals, avatars = noisy_pair(20, seed=6)
    originals, avatars = originals.rename({"id": name}), avatars.rename({"id": name})
    for call in (phr.local_cloaking, phr.hidden_rate):
        with pytest.raises(pl.exceptions.DuplicateError, match=f"column '{name}' of originals"):
            call(originals, avatars, coords=COORDS, on=name)
        with pytest.raises(pl.exceptions.DuplicateError, match=f"column '{name}' of originals"):
            call(originals, avatars, on=name)


@pytest.mark.parametrize(
    "option",
    [{"tie_tol": np.float32(0.0)}, {"tie_tol": np.int64(0)}, {"threads": np.int64(1)},
     {"threads": np.int32(2)}],
)  # fmt: skip
def test_numpy_scalars_are_options_like_any_number(option: dict[str, object]) -> None:
    originals, avatars = _rate_pair()
    assert phr.hidden_rate(originals, avatars, coords="d1", **option) == 25.0  # type: ignore[arg-type]
    frame = phr.local_cloaking(originals, avatars, coords="d1", **option)  # type: ignore[arg-type]
    assert frame["local_cloaking"].to_list() == [0, 1, 0, 0]


@pytest.mark.parametrize("min_rate", [np.float32(20.0), np.int64(20), np.float64(20.0)])
def test_numpy_scalars_are_minimum_rates(min_rate: object) -> None:
    originals, avatars = _rate_pair()
    # Two of the four avatars copy their original: own copies are not gated here.
    rate = phr.assert_hidden_rate(originals, avatars, min_rate, coords="d1", max_own_copies=100)  # type: ignore[arg-type]
    assert rate == 25.0
    with pytest.raises(phr.HiddenRateTooLowError):
        phr.assert_hidden_rate(originals, avatars, min_rate * 3, coords="d1", max_own_copies=100)  # type: ignore[operator]


@pytest.mark.parametrize(
    "option",
    [{"tie_tol": np.float64(np.nan)}, {"tie_tol": -1e-9}, {"tie_tol": np.inf},
     {"threads": 0}, {"threads": np.int64(-1)}, {"threads": np.float64(2.0)},
     {"threads": True}, {"tie_tol": True}],
)  # fmt: skip
def test_bad_numbers_are_refused_by_name(option: dict[str, object]) -> None:
    originals, avatars = _rate_pair()
    (name,) = option
    with pytest.raises(ValueError, match=f"`{name}`"):
        phr.hidden_rate(originals, avatars, coords="d1", **option)  # type: ignore[arg-type]


@pytest.mark.parametrize("side", ["originals", "avatars"])
def test_null_keys_are_named_as_null(side: str) -> None:
    originals, avatars = noisy_pair(10, seed=8)
    frames = {"originals": originals, "avatars": avatars}
    frames[side] = frames[side].with_columns(
        id=pl.when(pl.int_range(pl.len()) == 3).then(None).otherwise(pl.col("id"))
    )
    with pytest.raises(pl.exceptions.ComputeError, match=f"key \\['id'\\] of {side} is null in 1"):
        phr.local_cloaking(frames["originals"], frames["avatars"], coords=COORDS, on="id")


def test_summarize_refuses_missing_counts() -> None:
    with pytest.raises(pl.exceptions.ComputeError, match="null in 1 of 3"):
        summarize(pl.DataFrame({"local_cloaking": [0, None, 4]}))


@pytest.mark.parametrize("entry", ["local_cloaking", "hidden_rate", "namespace", "gate"])
def test_a_misspelt_option_is_named(entry: str) -> None:
    originals, avatars = _rate_pair()
    calls: dict[str, Callable[..., object]] = {
        # mypy sees the typo too: each call needs its ignore.
        "local_cloaking": lambda: phr.local_cloaking(originals, avatars, coord="d1"),  # type: ignore[call-arg]
        "hidden_rate": lambda: phr.hidden_rate(originals, avatars, coord="d1"),  # type: ignore[call-arg]
        "namespace": lambda: AvatarNamespace(originals.lazy()).local_cloaking(avatars, coord="d1"),  # type: ignore[call-arg]
        "gate": lambda: phr.assert_hidden_rate(originals, avatars, 10, coord="d1"),  # type: ignore[call-arg]
    }
    with pytest.raises(TypeError, match="unexpected keyword argument 'coord'"):
        calls[entry]()


# --- 9. Numbers written as text are never categories ----------------------------------------


def _as_text(values: np.ndarray, notation: str) -> pl.Series:
    """Numbers as a person's csv writes them, read as text: decimal comma, padded, grouped."""
    written = [f"{value:.6f}" for value in values]
    if notation == "decimal comma":
        written = [text.replace(".", ",") for text in written]
    elif notation == "spaces":
        written = [f" {text}" for text in written]
    else:  # digit groups: thousands
        written = [f"{value * 1e4:,.2f}" for value in values]
    return pl.Series(written)


def _text_pair(notation: str, n: int = 60) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(11)
    x = rng.normal(size=n)
    originals = pl.DataFrame({"x": _as_text(x, notation), "y": rng.normal(size=n)})
    avatars = pl.DataFrame(
        {"x": _as_text(x + rng.normal(0, 0.3, n), notation), "y": originals["y"]}
    )
    return originals, avatars


@pytest.mark.parametrize(
    ("notation", "described", "fix"),
    [
        ("decimal comma", "a decimal comma", "decimal_comma=True"),
        ("spaces", "spaces around it", "str.strip_chars()"),
        ("digit groups", "digit group separators", "remove the separators"),
    ],
)
def test_numbers_written_as_text_are_refused(notation: str, described: str, fix: str) -> None:
    # Projected as categories, every avatar value was unseen and every record a tie: 100 %.
    originals, avatars = _text_pair(notation)
    pattern = (
        f"feature 'x' of originals is text but every value is a number written with {described}"
    )
    with pytest.raises(pl.exceptions.ComputeError, match=pattern) as raised:
        phr.hidden_rate(originals, avatars)
    assert fix in str(raised.value)
    # The originals' values are never quoted (a message lands in CI logs).
    assert "e.g." not in str(raised.value)
    assert not any(f"'{value}'" in str(raised.value) for value in originals["x"].to_list())
    with pytest.raises(pl.exceptions.ComputeError, match=pattern):
        phr.Projection.fit(originals.with_columns(pl.col("x").cast(pl.Categorical)))


def test_numbers_written_as_text_are_refused_when_collected() -> None:
    # At collect time, from the counts the fit makes anyway: the plan itself reads nothing.
    originals, avatars = _text_pair("decimal comma")
    per_record = phr.local_cloaking(originals.lazy(), avatars.lazy())
    assert isinstance(per_record, pl.LazyFrame)
    with pytest.raises(pl.exceptions.ComputeError, match="written with a decimal comma"):
        per_record.collect()


def test_many_numbers_written_as_text_are_named_as_such() -> None:
    # More distinct values than a fit takes modalities: still named as numbers held as text.
    originals, avatars = _text_pair("decimal comma", n=5000)
    with pytest.raises(pl.exceptions.ComputeError, match="'x' of originals is text"):
        phr.hidden_rate(originals, avatars)


def test_numbers_written_as_text_are_refused_by_the_file_by_file_fit(tmp_path: Path) -> None:
    originals, _ = _text_pair("decimal comma")
    files = []
    for part in range(2):
        files.append(tmp_path / f"part{part}.parquet")
        originals.slice(30 * part, 30).write_parquet(files[-1])
    with pytest.raises(pl.exceptions.ComputeError, match="'x' of originals is text"):
        phr.Projection.fit_partitioned(files)


@pytest.mark.parametrize(
    "values",
    [
        ["01", "02", "10", "01"],
        ["1.5", "2", "1.5", "3"],
        ["1,5", "x", "2,5", "1,5"],
        ["", "1,5", "2,5", ""],
    ],
)
def test_text_that_is_not_numbers_in_another_notation_stays_categories(values: list[str]) -> None:
    # Codes written plainly (postcodes, "01"), or text that is not all numbers.
    originals = pl.DataFrame({"code": values, "y": [0.0, 1.0, 2.0, 3.0]})
    avatars = originals.with_columns(pl.col("y") + 0.1)
    assert phr.Projection.fit(originals).model == "FAMD"
    assert phr.hidden_rate(originals, avatars) >= 0


# --- 10. Csv files read as people write them -------------------------------------------------

_FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_FLOATS, min_size=1, max_size=30),
    separator=st.sampled_from([";", "\t"]),
    padding=st.lists(st.sampled_from(["", " ", "  "]), min_size=2, max_size=2),
    plainly=st.booleans(),
)
def test_csv_numbers_read_exactly_in_any_notation(
    tmp_path: Path, values: list[float], separator: str, padding: list[str], plainly: bool
) -> None:
    # The reference is the floats themselves: "-0,801931", " 1.5" and "1e300" read back bit
    # for bit, whatever the notation.
    written = pl.DataFrame({"x": values, "tag": ["t"] * len(values)})
    path = tmp_path / "x.csv"
    header, *records = written.write_csv(separator=separator, decimal_comma=not plainly).split("\n")
    before, after = padding
    padded = [
        separator.join(f"{before}{cell}{after}" for cell in record.split(separator))
        for record in records
        if record
    ]
    path.write_text("\n".join([header, *padded]) + "\n")
    read = scan(path, "ORIGINALS").collect()
    assert read.schema == pl.Schema({"x": pl.Float64, "tag": pl.String})
    assert read["tag"].to_list() == ["t"] * len(values)
    got = read["x"].to_numpy()
    assert got.tobytes() == np.asarray(values, dtype=np.float64).tobytes()


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.integers(0, 5),
    tail=st.text(alphabet=" \t\r\n", max_size=12),
    separator=st.sampled_from([",", ";"]),
)
def test_csv_blank_lines_at_the_end_are_no_records(
    tmp_path: Path, rows: int, tail: str, separator: str
) -> None:
    path = tmp_path / "x.csv"
    records = [f"{k}{separator}{k * 0.5}" for k in range(rows)]
    lines = [f"a{separator}b", *records]
    path.write_text("\n".join(lines) + ("\n" if not records else "") + tail)
    if rows == 0:
        with pytest.raises(pl.exceptions.NoDataError, match="holds no records"):
            scan(path, "ORIGINALS")
        return
    read = scan(path, "ORIGINALS").collect()
    assert read["a"].to_list() == list(range(rows))
    assert read["b"].to_list() == [k * 0.5 for k in range(rows)]


# --- 9. Issue 20: other frames, key types, the 2^53 edge, Wilson's ends ----------------------


def _stand_in(module: str, name: str) -> object:
    """An object of a type named as another library's frame (that library need not be here)."""
    kind = type(name, (), {"__module__": module, "__qualname__": name})
    return kind()


_OTHER_FRAMES = [
    ("pandas.core.frame", "DataFrame", "pandas.DataFrame", "pl.from_pandas"),
    ("pyarrow.lib", "Table", "pyarrow.Table", "pl.from_arrow"),
    ("pyarrow.lib", "RecordBatch", "pyarrow.RecordBatch", "pl.from_arrow"),
]


@pytest.mark.parametrize(("module", "name", "full", "convert"), _OTHER_FRAMES)
def test_another_librarys_frame_is_refused_with_its_name_and_the_conversion(
    module: str, name: str, full: str, convert: str
) -> None:
    """Refused everywhere a frame goes in, naming its full type and the conversion."""
    originals, avatars = _rate_pair()
    other: Any = _stand_in(module, name)
    calls: list[tuple[str, Callable[[], object]]] = [
        ("originals", lambda: phr.hidden_rate(other, avatars, coords="d1")),
        ("avatars", lambda: phr.local_cloaking(originals, other, coords="d1")),
        ("avatars", lambda: phr.distance_to_closest(originals, other, coords="d1")),
        ("originals", lambda: phr.privacy_report(other, avatars, coords="d1")),
        ("avatars", lambda: phr.row_direct_match_protection(originals, other)),
        ("originals", lambda: phr.assert_hidden_rate(other, avatars, 50, coords="d1")),
        ("originals", lambda: cloaking_summary(other, avatars, coords="d1")),
        ("per_record", lambda: summarize(other)),
        ("df", lambda: phr.avatarize(other, 2)),
        ("originals", lambda: phr.Projection.fit(other)),
        ("frame", lambda: phr.Projection.fit(originals).transform(other)),
    ]
    for role, call in calls:
        expected = (
            f"{role} must be a polars DataFrame or LazyFrame, got {full}; "
            f"convert it first: {convert}({role})"
        )
        with pytest.raises(TypeError) as raised:
            call()
        assert str(raised.value) == expected


def test_a_real_pandas_frame_is_named_as_pandas() -> None:
    pandas = pytest.importorskip("pandas")
    originals, avatars = _rate_pair()
    with pytest.raises(TypeError, match=r"got pandas\.DataFrame; .*pl\.from_pandas\(originals\)"):
        phr.hidden_rate(pandas.DataFrame({"d1": [0.0]}), avatars, coords="d1")
    with pytest.raises(TypeError, match=r"got polars\.Series; .*avatars\.to_frame\(\)"):
        phr.hidden_rate(originals, avatars["d1"], coords="d1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"avatars must be a polars DataFrame .*, got dict$"):
        phr.hidden_rate(originals, avatars.to_dict(), coords="d1")  # type: ignore[arg-type]


@pytest.mark.parametrize("big", [False, True])
def test_a_uint64_key_is_not_linked_to_an_int64_key(big: bool) -> None:
    """UInt64 and Int64 share no integer type: below 2^63 a cast to Int64 would link them
    silently, above it fail in Polars' conversion; both are refused as a schema mismatch."""
    start = 2**63 + 5 if big else 1
    originals = pl.DataFrame(
        {"id": pl.Series([start, start + 1], dtype=pl.UInt64), "d1": [0.0, 1.0]}
    )
    avatars = pl.DataFrame({"id": pl.Series([1, 2], dtype=pl.Int64), "d1": [0.5, 1.5]})
    match = r"key 'id' of originals is UInt64 but key 'id' of avatars is Int64"
    for left, right, pattern in (
        (originals, avatars, match),
        (avatars, originals, r"key 'id' of originals is Int64 but key 'id' of avatars is UInt64"),
    ):
        with pytest.raises(pl.exceptions.SchemaError, match=pattern):
            phr.local_cloaking(left, right, coords="d1", on="id")
        with pytest.raises(pl.exceptions.SchemaError, match=pattern):
            phr.hidden_rate(left.lazy(), right, coords="d1", on="id")


@pytest.mark.parametrize("edge", [2**53, -(2**53)])
def test_an_integer_feature_at_2_53_is_compared_with_floats(edge: int) -> None:
    """2^53 is exact in float64: the direct-match protection compares it; 2^53 + 1 it refuses."""
    originals = pl.DataFrame({"n": [edge, 0, 5]})
    avatars = pl.DataFrame({"n": [float(edge), 1.0, 5.0]})
    assert phr.row_direct_match_protection(originals, avatars) == pytest.approx(100 / 3)
    assert phr.row_direct_match_protection(avatars, originals) == pytest.approx(100 / 3)
    past = originals.with_columns(pl.col("n") + (1 if edge > 0 else -1))
    with pytest.raises(pl.exceptions.ComputeError, match=r"'n' of originals has 1 integer"):
        phr.row_direct_match_protection(past, avatars)


# --- 10. Values measured as the user meant them ------------------------------------------------


def projected_counts(
    originals: pl.DataFrame, avatars: pl.DataFrame, **options: object
) -> np.ndarray:
    """The float64 brute force on the coordinates of the projection fitted on the originals."""
    projection = phr.Projection.fit(originals, **options)  # type: ignore[arg-type]
    dims = projection.coordinate_columns()
    return brute_force_counts(
        projection.transform(originals).select(dims).to_numpy(),
        projection.transform(avatars).select(dims).to_numpy(),
        1e-9,
    )


WIDE_INTEGERS = [pl.Decimal(38, 0), pl.Int128(), pl.UInt64(), pl.UInt128(), pl.Int64()]


@pytest.mark.parametrize("dtype", WIDE_INTEGERS, ids=str)
def test_wide_integer_coordinates_beyond_2_53_are_refused(dtype: pl.DataType) -> None:
    # The example: as float64, 2^53 + 1 and 2^53 merge and record 0 (exposed) ties.
    big = 2**53
    originals = pl.DataFrame({"d1": pl.Series([big + 1, 0, 10], dtype=dtype)})
    avatars = pl.DataFrame({"d1": pl.Series([big + 1, big, 10], dtype=dtype)})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* beyond 2\^53"):
        phr.local_cloaking(originals, avatars, coords="d1")
    # 2^53 itself is exact: the counts are those of the float64 brute force.
    exact = originals.with_columns(pl.Series("d1", [big, 0, 10], dtype=dtype))
    counts = phr.local_cloaking(exact, avatars.with_columns(exact["d1"]), coords="d1")
    values = exact["d1"].cast(pl.Float64).to_numpy()[:, None]
    expected = brute_force_counts(values, values, 1e-9)
    assert counts["local_cloaking"].to_list() == expected.tolist()


@pytest.mark.parametrize("dtype", WIDE_INTEGERS, ids=str)
@pytest.mark.parametrize("side", ["originals", "avatars"])
def test_wide_integer_features_beyond_2_53_are_refused(dtype: pl.DataType, side: str) -> None:
    big = 2**53
    frames = {
        role: pl.DataFrame({
            "x": pl.Series([big - 6, big - 4, big - 1, big], dtype=dtype),
            "y": [0.0, 2.0, 1.0, 3.0],
        })
        for role in ("originals", "avatars")
    }  # fmt: skip
    # Within 2^53 the projection counts as the brute force on its own coordinates.
    rate = phr.hidden_rate(frames["originals"], frames["avatars"])
    assert rate == hidden_share(projected_counts(frames["originals"], frames["avatars"]))
    frames[side] = frames[side].with_columns(
        pl.Series("x", [big - 6, big - 4, big + 1, big], dtype=dtype)
    )
    with pytest.raises(pl.exceptions.ComputeError, match=rf"feature 'x' of {side} .* beyond 2\^53"):
        phr.hidden_rate(frames["originals"], frames["avatars"])
    with pytest.raises(pl.exceptions.ComputeError, match=rf"feature 'x' of {side} .* beyond 2\^53"):
        phr.local_cloaking(frames["originals"].lazy(), frames["avatars"].lazy()).collect()


def test_decimal_fractions_that_float64_merges_are_refused() -> None:
    # 2^52 + 0.01 and 2^52 + 0.02 are two Decimal(38, 2) values but one float64.
    base = decimal.Decimal(2**52)
    merged = [base + decimal.Decimal("0.01"), base + decimal.Decimal("0.02"), base]
    originals = pl.DataFrame({"d1": pl.Series(merged, dtype=pl.Decimal(38, 2))})
    with pytest.raises(pl.exceptions.ComputeError, match=r"'d1' of originals .* float64"):
        phr.hidden_rate(originals, originals, coords="d1")
    with pytest.raises(pl.exceptions.ComputeError, match=r"feature 'd1' of originals"):
        phr.Projection.fit(originals.with_columns(y=pl.Series([0.0, 1.0, 3.0])))
    # Fractions float64 tells apart are read as their nearest float64, as decimal text is.
    text = ["0.10", "0.35", "1.20", "2.05"]
    shifted = ["0.20", "0.30", "1.25", "2.00"]
    as_decimal = [pl.DataFrame({"d1": pl.Series([decimal.Decimal(v) for v in values],
                                                 dtype=pl.Decimal(38, 2))})
                  for values in (text, shifted)]  # fmt: skip
    counts = phr.local_cloaking(*as_decimal, coords="d1", tie_tol=0.0)["local_cloaking"]
    x, y = (np.array([float(v) for v in values])[:, None] for values in (text, shifted))
    assert counts.to_list() == brute_force_counts(x, y, 0.0).tolist()


def test_direct_matches_compare_decimals_with_floats_by_the_exact_rule() -> None:
    originals = pl.DataFrame({"x": pl.Series([1, 2, 3], dtype=pl.Decimal(38, 0))})
    avatars = pl.DataFrame({"x": [1.0, 2.5, 3.0]})
    assert phr.row_direct_match_protection(originals, avatars) == pytest.approx(100 / 3)
    beyond = pl.DataFrame({"x": pl.Series([2**53 + 1, 2, 3], dtype=pl.Decimal(38, 0))})
    with pytest.raises(pl.exceptions.ComputeError, match=r"feature 'x' of originals .* 2\^53"):
        phr.row_direct_match_protection(beyond, avatars)


def _with_nan(frame: pl.DataFrame, column: str, row: int) -> pl.DataFrame:
    value = pl.when(pl.int_range(pl.len()) == row).then(float("nan")).otherwise(pl.col(column))
    return frame.with_columns(value.alias(column))


def _with_null(frame: pl.DataFrame, column: str, row: int) -> pl.DataFrame:
    value = pl.when(pl.int_range(pl.len()) == row).then(None).otherwise(pl.col(column))
    return frame.with_columns(value.alias(column))


def _coded(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals and avatars with a numeric feature and a float-coded category ``k``."""
    rng = np.random.default_rng(seed)
    originals = pl.DataFrame({"x": rng.normal(size=n), "k": rng.integers(0, 3, n).astype(float)})
    avatars = originals.with_columns(
        pl.col("x") + rng.normal(size=n) * 0.5, k=pl.Series(rng.integers(0, 3, n).astype(float))
    )
    return originals, avatars


@pytest.mark.parametrize("side", ["originals", "avatars"])
def test_nan_in_a_categorical_number_is_missing(side: str) -> None:
    frames = dict(zip(("originals", "avatars"), _coded(40, seed=3), strict=True))
    holed = {**frames, side: _with_nan(frames[side], "k", 5)}
    with pytest.raises(pl.exceptions.ComputeError, match=rf"features of {side} .*'k' \(1 NaN\)"):
        phr.hidden_rate(holed["originals"], holed["avatars"], categorical="k")
    # Filled as a null is: the same fit and counts as with a null there.
    nulled = {**frames, side: _with_null(frames[side], "k", 5)}
    options: dict[str, Any] = {"categorical": "k", "impute": "mode"}
    with_nan = phr.local_cloaking(holed["originals"], holed["avatars"], **options)
    with_null = phr.local_cloaking(nulled["originals"], nulled["avatars"], **options)
    assert with_nan["local_cloaking"].to_list() == with_null["local_cloaking"].to_list()
    fitted = phr.Projection.fit(holed["originals"], categorical="k", impute="mode")
    assert fitted.scaling.features[1].modalities == ("0", "1", "2")  # type: ignore[union-attr]
    filled = {
        role: frame.with_columns(pl.col("k").fill_nan(None).fill_null(fitted_mode(frames)))
        for role, frame in nulled.items()
    }
    expected = projected_counts(filled["originals"], filled["avatars"], categorical="k")
    assert with_nan["local_cloaking"].to_list() == expected.tolist()


def fitted_mode(frames: dict[str, pl.DataFrame]) -> float:
    """The originals' most frequent code, the smallest on a tie (as the mode fill takes it)."""
    return float(frames["originals"]["k"].mode().sort()[0])


def test_numeric_categories_are_keyed_exactly() -> None:
    big = 2**53
    codes = pl.Series("k", [big, big + 1, 7, big, big + 1, 7, big, 7], dtype=pl.Int64)
    originals = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5, 3.5], "k": codes})
    avatars = originals.with_columns(
        pl.col("x") + 0.25, k=pl.Series([big + 1, big, 7, big, big, 7, big + 1, 7])
    )
    fitted = phr.Projection.fit(originals, categorical="k")
    assert fitted.scaling.features[1].modalities == ("7", str(big), str(big + 1))  # type: ignore[union-attr]
    # The same codes as text are keyed exactly: the counts must agree, and with the brute force.
    as_text = [frame.with_columns(pl.col("k").cast(pl.String)) for frame in (originals, avatars)]
    coded = phr.local_cloaking(originals, avatars, categorical="k")["local_cloaking"]
    assert coded.to_list() == phr.local_cloaking(*as_text)["local_cloaking"].to_list()
    assert coded.to_list() == projected_counts(*as_text).tolist()


def test_zero_and_negative_zero_are_one_category_and_integers_match_floats() -> None:
    originals = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0, 4.0], "k": [0.0, -0.0, 1.0, 0.0, 1.0]})
    fitted = phr.Projection.fit(originals, categorical="k")
    assert fitted.scaling.features[1].modalities == ("0", "1")  # type: ignore[union-attr]
    avatars = pl.DataFrame({"x": [0.5, 1.0, 2.5, 3.0, 4.5], "k": [1, 0, 1, 0, 0]})
    # 1 (Int64) and 1.0 (Float64) are one modality: the avatars count as if they were floats.
    as_ints = phr.local_cloaking(originals, avatars, categorical="k")["local_cloaking"]
    floats = avatars.with_columns(pl.col("k").cast(pl.Float64))
    as_floats = phr.local_cloaking(originals, floats, categorical="k")["local_cloaking"]
    assert as_ints.to_list() == as_floats.to_list()
    assert as_ints.to_list() == projected_counts(originals, floats, categorical="k").tolist()
    # A decimal is the float64 it gives back: Decimal 0.5 is the float 0.5, 1e-6 is 0.000001.
    halves = originals.with_columns(k=pl.Series([0.5, 1e-6, 0.5, 2.0, 1e-6]))
    codes = [decimal.Decimal(v) for v in ("1.00", "0.50", "0.000001", "2.00", "0.50")]
    as_decimals = avatars.with_columns(k=pl.Series(codes, dtype=pl.Decimal(38, 6)))
    decimals = phr.local_cloaking(halves, as_decimals, categorical="k")["local_cloaking"]
    floats = as_decimals.with_columns(pl.col("k").cast(pl.Float64))
    expected = projected_counts(halves, floats, categorical="k")
    assert decimals.to_list() == expected.tolist()
    assert (
        phr.Projection.fit(halves, categorical="k")
        .transform(as_decimals)["Dim1"]
        .equals(phr.Projection.fit(halves, categorical="k").transform(floats)["Dim1"])
    )


@pytest.mark.parametrize("unordered", [set, frozenset, lambda names: dict.fromkeys(names).keys()])
@pytest.mark.parametrize("option", ["coords", "features", "on", "categorical"])
def test_unordered_column_collections_are_refused(
    unordered: Callable[[list[str]], object], option: str
) -> None:
    originals, avatars = noisy_pair(20, seed=9)
    names = {"coords": COORDS, "features": COORDS, "on": ["id"], "categorical": ["site"]}
    options: dict[str, object] = {option: unordered(names[option])}
    if option == "on":
        options["coords"] = COORDS
    with pytest.raises(TypeError, match=f"`{'key' if option == 'on' else option}` must be ordered"):
        phr.hidden_rate(originals, avatars.with_columns(site=pl.col("id") % 5), **options)  # type: ignore[arg-type]


def test_expressions_that_select_columns_are_column_lists() -> None:
    originals, avatars = noisy_pair(40, seed=10, d=3)
    expected = counts_by_id(originals, avatars, ["d2", "d1"])
    for coords in (pl.col("d2", "d1"), cs.by_name("d2", "d1")):
        got = phr.local_cloaking(originals, avatars, coords=coords, on="id")
        assert_counts_by_id(got, expected)
    first = phr.local_cloaking(originals, avatars, coords=pl.col("d3", "d1"), ncp=1, on="id")
    assert_counts_by_id(first, counts_by_id(originals, avatars, ["d3"]))
    regex = phr.local_cloaking(originals, avatars, coords=pl.col("^d[12]$"), on="id")
    assert_counts_by_id(regex, counts_by_id(originals, avatars, COORDS))
    with pytest.raises(TypeError, match="`coords` must only select columns"):
        phr.hidden_rate(originals, avatars, coords=pl.col("d1") * 2)
    with pytest.raises(pl.exceptions.ColumnNotFoundError, match=r"coords .* not in originals"):
        phr.hidden_rate(originals, avatars, coords=pl.col("d1", "nope"))


def test_a_selector_of_features_picks_among_the_shared_columns() -> None:
    originals, avatars = noisy_pair(40, seed=11)
    avatars = avatars.with_columns(originals["site"])
    # `pidnum`, an identifier only the originals hold, is no feature of a selector.
    originals = originals.with_columns(pidnum=pl.int_range(pl.len()) * 7)
    options: dict[str, Any] = {"on": "id", "ncp": 2}
    by_names = phr.local_cloaking(originals, avatars, features=["d1", "d2", "site"], **options)
    selector = cs.numeric() - cs.by_name("id")
    by_selector = phr.local_cloaking(originals, avatars, features=selector, **options)
    assert by_selector["local_cloaking"].to_list() == by_names["local_cloaking"].to_list()
    expected = projected_counts(
        originals.sort("id"), avatars.sort("id"), features=["d1", "d2", "site"], ncp=2
    )
    assert by_selector.sort("id")["local_cloaking"].to_list() == expected.tolist()
    assert phr.row_direct_match_protection(
        originals, avatars, features=cs.numeric()
    ) == phr.row_direct_match_protection(originals, avatars, features=["d1", "d2", "id", "site"])
    with pytest.raises(pl.exceptions.ColumnNotFoundError, match="'pidnum' not found in avatars"):
        phr.hidden_rate(originals, avatars, features=["d1", "pidnum"], **options)


def test_a_dummy_name_that_is_a_column_name_is_fine() -> None:
    rng = np.random.default_rng(12)
    n = 40
    originals = pl.DataFrame({
        "smoker": rng.choice(["yes", "no"], n), "smoker=yes": rng.normal(size=n)
    })  # fmt: skip
    avatars = originals.with_columns(pl.col("smoker=yes") + rng.normal(size=n) * 0.5)
    renamed = [frame.rename({"smoker=yes": "level"}) for frame in (originals, avatars)]
    counts = phr.local_cloaking(originals, avatars)["local_cloaking"]
    assert counts.to_list() == projected_counts(*renamed).tolist()


@pytest.mark.parametrize("name", ["a\0b", "a\0null", "x\0NaN\0y"])
def test_any_character_in_a_column_name_is_named_in_errors(name: str) -> None:
    originals = pl.DataFrame({name: [1.0, float("nan"), 3.0], "c": [1.0, 2.0, 0.0]})
    with pytest.raises(pl.exceptions.ComputeError, match=rf"{re.escape(repr(name))} \(1 NaN\)"):
        phr.hidden_rate(originals, originals)
    with pytest.raises(pl.exceptions.ComputeError, match=rf"{re.escape(repr(name))} \(1 NaN\)"):
        phr.hidden_rate(originals, originals, coords=[name, "c"])


def test_an_avatar_too_far_to_project_is_named_with_its_row() -> None:
    originals = pl.DataFrame({"x": [0.0, 1e-10, 2e-10, 3e-10], "y": [1.0, 0.0, 3.0, 2.0]})
    avatars = originals.with_columns(x=pl.Series([0.0, 1e-10, 1e300, 3e-10]))
    match = r"feature 'x' of avatars holds 1e\+300 at row 2"
    with pytest.raises(pl.exceptions.ComputeError, match=match):
        phr.hidden_rate(originals, avatars)
    with pytest.raises(pl.exceptions.ComputeError, match=match):
        phr.local_cloaking(originals.lazy(), avatars.lazy()).collect()


@pytest.mark.parametrize("impute", ["none", "mean", "mode"])
def test_key_errors_come_first_with_imputation(impute: str) -> None:
    originals, avatars = noisy_pair(20, seed=13)
    # A gap that imputation fills is no error: the key's problem is the one reported.
    holed = _with_null(avatars, "d1", 4) if impute != "none" else avatars
    nulled = _with_null(holed, "id", 2)
    with pytest.raises(pl.exceptions.ComputeError, match=r"key \['id'\] of avatars is null"):
        phr.hidden_rate(originals, nulled, on="id", features=COORDS, impute=impute)  # type: ignore[arg-type]
    orphan = holed.with_columns(pl.when(pl.col("id") == 0).then(-1).otherwise("id").alias("id"))
    with pytest.raises(pl.exceptions.ComputeError, match="1 originals have no avatar"):
        phr.hidden_rate(originals, orphan, on="id", features=COORDS, impute=impute)  # type: ignore[arg-type]
