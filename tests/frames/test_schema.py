"""The columns a call names: reserved and output names, null keys, ordered column collections,
expressions and selectors, any character in a name, another library's frame, and the key's
errors first."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import polars.selectors as cs
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.gate import cloaking_summary
from polars_hidden_rate.measures.summary import summarize
from tests.helpers import (
    GRID_COORDS,
    assert_counts_by_id,
    counts_by_id,
    noisy_pair,
    null_at,
    projected_counts,
    quarter_hidden_pair,
)

# --- 8. Smaller holes ------------------------------------------------------------------------


def test_hidden_rate_accepts_originals_that_hold_output_columns() -> None:
    originals, avatars = quarter_hidden_pair()
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
            call(originals, avatars, coords=GRID_COORDS, on=name)
        with pytest.raises(pl.exceptions.DuplicateError, match=f"column '{name}' of originals"):
            call(originals, avatars, on=name)


@pytest.mark.parametrize("side", ["originals", "avatars"])
def test_null_keys_are_named_as_null(side: str) -> None:
    originals, avatars = noisy_pair(10, seed=8)
    frames = {"originals": originals, "avatars": avatars}
    frames[side] = frames[side].with_columns(
        id=pl.when(pl.int_range(pl.len()) == 3).then(None).otherwise(pl.col("id"))
    )
    with pytest.raises(pl.exceptions.ComputeError, match=f"key \\['id'\\] of {side} is null in 1"):
        phr.local_cloaking(frames["originals"], frames["avatars"], coords=GRID_COORDS, on="id")


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
    originals, avatars = quarter_hidden_pair()
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
    originals, avatars = quarter_hidden_pair()
    with pytest.raises(TypeError, match=r"got pandas\.DataFrame; .*pl\.from_pandas\(originals\)"):
        phr.hidden_rate(pandas.DataFrame({"d1": [0.0]}), avatars, coords="d1")
    with pytest.raises(TypeError, match=r"got polars\.Series; .*avatars\.to_frame\(\)"):
        phr.hidden_rate(originals, avatars["d1"], coords="d1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"avatars must be a polars DataFrame .*, got dict$"):
        phr.hidden_rate(originals, avatars.to_dict(), coords="d1")  # type: ignore[arg-type]


@pytest.mark.parametrize("unordered", [set, frozenset, lambda names: dict.fromkeys(names).keys()])
@pytest.mark.parametrize("option", ["coords", "features", "on", "categorical"])
def test_unordered_column_collections_are_refused(
    unordered: Callable[[list[str]], object], option: str
) -> None:
    originals, avatars = noisy_pair(20, seed=9)
    names = {"coords": GRID_COORDS, "features": GRID_COORDS, "on": ["id"], "categorical": ["site"]}
    options: dict[str, object] = {option: unordered(names[option])}
    if option == "on":
        options["coords"] = GRID_COORDS
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
    assert_counts_by_id(regex, counts_by_id(originals, avatars, GRID_COORDS))
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


@pytest.mark.parametrize("impute", ["none", "mean", "mode"])
def test_key_errors_come_first_with_imputation(impute: str) -> None:
    originals, avatars = noisy_pair(20, seed=13)
    # A gap that imputation fills is no error: the key's problem is the one reported.
    holed = null_at(avatars, "d1", 4) if impute != "none" else avatars
    nulled = null_at(holed, "id", 2)
    with pytest.raises(pl.exceptions.ComputeError, match=r"key \['id'\] of avatars is null"):
        phr.hidden_rate(originals, nulled, on="id", features=GRID_COORDS, impute=impute)  # type: ignore[arg-type]
    orphan = holed.with_columns(pl.when(pl.col("id") == 0).then(-1).otherwise("id").alias("id"))
    with pytest.raises(pl.exceptions.ComputeError, match="1 originals have no avatar"):
        phr.hidden_rate(originals, orphan, on="id", features=GRID_COORDS, impute=impute)  # type: ignore[arg-type]
