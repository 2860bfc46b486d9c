"""The release metrics beside local cloaking: distances to the originals, direct copies,
and the confidence interval of the hidden rate.

[`distance_to_closest`][polars_hidden_rate.distance_to_closest] and
[`closest_distances_ratio`][polars_hidden_rate.closest_distances_ratio] measure each avatar against
the originals in the same space as [`local_cloaking`][polars_hidden_rate.local_cloaking] (the
projection, or ``coords``), exactly in float64
([`nearest_two`][polars_hidden_rate.neighbours.nearest_two], or its Dask version with ``cluster=``,
which gives the same floats).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, Unpack

import numpy as np
import numpy.typing as npt
import polars as pl
from polars.exceptions import DuplicateError, SchemaError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import check_confidence, check_count, check_real, check_tolerance
from polars_hidden_rate.engine.boxes import count_in_boxes
from polars_hidden_rate.engine.nearest import NearestTwo
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
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
from polars_hidden_rate.plan import CountOptions, CountPlan, Keys, plan
from polars_hidden_rate.stats import percent, wilson

AvatarsT = TypeVar("AvatarsT", pl.DataFrame, pl.LazyFrame)

_VALUE = f"{RESERVED_PREFIX}_value"


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
    copies = right_rows.filter(_row_hash(compared).is_in(hashes)).join(
        left_rows.filter(_row_hash(compared).is_in(hashes)).unique(),
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


CORRELATION_TOLERANCE = 0.05
"""The share of a numeric variable's mean within which an avatar's value matches an
original's (the Avatar method's 2021 code: ``boundaries=0.05``)."""


@dataclass(frozen=True)
class CorrelationProtection:
    """The counts behind a correlation protection rate.

    Attributes
    ----------
    known
        The variables the attacker knows.
    n
        Number of originals.
    unique
        Originals whose combination of known values no other original has (those with a
        null, or NaN, in a known variable are never unique).
    singled_out
        Unique originals that exactly one avatar matches.
    hidden_rate
        The hidden rate the rate discounts them by, in percent.
    tolerance
        The share of each numeric variable's mean within which values match.
    """

    known: tuple[str, ...]
    n: int
    unique: int
    singled_out: int
    hidden_rate: float
    tolerance: float = CORRELATION_TOLERANCE

    @property
    def rate(self) -> float:
        """``100 * (1 - round(singled_out * (1 - hidden_rate / 100)) / n)``, in float64, the
        rounding Python's (half to even), as the 2021 code computes it."""
        expected = round(self.singled_out * (1.0 - self.hidden_rate / 100.0))
        return (1.0 - expected / self.n) * 100.0

    def to_dict(self) -> dict[str, Any]:
        """The counts and the rate, as plain Python values."""
        return {
            "value": self.rate,
            "known": list(self.known),
            "n": self.n,
            "unique": self.unique,
            "singled_out": self.singled_out,
            "hidden_rate": self.hidden_rate,
            "tolerance": self.tolerance,
        }


