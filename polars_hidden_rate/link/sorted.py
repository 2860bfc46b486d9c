"""The sorted-link rule: a row-order link while both frames are sorted on one feature may pair
the rows by that feature's rank rather than by record (an ORDER BY on both files).
`check_sorted_link` refuses it unless the rows pair up as records within that feature's
equal values; `SortCheck` is what it saw."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.frames import is_text
from polars_hidden_rate.link.errors import SortedLinkError
from polars_hidden_rate.link.link_test import (
    ALPHA,
    MIN_GROUP,
    MIN_RECORDS,
    LinkTest,
    link_test_within,
    sampled_rows,
)
from polars_hidden_rate.link.sets import LinkedSets, copy_columns, copy_features


@dataclass(frozen=True)
class SortCheck:
    """What the sorted-link rule saw of a row-order link the link test passes
    (`check_sorted_link`).

    Attributes
    ----------
    checked
        False where ``allow_sorted_link`` said not to look.
    column, direction
        The compared feature both frames are sorted on (``"ascending"`` or
        ``"descending"``), None where none is.
    within
        The link test within that feature's equal values (`link_test_within`).
    """

    checked: bool
    column: str | None = None
    direction: str | None = None
    within: LinkTest | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "column": self.column,
            "direction": self.direction,
            "within": None if self.within is None else self.within.to_dict(),
        }


def _orderable(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() or dtype.is_temporal() or is_text(dtype) or dtype == pl.Boolean


def shared_sorts(request: LinkedSets) -> list[tuple[str, str]]:
    """The compared features (a projected feature, or a coordinate) both frames are sorted on
    in one direction (their non-null values monotone), each with that direction, where a file
    in random order would be so sorted with a chance of at most `ALPHA` in each frame:
    ``2 * prod(m_v!) / n!`` for ``n`` non-null values of which ``m_v`` equal ``v`` (a feature
    of few values, or all but one alike, is not taken as sorted on purpose)."""
    left, right = request.originals.collect_schema(), request.avatars.collect_schema()
    features = [
        name
        for name in dict.fromkeys(copy_features(request))
        if name in left and name in right and _orderable(left[name]) and _orderable(right[name])
    ]
    if not features:
        return []

    def monotone(frame: pl.LazyFrame, schema: pl.Schema) -> pl.LazyFrame:
        exprs = []
        for k, name in enumerate(features):
            v = _sort_value(name, schema).drop_nulls()
            several = v.n_unique() > 1
            exprs.append(((v >= v.shift(1)).all() & several).alias(f"up{k}"))
            exprs.append(((v <= v.shift(1)).all() & several).alias(f"down{k}"))
        return frame.select(exprs)

    flags = pl.collect_all([monotone(request.originals, left), monotone(request.avatars, right)])
    found = []
    for k, name in enumerate(features):
        for way, words in (("up", "ascending"), ("down", "descending")):
            if not (flags[0][f"{way}{k}"].item() and flags[1][f"{way}{k}"].item()):
                continue
            if all(
                _sorted_by_chance(frame, _sort_value(name, schema).drop_nulls()) <= math.log(ALPHA)
                for frame, schema in ((request.originals, left), (request.avatars, right))
            ):
                found.append((name, words))
                break
    return found


def check_sorted_link(
    request: LinkedSets,
    x: Float64Array,
    y: Float64Array,
    population: int,
    *,
    allow: bool = False,
) -> SortCheck | None:
    """Refuse a row-order link while both frames are sorted on one feature (`shared_sorts`),
    unless the sort cannot have made the pairing; unless ``allow_sorted_link``. ``x``, ``y``:
    the records the link test compares (the rows of `sampled_rows` of ``population``, in
    record order).

    An ORDER BY on both files pairs the rows by that feature's rank, and the link test passes
    such a pairing (the own avatar shares the rank, hence is close on that feature). A real
    row-order link escapes it two ways. Where the avatars move off their records' values,
    the avatars are not sorted even where the originals are. Where the avatars keep them (a
    site, a category), each row's avatar holds its original's value, and within each value
    the rows still pair up record by record; a sort alone pairs them at random there. So a
    shared sort is refused unless every row's two values are equal (nulls alike) and the
    link test within each value (`link_test_within`) finds a link, from `MIN_RECORDS`
    records of values held by `MIN_GROUP` rows or more (a feature of distinct values, as a
    float, never shows one).

    Raises
    ------
    SortedLinkError
        Naming the first such feature (with the test within its values, where it ran).
    """
    if not request.link.by_row_order:
        return None
    if allow:
        return SortCheck(checked=False)
    checks = []
    for name, words in shared_sorts(request):
        if not _values_kept(request, name):
            raise SortedLinkError(_sorted_message(name, words, None), name)
        within = link_test_within(x, y, _values_of(request, name, population), population)
        if not (within.tested and within.p_value <= ALPHA):
            raise SortedLinkError(_sorted_message(name, words, within), name, within)
        checks.append(SortCheck(True, name, words, within))
    return checks[0] if checks else SortCheck(checked=True)


def _sorted_message(name: str, words: str, within: LinkTest | None) -> str:
    if within is None:
        why = "and some avatars do not hold their own row's value of it"
    elif within.tested:
        why = (
            f"and within its values the rows pair up no better than at random (own avatar "
            f"closer than another of the same value for {within.closer_share:.1f} %, "
            f"p = {within.p_value:.2g}, n = {within.n})"
        )
    else:
        why = (
            f"and {within.n} records share their value with {MIN_GROUP - 1} others or more, too "
            f"few to tell a link within its values ({MIN_RECORDS} needed)"
        )
    return (
        f"both frames are sorted on {name!r} ({words}) {why}: linked by row order, the rows "
        f"may pair up by {name!r} alone, not by record; link by a key with --on (on=), or "
        "--allow-sorted-link (allow_sorted_link=True) to measure it anyway"
    )


def _sort_value(name: str, schema: pl.Schema) -> pl.Expr:
    column = pl.col(name)
    if schema[name] in (pl.Categorical, pl.Enum):
        column = column.cast(pl.String)
    return column


def _values_kept(request: LinkedSets, name: str) -> bool:
    """Whether every row's avatar holds its original's value of ``name`` (nulls alike, NaN
    alike), in the type both are compared in."""
    left, right = copy_columns(request, [name])
    both = pl.concat(
        [request.originals.select(left[0].alias("o")), request.avatars.select(right[0].alias("a"))],
        how="horizontal",
    )
    return bool(both.select(pl.col("o").eq_missing(pl.col("a")).all()).collect().item())


def _values_of(request: LinkedSets, name: str, population: int) -> IndexArray:
    """Per record the link test compares, the label of its original's value of ``name``
    (nulls alike), numbered in order of first appearance."""
    rows = sampled_rows(population)
    schema = request.originals.collect_schema()
    side = request.originals.select(_sort_value(name, schema).alias("v"))
    if rows is not None:
        index = pl.Series(rows, dtype=pl.UInt64)
        side = side.with_row_index("row").filter(pl.col("row").is_in(index)).drop("row")
    groups = (
        side.with_row_index("row")
        .group_by("v", maintain_order=True)
        .agg("row")
        .with_row_index("label")
        .explode("row")
        .collect()
    )
    labels = np.empty(groups.height, dtype=np.int64)
    labels[groups["row"].to_numpy()] = groups["label"].to_numpy()
    return labels


def _sorted_by_chance(frame: pl.LazyFrame, values: pl.Expr) -> float:
    """The log of the chance that ``values`` in random order are monotone (either way)."""
    counts = frame.select(values.value_counts().struct.field("count")).collect().to_series()
    n = int(counts.sum())
    ways = sum(math.lgamma(int(m) + 1) for m in counts) - math.lgamma(n + 1)
    return math.log(2.0) + ways
