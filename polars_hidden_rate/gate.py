"""Gates for pipelines: summarise per-record local cloaking, and fail below a minimum rate.

:func:`assert_hidden_rate` stops a Python pipeline; the ``hidden-rate check``
command line does the same with an exit code, from :func:`summarize`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Unpack

import numpy as np
import polars as pl

from polars_hidden_rate._types import CountArray
from polars_hidden_rate.api import CountOptions, hidden_rate, plan
from polars_hidden_rate.checks import check_percentage
from polars_hidden_rate.digits import decisive, exact
from polars_hidden_rate.frames import as_lazy, check_output_free

# cloaking_summary first counts each record up to this many rivals (docs/cli.md).
QUARTILE_CAP = 64


class HiddenRateTooLowError(AssertionError):
    """The hidden rate of an anonymization is below the minimum a gate asks for.

    Attributes
    ----------
    rate
        The measured hidden rate, in percent.
    min_rate
        The minimum the gate asked for, in percent.
    """

    def __init__(self, rate: float, min_rate: float) -> None:
        self.rate = rate
        self.min_rate = min_rate
        shown = decisive(rate, min_rate, 2, "f")
        super().__init__(f"hidden rate {shown} % is below the minimum of {exact(min_rate)} %")


@dataclass(frozen=True)
class CloakingSummary:
    """What a gate reports about per-record local cloaking.

    Attributes
    ----------
    n
        Number of original records.
    hidden_rate
        Percentage of records with ``local_cloaking > 0``.
    not_hidden
        Number of records with ``local_cloaking == 0``.
    local_cloaking_median, local_cloaking_q1, local_cloaking_q3
        Median and quartiles of the local cloaking.
    min_rate
        The minimum hidden rate asked for, or None for no gate.
    passed
        ``hidden_rate >= min_rate``; True when there is no gate.
    """

    n: int
    hidden_rate: float
    not_hidden: int
    local_cloaking_median: float
    local_cloaking_q1: float
    local_cloaking_q3: float
    min_rate: float | None
    passed: bool

    @property
    def not_hidden_share(self) -> float:
        """Percentage of records with ``local_cloaking == 0``."""
        return 100.0 * self.not_hidden / self.n

    def to_dict(self) -> dict[str, Any]:
        """The fields and ``not_hidden_share``, as plain Python values."""
        return {**asdict(self), "not_hidden_share": self.not_hidden_share}


def check_min_rate(min_rate: float | None, option: str = "min_rate") -> float | None:
    """``min_rate`` as a float, or a ValueError naming ``option`` unless it is None or a
    percentage in [0, 100]. A value in (0, 1] is refused: a fraction given for a percentage
    (0.9 for 90 %) would let almost any release pass."""
    if min_rate is None:
        return None
    return check_percentage(min_rate, option)


def summarize(
    per_record: pl.DataFrame | pl.LazyFrame, *, min_rate: float | None = None
) -> CloakingSummary:
    """Summarise the output of :func:`polars_hidden_rate.local_cloaking`.

    Reads only its ``local_cloaking`` column, so a per-record file written once
    can be summarised without counting again.

    Parameters
    ----------
    per_record
        A frame with a ``local_cloaking`` column, one row per original.
    min_rate
        The minimum hidden rate, in percent, that ``passed`` compares against;
        None for no gate.

    Returns
    -------
    CloakingSummary

    Examples
    --------
    >>> import polars as pl
    >>> from polars_hidden_rate.gate import summarize
    >>> summary = summarize(pl.DataFrame({"local_cloaking": [0, 3, 5, 10]}), min_rate=80)
    >>> summary.hidden_rate, summary.local_cloaking_median, summary.passed
    (75.0, 4.0, False)
    """
    threshold = check_min_rate(min_rate)
    cloaking = pl.col("local_cloaking")
    row = (
        as_lazy(per_record, "per_record")
        .select(
            n=pl.len(),
            missing=cloaking.null_count(),
            not_hidden=(cloaking == 0).sum(),
            median=cloaking.median(),
            q1=cloaking.quantile(0.25, interpolation="linear"),
            q3=cloaking.quantile(0.75, interpolation="linear"),
        )
        .collect()
        .row(0, named=True)
    )
    n = int(row["n"])
    if n == 0:
        msg = "there are no records to summarise"
        raise pl.exceptions.NoDataError(msg)
    if row["missing"]:
        msg = f"local_cloaking is null in {row['missing']} of {n} records: nothing to summarise"
        raise pl.exceptions.ComputeError(msg)
    rate = 100.0 * (n - int(row["not_hidden"])) / n
    return CloakingSummary(
        n=n,
        hidden_rate=rate,
        not_hidden=int(row["not_hidden"]),
        local_cloaking_median=float(row["median"]),
        local_cloaking_q1=float(row["q1"]),
        local_cloaking_q3=float(row["q3"]),
        min_rate=threshold,
        passed=threshold is None or rate >= threshold,
    )


def cloaking_summary(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    *,
    min_rate: float | None = None,
    **options: Unpack[CountOptions],
) -> CloakingSummary:
    """Count and summarise in one go: what :func:`summarize` gives on the output of
    :func:`polars_hidden_rate.local_cloaking`, value for value, at less cost.

    The counts are first capped at :data:`QUARTILE_CAP` (each record stops at that
    many rivals). The hidden rate needs only ``c_i > 0``; the quartiles are exact
    when every order statistic they interpolate lies below the cap
    (:func:`quartiles_below`). Otherwise the records are counted again in full, from
    the same read.
    """
    threshold = check_min_rate(min_rate)
    request = plan(originals, avatars, options, caller="cloaking_summary")
    check_output_free(request.originals.collect_schema())
    aligned = request.read()
    counts = request.counts(aligned, cap=QUARTILE_CAP)
    if not quartiles_below(counts, QUARTILE_CAP):
        counts = request.counts(aligned, consume=True)
    return summarize(pl.DataFrame({"local_cloaking": counts}), min_rate=threshold)


def quartiles_below(counts: CountArray, cap: int) -> bool:
    """Whether the quartiles of ``min(c, cap)`` are those of ``c``.

    Capping keeps the order, so the ``k``-th smallest capped count is the ``k``-th
    smallest count capped. The third quartile, the largest, interpolates between the
    order statistics at ``floor`` and ``ceil`` of ``0.75 (n - 1)`` (one more is checked,
    against any rounding of that position): when that one is below ``cap``, so are all
    those the quartiles use, and they are exact.
    """
    n = len(counts)
    if n == 0:
        return True
    k = min(n - 1, math.ceil(0.75 * (n - 1)) + 1)
    return bool(np.partition(counts, k)[k] < cap)


def assert_hidden_rate(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    min_rate: float = 90.0,
    **options: Unpack[CountOptions],
) -> float:
    """Raise :class:`HiddenRateTooLowError` when the hidden rate is below ``min_rate``.

    Parameters
    ----------
    originals, avatars
        As for :func:`polars_hidden_rate.hidden_rate`.
    min_rate
        The minimum hidden rate, in percent.
    **options
        The keyword options of :func:`polars_hidden_rate.hidden_rate`
        (``coords``, ``features``, ``ncp``, ``on``, ``tie_tol``, ...).

    Returns
    -------
    float
        The hidden rate, when it is at least ``min_rate``.

    Raises
    ------
    HiddenRateTooLowError
        When the hidden rate is below ``min_rate``; it carries ``.rate`` and
        ``.min_rate``.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0, 4.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 1.5, 3.0, 4.0]})
    >>> phr.assert_hidden_rate(originals, avatars, min_rate=20, coords="Dim1")
    25.0
    >>> phr.assert_hidden_rate(originals, avatars, min_rate=50, coords="Dim1")
    Traceback (most recent call last):
    ...
    polars_hidden_rate.gate.HiddenRateTooLowError: hidden rate 25.00 % is below the minimum of 50 %
    """
    threshold = check_min_rate(min_rate)
    if threshold is None:
        msg = "`min_rate` must be a percentage in [0, 100], got None"
        raise ValueError(msg)
    rate = hidden_rate(originals, avatars, **options)
    if rate < threshold:
        raise HiddenRateTooLowError(rate, threshold)
    return rate
