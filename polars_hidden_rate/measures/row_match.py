"""The row direct match protection: the share of avatars that are no exact copy of an
original row."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl
from polars.exceptions import SchemaError

from polars_hidden_rate.frames import (
    ColumnSpec,
    as_lazy,
    common_feature_type,
    default_features,
    inexact_counts,
    is_selection,
    nothing_to_measure,
    raise_inexact,
    resolve_columns,
    resolve_link,
    shared_schema,
)
from polars_hidden_rate.plan import Keys
from polars_hidden_rate.stats import percent


def row_direct_match_protection(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    *,
    features: ColumnSpec | None = None,
    on: Keys | None = None,
    left_on: Keys | None = None,
    right_on: Keys | None = None,
) -> float:
    """The percentage of avatars that are not an exact copy of any original.

    An avatar is a direct match when some original has exactly its values on
    every raw feature: nulls match nulls, NaN matches NaN and ``-0.0`` matches
    ``0.0`` (Polars' join equality). Columns of different types are compared in
    a common type: integers of different widths as Int64, other mixes of numbers
    (integers, floats, decimals) as Float64 (where a value cannot be compared
    exactly so, an integer beyond 2^53 in magnitude for example, it is refused:
    docs/guarantees.md), text and categories as their text; any other mismatch
    is refused.

    Parameters
    ----------
    originals, avatars
        DataFrames or LazyFrames (collected here).
    features
        The raw feature columns, by name or selector (a selector picks among the
        columns the two frames share); default every column the two frames
        share, less the keys.
    on, left_on, right_on
        Key columns, as for [`local_cloaking`][polars_hidden_rate.local_cloaking]: left out
        of the default features (an avatar's key is not its content).

    Returns
    -------
    float
        ``100 * (1 - #{avatars equal to some original} / #avatars)``, in [0, 100].

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"age": [30, 41, None], "city": ["Lyon", "Nice", "Pau"]})
    >>> avatars = pl.DataFrame(
    ...     {"age": [30.0, 40.5, None, 41.0], "city": ["Lyon", "Nice", "Pau", "Pau"]}
    ... )
    >>> phr.row_direct_match_protection(originals, avatars)
    50.0
    """
    left = as_lazy(originals, "originals")
    right = as_lazy(avatars, "avatars")
    left_schema, right_schema = left.collect_schema(), right.collect_schema()
    link = resolve_link(on, left_on, right_on, left_schema, right_schema)
    if features is None:
        names = default_features(left_schema, right_schema, {*link.left, *link.right})
        if not names:
            msg = "originals and avatars share no column besides the keys: give `features`"
            raise SchemaError(msg)
    elif is_selection(features):
        shared = shared_schema(left_schema, right_schema)
        names = resolve_columns(features, shared, "originals and avatars", "features")
    else:
        names = resolve_columns(features, left_schema, "originals", "features")
        resolve_columns(names, right_schema, "avatars", "features")
    common = {n: common_feature_type(n, left_schema[n], right_schema[n]) for n in names}
    columns = [pl.col(n) if t is None else pl.col(n).cast(t) for n, t in common.items()]
    as_float = [n for n, t in common.items() if t == pl.Float64]
    hint = "it is compared with the other side's numbers as float64: cast both sides to one type"
    for frame, schema, role in ((left, left_schema, "originals"), (right, right_schema, "avatars")):
        dtypes = {n: schema[n] for n in as_float}
        raise_inexact(inexact_counts(frame, dtypes), dtypes, "feature", role, hint)
    compared = {n: left_schema[n] if t is None else t for n, t in common.items()}
    left_rows, right_rows = left.select(columns), right.select(columns)
    # A join of every row would hold both sides in hash tables (about 200 bytes per record
    # at 1e7): the rows' hashes find the few values both sides may share, and the join
    # settles only the rows that hold one of them. Equal rows have equal hashes.
    found = _shared_hashes(left_rows, right_rows, compared)
    if found is None:
        raise nothing_to_measure("avatars")
    total, candidates = found
    if len(candidates) == 0:
        return 100.0
    hashes = pl.Series("hash", candidates, dtype=pl.UInt64)
    copies = right_rows.filter(_row_hash(compared).is_in(hashes.implode())).join(
        left_rows.filter(_row_hash(compared).is_in(hashes.implode())).unique(),
        on=names,
        how="semi",
        nulls_equal=True,
    )
    matched = int(copies.select(pl.len()).collect().item())
    return percent(total - matched, total)


def _row_hash(dtypes: dict[str, pl.DataType]) -> pl.Expr:
    """One hash per row of these columns, equal for rows that Polars' join calls equal: each
    float is first made canonical (-0.0 as 0.0, one NaN), whatever the hash does with them."""
    fields = []
    for name, dtype in dtypes.items():
        column = pl.col(name)
        if dtype.is_float():
            column = (
                pl.when(column.is_nan())
                .then(pl.lit(float("nan"), dtype))
                .otherwise(
                    column + pl.lit(0.0, dtype)  # -0.0 + 0.0 is 0.0
                )
            )
        fields.append(column.alias(name))
    return pl.struct(fields).hash(seed=0x5EED).alias("hash")


def _shared_hashes(
    left: pl.LazyFrame, right: pl.LazyFrame, dtypes: dict[str, pl.DataType]
) -> tuple[int, npt.NDArray[np.uint64]] | None:
    """The number of right rows and the row hashes both sides hold (sorted, distinct); None
    when the right side has no row. Each side's hashes are 8 bytes per record."""
    found = [
        frame.select(_row_hash(dtypes)).collect().to_series().to_numpy(writable=True)
        for frame in (left, right)
    ]
    if len(found[1]) == 0:
        return None
    for hashes in found:
        hashes.sort()
    ours, theirs = found
    total = len(theirs)
    if len(ours) == 0:
        return total, np.empty(0, dtype=np.uint64)
    at = np.searchsorted(ours, theirs)
    np.minimum(at, len(ours) - 1, out=at)
    held = ours[at] == theirs
    del at
    return total, np.unique(theirs[held])
