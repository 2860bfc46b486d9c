"""The distances of each avatar to the originals: DCR (the distance to the closest original)
and NNDR (the ratio of the closest to the second closest).

[`distance_to_closest`][polars_hidden_rate.distance_to_closest] and
[`closest_distances_ratio`][polars_hidden_rate.closest_distances_ratio] measure each avatar against
the originals in the same space as [`local_cloaking`][polars_hidden_rate.local_cloaking] (the
projection, or ``coords``), exactly in float64 (the engine's nearest-two walk, or its Dask
version with ``cluster=``, which gives the same floats).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, Unpack

import polars as pl
from polars.exceptions import DuplicateError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.engine.nearest import NearestTwo
from polars_hidden_rate.plan import CountOptions, CountPlan, plan

AvatarsT = TypeVar("AvatarsT", pl.DataFrame, pl.LazyFrame)


def distance_to_closest(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: AvatarsT,
    **options: Unpack[CountOptions],
) -> AvatarsT:
    """Add each avatar's distance to the closest original (DCR).

    ``DCR_j = min_i d(y_j, x_i)``: the Euclidean distance from avatar ``y_j`` to
    its nearest original, over all originals, in the space of
    [`local_cloaking`][polars_hidden_rate.local_cloaking] (the projection fitted on the
    originals, or ``coords``), exactly in float64. A DCR of 0 means the avatar
    sits on an original. The value belongs to the avatar, so it is a column of
    the avatars frame.

    Parameters
    ----------
    originals
        The original records, a DataFrame or a LazyFrame.
    avatars
        One avatar per original, a DataFrame or a LazyFrame.
    **options
        The keyword options of [`CountOptions`][polars_hidden_rate.CountOptions].
        ``coords`` or ``features`` and ``ncp`` choose the space. No link is
        needed: a synthetic set of any size is measured (``on`` only keeps the key
        columns out of the default features). With
        ``cluster``, the distances are found on the Dask cluster, bit for bit
        the local ones; ``device="gpu"`` is refused (there is no GPU path for
        them); ``tie_tol`` and ``progress`` do not concern them.

    Returns
    -------
    DataFrame or LazyFrame
        The avatars, same kind, rows and order, with ``distance_to_closest``
        (Float64). A LazyFrame computes when it is collected; the avatars are
        then read once, whole, and each row gets the value of the record it holds.

    Raises
    ------
    NotImplementedError
        For ``device="gpu"``, before anything is read.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 3.0, -2.0]})
    >>> phr.distance_to_closest(originals, avatars, coords="Dim1")
    shape: (3, 2)
    ┌──────┬─────────────────────┐
    │ Dim1 ┆ distance_to_closest │
    │ ---  ┆ ---                 │
    │ f64  ┆ f64                 │
    ╞══════╪═════════════════════╡
    │ 0.5  ┆ 0.5                 │
    │ 3.0  ┆ 0.0                 │
    │ -2.0 ┆ 2.0                 │
    └──────┴─────────────────────┘
    """
    request = _distance_plan(originals, avatars, options, "distance_to_closest")
    return _per_avatar(request, avatars, "distance_to_closest", lambda found: found.nearest)


def closest_distances_ratio(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: AvatarsT,
    **options: Unpack[CountOptions],
) -> AvatarsT:
    """Add each avatar's nearest neighbour distance ratio (NNDR).

    ``NNDR_j = d_1(y_j) / d_2(y_j)``, the distance from avatar ``y_j`` to its
    nearest original over the distance to its second-nearest, in ``[0, 1]``;
    1 when both are 0 (the avatar copies two identical originals), 0 when
    there is a single original. Close to 0, the avatar points at one original
    much more than at any other; close to 1, it lies as near to two of them.
    Computed exactly in float64, in the space of
    [`local_cloaking`][polars_hidden_rate.local_cloaking].

    Parameters
    ----------
    originals, avatars, **options
        As for [`distance_to_closest`][polars_hidden_rate.distance_to_closest].

    Returns
    -------
    DataFrame or LazyFrame
        The avatars, same kind, rows and order, with ``closest_distances_ratio``
        (Float64).

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 3.0, -2.0]})
    >>> phr.closest_distances_ratio(originals, avatars, coords="Dim1")["closest_distances_ratio"]
    shape: (3,)
    Series: 'closest_distances_ratio' [f64]
    [
        1.0
        0.0
        0.666667
    ]
    """
    request = _distance_plan(originals, avatars, options, "closest_distances_ratio")
    return _per_avatar(request, avatars, "closest_distances_ratio", lambda found: found.ratio)


def _distance_plan(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    caller: str,
) -> CountPlan:
    """The plan of a distance metric; ``device="gpu"`` is refused rather than run on the CPU."""
    if options.get("device") == "gpu":
        msg = (
            f"{caller}() has no GPU path (its exact kd-tree walk runs on the CPU, or on a Dask "
            "cluster with `cluster=`): drop `device='gpu'`"
        )
        raise NotImplementedError(msg)
    return plan(originals, avatars, options, caller=caller)


def _per_avatar(
    request: CountPlan,
    avatars: AvatarsT,
    name: str,
    value: Callable[[NearestTwo], Float64Array],
) -> AvatarsT:
    """The avatars with column ``name``: ``value`` of their nearest two originals.

    No link is read: a distance to the closest original needs none, so a synthetic set of
    any size is measured. The avatars are read once, whole, and their coordinates from that
    very frame, so each row carries the value of the record it holds, whatever order the
    avatars' plan gives.
    """
    schema = request.avatars.collect_schema()
    if name in schema:
        msg = f"avatars already have a column named {name!r}; rename or drop it first"
        raise DuplicateError(msg)

    def compute() -> pl.DataFrame:
        frame = request.avatars.collect()
        space = request.fitted()
        originals = space.coordinates_of(space.originals, "originals")
        found = space.nearest_of(originals, space.coordinates_of(frame.lazy(), "avatars"))
        return frame.with_columns(pl.Series(name, value(found), dtype=pl.Float64))

    per_avatar = pl.defer(compute, schema={**schema, name: pl.Float64})
    if isinstance(avatars, pl.DataFrame):
        return per_avatar.collect()
    return per_avatar
