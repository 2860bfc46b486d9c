"""What the link's checks read of a request: its two sets, their link and the compared columns
(`LinkedSets`, which a `polars_hidden_rate.plan.CountPlan` is); the raw features own copies are
compared on, and the columns both frames hold as a key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import polars as pl

from polars_hidden_rate.frames import RESERVED_PREFIX, Link, common_feature_type, is_text

if TYPE_CHECKING:
    from polars_hidden_rate.projection import ProjectedCoordinates

COPY_PREFIX = f"{RESERVED_PREFIX}_copy"
"""The prefix of the raw features a read carries for own copies (`copy_columns`)."""


class LinkedSets(Protocol):
    """What the link's checks read of a request (`polars_hidden_rate.plan.CountPlan` is one):
    the two sets, their link, the compared columns."""

    @property
    def originals(self) -> pl.LazyFrame: ...

    @property
    def avatars(self) -> pl.LazyFrame: ...

    @property
    def link(self) -> Link: ...

    @property
    def coords(self) -> list[str]: ...

    @property
    def given_coords(self) -> tuple[str, ...]: ...

    @property
    def projection(self) -> ProjectedCoordinates | None: ...

    @property
    def progress(self) -> bool | None: ...


def compares_coordinates(request: LinkedSets) -> bool:
    """Whether own copies are compared on the coordinate arrays themselves: no projection,
    and every given coordinate is counted on (float64 holds each exactly, as the read checks)."""
    return request.projection is None and list(request.given_coords) == request.coords


def copy_features(request: LinkedSets) -> list[str]:
    """The columns own copies are compared on: the projected features (raw values), or
    every ``coords`` column given (also those past ``ncp``)."""
    if request.projection is not None:
        return list(request.projection.features)
    return list(request.given_coords)


def copy_columns(
    request: LinkedSets, features: Sequence[str]
) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """The raw ``features`` of each side, in the type both are compared in."""
    left = request.originals.collect_schema()
    right = request.avatars.collect_schema()
    sides: tuple[list[pl.Expr], list[pl.Expr]] = ([], [])
    for k, name in enumerate(features):
        common = common_feature_type(name, left[name], right[name])
        for side in sides:
            column = pl.col(name) if common is None else pl.col(name).cast(common)
            side.append(column.alias(f"{COPY_PREFIX}{k}"))
    return sides


def copy_fingerprints(request: LinkedSets) -> tuple[pl.Expr, pl.Expr]:
    """Per side, a 64-bit hash of each record's raw copy features (`copy_features`) in the
    type both are compared in: where the raw features never meet (the cluster's link buckets
    hold coordinates), an own copy is a record whose coordinates and hash both equal its
    avatar's. A copy is always counted; a record that is not one is counted only when its
    coordinates and its hash both collide with its avatar's (a chance of 2^-64 at most)."""
    left, right = copy_columns(request, copy_features(request))
    return pl.struct(left).hash(seed=0), pl.struct(right).hash(seed=0)


def copies_carried(request: LinkedSets) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """The raw features each side carries through the read for `judged` (none when the
    coordinate arrays themselves are compared)."""
    if compares_coordinates(request):
        return [], []
    return copy_columns(request, copy_features(request))


def shared_keys(request: LinkedSets) -> list[str]:
    """The columns of both frames that are a key: integer or text, unique per row, without
    nulls, holding the same values in both frames."""
    left, right = request.originals.collect_schema(), request.avatars.collect_schema()
    candidates = [
        name
        for name in left.names()
        if name in right and all(s[name].is_integer() or is_text(s[name]) for s in (left, right))
    ]
    if not candidates:
        return []

    def unique(frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.select(
            (
                (pl.col(c).n_unique() == pl.len()) & (pl.col(c).null_count() == 0) & (pl.len() > 1)
            ).alias(c)
            for c in candidates
        )

    flags = pl.collect_all([unique(request.originals), unique(request.avatars)])
    keys = [c for c in candidates if flags[0][c].item() and flags[1][c].item()]
    total = request.originals.select(pl.len()).collect().item() if keys else 0
    found = []
    for name in keys:
        common = common_feature_type(name, left[name], right[name])
        values = [pl.col(name) if common is None else pl.col(name).cast(common)]
        shared = (
            request.originals.select(values)
            .join(request.avatars.select(values), on=name, how="semi")
            .select(pl.len())
            .collect()
            .item()
        )
        if shared == total:
            found.append(name)
    return found
