"""Linked coordinates from two frames: read the few columns needed, check them, align them.

`read_aligned` collects the coordinates of both frames as float64, the avatars in the
originals' order, and raises what `KeyProblems`
and `CoordinateProblems` find.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import known
from polars_hidden_rate.engine.arrays import gather_into
from polars_hidden_rate.frames.problems import CoordinateProblems, link_by_key, unequal_heights
from polars_hidden_rate.frames.schema import Link


@dataclass(frozen=True)
class Aligned:
    """Linked coordinates (row ``i`` with row ``i``) and columns carried from the same read:
    ``carried`` of each original, ``carried_avatars`` of its own avatar (same row order)."""

    originals: Float64Array
    avatars: Float64Array
    carried: pl.DataFrame
    carried_avatars: pl.DataFrame = field(default_factory=pl.DataFrame)
    # The fitted projection the coordinates come from (None for given coords), and per
    # categorical feature the avatars whose value is none of the originals' modalities.
    projection: Any = None
    unseen: Mapping[str, int] = field(default_factory=dict)


def read_aligned(
    originals: pl.LazyFrame,
    avatars: pl.LazyFrame,
    columns: Sequence[str],
    link: Link,
    carry: Sequence[pl.Expr] = (),
    carry_avatars: Sequence[pl.Expr] = (),
) -> Aligned:
    """Collect ``columns`` of both frames as float64, avatars reordered to match the originals.

    Row ``i`` of the avatars array is the avatar of row ``i`` of the originals, and
    row ``i`` of ``carried`` holds the ``carry`` expressions of that original, from
    the same read (row ``i`` of ``carried_avatars``, ``carry_avatars`` of its avatar).
    Reads only ``columns``, the key columns and what the carried expressions need.
    """
    columns = list(columns)
    left = originals.select(
        *link.key_columns("left"), pl.col(columns).exclude(link.left), *carry
    ).collect()
    right = avatars.select(
        *link.key_columns("right"), pl.col(columns).exclude(link.right), *carry_avatars
    ).collect()
    # Rows to measure, and every coordinate a finite number that float64 holds exactly.
    CoordinateProblems.of(left, columns, "originals").raise_first()
    CoordinateProblems.of(right, columns, "avatars").raise_first()
    # The carried expressions are the last columns of each read.
    carried = left.select(left.columns[left.width - len(carry) :])
    carried_avatars = right.select(right.columns[right.width - len(carry_avatars) :])
    order = None
    if not link.by_row_order:
        order = _avatar_order(left, right, link)
    elif left.height != right.height:
        raise unequal_heights(left.height, right.height)
    # The frames go (keys too, but what `carried` holds); the coordinate columns are
    # converted, and let go, one at a time.
    left_columns = left.select(columns).get_columns()
    right_columns = right.select(columns).get_columns()
    del left, right
    originals_array = float64_rows(left_columns)
    if order is not None and carried_avatars.width:
        carried_avatars = carried_avatars[order]
    return Aligned(originals_array, float64_rows(right_columns, order), carried, carried_avatars)


def read_coordinates(frame: pl.LazyFrame, columns: Sequence[str], role: str) -> Float64Array:
    """Collect ``columns`` of one frame (the ``role`` side) as float64, on their own: for the
    measures that link no record to another (a distance to the closest record of another
    set), checked as `read_aligned` checks each side."""
    columns = list(columns)
    collected = frame.select(columns).collect()
    CoordinateProblems.of(collected, columns, role).raise_first()
    series = collected.get_columns()
    del collected
    return float64_rows(series)


def float64_rows(columns: list[pl.Series], rows: np.ndarray | None = None) -> Float64Array:
    """``columns`` (of ``rows``, in that order) as a new C-order float64 array that no one
    else holds, emptying the list: each column is let go once copied, so the data is held
    twice one column at a time, not as a whole."""
    out = np.empty((len(columns[0]) if rows is None else len(rows), len(columns)))
    columns.reverse()
    for k in range(out.shape[1]):
        values = columns.pop().cast(pl.Float64).to_numpy()
        if rows is None:
            out[:, k] = values
        else:
            gather_into(out, k, values, rows)
    return out


def _avatar_order(left: pl.DataFrame, right: pl.DataFrame, link: Link) -> np.ndarray:
    """Row of ``right`` holding each original's avatar; every key unique, set and matched."""
    order, problems = link_by_key(left, right, link.left, link.right)
    problems.raise_first()
    order = known(order, "the avatars' rows of a link by key without problems")
    return order
