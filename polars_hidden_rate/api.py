"""The public functions: local cloaking per record, and the hidden rate.

Both walk one path: `plan` checks the schemas and returns a
`CountPlan`, which reads the coordinate arrays, runs the
exact engine and joins the counts back. The planner's names live in `polars_hidden_rate.plan`.
"""

from __future__ import annotations

from typing import Unpack

import numpy as np
import polars as pl

from polars_hidden_rate.frames import check_output_free
from polars_hidden_rate.plan import (
    CountOptions,
    FrameT,
    plan,
)

__all__ = ["hidden_rate", "local_cloaking"]


def local_cloaking(
    originals: FrameT,
    avatars: pl.DataFrame | pl.LazyFrame,
    **options: Unpack[CountOptions],
) -> FrameT:
    """Add each original's local cloaking and whether it is hidden.

    The local cloaking of original ``x_i`` with avatar ``y_a(i)`` is the number
    of other avatars at least as close to it as its own:
    ``c_i = #{j != a(i) : d2(x_i, y_j) <= d2(x_i, y_a(i)) * (1 + tie_tol)}``,
    with Euclidean distances computed exactly in float64.

    Parameters
    ----------
    originals
        The original records, a DataFrame or a LazyFrame.
    avatars
        One avatar per original, a DataFrame or a LazyFrame.
    **options
        The keyword options of [`CountOptions`][polars_hidden_rate.CountOptions]: ``coords`` or
        ``features`` (with ``categorical`` and ``impute``), ``ncp``, ``on`` (or ``left_on`` and
        ``right_on``), ``tie_tol``, ``threads``, ``progress``, ``device``,
        ``cluster``.

    Returns
    -------
    DataFrame or LazyFrame
        The originals, same kind, rows and order, with ``local_cloaking``
        (unsigned integer) and ``hidden`` (``local_cloaking > 0``). A LazyFrame
        counts when it is collected or sunk.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0], "Dim2": [0.0, 0.0, 0.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 1.5, 3.0], "Dim2": [0.0, 0.0, 0.0]})
    >>> phr.local_cloaking(originals, avatars, coords=["Dim1", "Dim2"])
    shape: (3, 4)
    ┌──────┬──────┬────────────────┬────────┐
    │ Dim1 ┆ Dim2 ┆ local_cloaking ┆ hidden │
    │ ---  ┆ ---  ┆ ---            ┆ ---    │
    │ f64  ┆ f64  ┆ u32            ┆ bool   │
    ╞══════╪══════╪════════════════╪════════╡
    │ 0.0  ┆ 0.0  ┆ 0              ┆ false  │
    │ 1.0  ┆ 0.0  ┆ 1              ┆ true   │
    │ 3.0  ┆ 0.0  ┆ 0              ┆ false  │
    └──────┴──────┴────────────────┴────────┘
    """
    request = plan(originals, avatars, options, caller="local_cloaking")
    check_output_free(request.originals.collect_schema())
    per_record = request.per_record()
    if isinstance(originals, pl.DataFrame):
        return per_record.collect()
    return per_record


def hidden_rate(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    **options: Unpack[CountOptions],
) -> float:
    """The hidden rate: the percentage of originals whose own avatar is not strictly closest.

    ``100 * (1 - #{i : c_i = 0} / n)``, with ``c_i`` the local cloaking of
    [`local_cloaking`][polars_hidden_rate.local_cloaking]; ties count as hidden. The options are
    those of [`local_cloaking`][polars_hidden_rate.local_cloaking], and LazyFrames are collected.
    Only whether ``c_i > 0`` is counted: each record's search stops at its first rival.

    Returns
    -------
    float
        The hidden rate, in [0, 100].

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0, 4.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 1.5, 3.0, 4.0]})
    >>> phr.hidden_rate(originals, avatars, coords="Dim1")
    25.0
    """
    request = plan(originals, avatars, options, caller="hidden_rate")
    counts = request.result(cap=1).counts  # only c_i > 0 matters: each stops at one rival
    # `stats.percent`'s rounding: the product first, then the division.
    return 100.0 * int(np.count_nonzero(counts)) / len(counts)