def correlation_protection_rate(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    known: ColumnSpec,
    *,
    tolerance: float = CORRELATION_TOLERANCE,
    hidden_rate: float | None = None,
    **options: Unpack[CountOptions],
) -> float:
    """The correlation protection rate: how well the originals an attacker could single out
    by the variables they know are protected.

    The definition is the Avatar method's 2021 research code (octopize/avatar-paper, commit
    614cb6d, ``metrics/correlation_protection_rate.py``; docs/metrics.md). Take the
    originals whose combination of known values is unique among the originals; for each,
    count the avatars that match it on every known variable: equal for a categorical one,
    strictly within ``tolerance`` times the variable's mean (over the originals) for a
    numeric one. With ``n2`` the unique originals matched by exactly one avatar, ``N`` the
    originals and ``HR`` the hidden rate, the rate is
    ``100 * (1 - round(n2 * (1 - HR / 100)) / N)``: of the ``n2`` records an attacker links
    to one avatar, the hidden rate's share are linked to the wrong one.

    Exact: an avatar's value ``a`` matches an original's ``x`` when
    ``fl(x - t) < a < fl(x + t)``, with ``t = fl(mean * tolerance)`` and the mean the
    correctly rounded sum of the originals' values divided by their count, so the result
    does not depend on the order of the rows. Nulls (and NaN) match nothing.

    Parameters
    ----------
    originals, avatars
        DataFrames or LazyFrames (collected here). The avatars may have any number of rows
        unless ``hidden_rate`` is computed here.
    known
        The variables the attacker knows (names or a selector), in both frames. Integer,
        float and decimal columns are numeric (compared within the tolerance, as float64;
        an integer beyond 2^53 is refused), every other type is categorical (compared for
        equality; text and categories by their text). Other type mixes are refused.
    tolerance
        The share of a numeric variable's mean within which two values match (0.05). A
        variable whose mean is 0 or negative matches no avatar, as in the original code.
    hidden_rate
        The hidden rate of these avatars, in percent; default: computed here with
        [`hidden_rate`][polars_hidden_rate.hidden_rate] and ``options``.
    **options
        The keyword options of [`CountOptions`][polars_hidden_rate.CountOptions], for the
        hidden rate (refused with ``hidden_rate`` given).

    Returns
    -------
    float
        The rate in percent, at most 100.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"age": [30, 40, 50, 50], "sex": ["F", "M", "F", "F"]})
    >>> avatars = pl.DataFrame({"age": [31, 39, 60, 52], "sex": ["F", "M", "M", "F"]})
    >>> phr.correlation_protection_rate(originals, avatars, ["age", "sex"], hidden_rate=50.0)
    75.0
    """
    if hidden_rate is not None and options:
        msg = (
            "give either `hidden_rate` or the options of its count "
            f"({', '.join(sorted(options))}), not both"
        )
        raise ValueError(msg)
    left = as_lazy(originals, "originals")
    right = as_lazy(avatars, "avatars")
    names = check_known(known, left.collect_schema(), right.collect_schema())
    level = check_tolerance(tolerance)
    if hidden_rate is None:
        request = plan(originals, avatars, options, caller="correlation_protection_rate")
        counts = request.counts(cap=1)
        rate = percent(int(np.count_nonzero(counts)), len(counts))
    else:
        rate = check_real(hidden_rate, "hidden_rate", low=0.0, high=100.0)
    return correlation_protection(left, right, names, hidden_rate=rate, tolerance=level).rate


def check_known(known: ColumnSpec, left: pl.Schema, right: pl.Schema) -> list[str]:
    """The known variables, each in both schemas with types they can be compared in."""
    shared = shared_schema(left, right) if is_selection(known) else left
    names = resolve_columns(known, shared, "originals", "known")
    resolve_columns(names, right, "avatars", "known")
    for name in names:
        common_feature_type(name, left[name], right[name])
    return names


