"""The correlation protection rate: of the originals unique on the variables an attacker
knows, the share that no single avatar singles out (the Avatar method's 2021 definition)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np
import polars as pl

from polars_hidden_rate.checks import check_real, check_tolerance
from polars_hidden_rate.engine.boxes import count_in_boxes
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    ColumnSpec,
    as_lazy,
    common_feature_type,
    inexact_counts,
    is_selection,
    nothing_to_measure,
    raise_inexact,
    resolve_columns,
    shared_schema,
)
from polars_hidden_rate.plan import CountOptions, plan
from polars_hidden_rate.stats import percent

_VALUE = f"{RESERVED_PREFIX}_value"
_GROUP = f"{RESERVED_PREFIX}_group"


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