def correlation_protection(
    originals: pl.LazyFrame,
    avatars: pl.LazyFrame,
    known: Sequence[str],
    *,
    hidden_rate: float,
    tolerance: float = CORRELATION_TOLERANCE,
) -> CorrelationProtection:
    """The counts of
    [`correlation_protection_rate`][polars_hidden_rate.correlation_protection_rate], the known
    variables checked (`check_known`) and the hidden rate given."""
    left_schema, right_schema = originals.collect_schema(), avatars.collect_schema()
    names = list(known)
    numeric = [n for n in names if left_schema[n].is_numeric()]
    categorical = [n for n in names if n not in numeric]
    common = {n: common_feature_type(n, left_schema[n], right_schema[n]) for n in categorical}
    hint = "it is compared within a share of its mean as float64: rescale or recode it"
    for frame, schema, role in (
        (originals, left_schema, "originals"),
        (avatars, right_schema, "avatars"),
    ):
        dtypes = {n: schema[n] for n in numeric}
        raise_inexact(inexact_counts(frame, dtypes), dtypes, "known variable", role, hint)
    # Numbers as float64, NaN as null (pandas' missing value), -0.0 as 0.0 (one group);
    # categories in their common type.
    columns = [
        *(
            pl.when(pl.col(n).cast(pl.Float64).is_nan())
            .then(None)
            .otherwise(pl.col(n).cast(pl.Float64) + 0.0)
            .alias(n)
            for n in numeric
        ),
        *(pl.col(n) if (to := common[n]) is None else pl.col(n).cast(to) for n in categorical),
    ]
    left, right = pl.collect_all([originals.select(columns), avatars.select(columns)])
    if left.height == 0:
        raise nothing_to_measure("originals")
    unique = left.drop_nulls().filter(pl.len().over(names) == 1)
    candidates = right.drop_nulls()
    if categorical:
        combos = unique.select(categorical).unique().with_row_index(_GROUP)
        queries = unique.join(combos, on=categorical, how="inner")
        candidates = candidates.join(combos, on=categorical, how="inner")
        n_groups = combos.height
    else:
        queries = unique.with_columns(pl.lit(0, pl.UInt32).alias(_GROUP))
        candidates = candidates.with_columns(pl.lit(0, pl.UInt32).alias(_GROUP))
        n_groups = 1
    if not numeric:
        sizes = candidates.group_by(_GROUP).len(name=_VALUE)
        matched = queries.join(sizes, on=_GROUP, how="left").get_column(_VALUE).fill_null(0)
        singled_out = int((matched == 1).sum())
    else:
        tolerances = np.array(
            [_mean(left.get_column(n)) * tolerance for n in numeric], dtype=np.float64
        )
        values = queries.select(numeric).to_numpy().astype(np.float64, copy=False)
        counts = count_in_boxes(
            candidates.select(numeric).to_numpy().astype(np.float64, copy=False),
            candidates.get_column(_GROUP).to_numpy().astype(np.int64),
            values - tolerances,
            values + tolerances,
            queries.get_column(_GROUP).to_numpy().astype(np.int64),
            n_groups,
            cap=2,
        )
        singled_out = int(np.count_nonzero(counts == 1))
    return CorrelationProtection(
        known=tuple(names),
        n=left.height,
        unique=unique.height,
        singled_out=singled_out,
        hidden_rate=hidden_rate,
        tolerance=tolerance,
    )


def _mean(values: pl.Series) -> float:
    """The mean of the non-null values, from their correctly rounded sum (whatever their
    order); NaN when there is none."""
    present = values.drop_nulls().to_numpy().astype(np.float64, copy=False)
    if present.size == 0:
        return math.nan
    try:
        return math.fsum(present) / present.size
    except OverflowError:  # the sum passes float64's largest: halve, exactly, first
        return 2.0 * (math.fsum(present * 0.5) / present.size)


_GROUP = f"{RESERVED_PREFIX}_group"


def hidden_rate_interval(n_hidden: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a hidden rate, in percent.

    With ``z`` the normal quantile of ``(1 + confidence) / 2``, the bounds are
    ``(k + z²/2 ± z sqrt(k(n - k)/n + z²/4)) / (n + z²)`` for ``k = n_hidden``
    (`polars_hidden_rate.stats.wilson`, the inference attack's rates too). Unlike the normal
    approximation, it stays within [0, 100] and keeps its coverage at rates near 100; the
    bound at an end is that end exactly (100 when every record is hidden, 0 when none is).

    Parameters
    ----------
    n_hidden
        Number of hidden records (``local_cloaking > 0``), ``0 <= n_hidden <= n``.
    n
        Number of records, at least 1.
    confidence
        Confidence level, in (0, 1).

    Returns
    -------
    tuple of float
        The lower and upper bounds, in percent.

    Examples
    --------
    >>> import polars_hidden_rate as phr
    >>> low, high = phr.hidden_rate_interval(90, 100)
    >>> round(low, 2), round(high, 2)
    (82.56, 94.48)
    """
    n = check_count(n, "n")
    n_hidden = check_count(n_hidden, "n_hidden", low=0)
    if n_hidden > n:
        msg = f"`n_hidden` must be at most n={n}, got {n_hidden}"
        raise ValueError(msg)
    level = check_confidence(confidence)
    centre, half = wilson(n_hidden, n, level)
    # At k = 0 (k = n) the lower (upper) bound is exactly 0 (100): the formula gives it up
    # to rounding (2.8e-15, 99.99999999999999).
    low = 0.0 if n_hidden == 0 else min(max(100.0 * (centre - half), 0.0), 100.0)
    high = 100.0 if n_hidden == n else min(max(100.0 * (centre + half), 0.0), 100.0)
    return low, high
