"""Gates for pipelines: summarise per-record local cloaking, and fail below a minimum rate.

:func:`assert_hidden_rate` stops a Python pipeline; the ``hidden-rate check``
command line does the same with an exit code, from :func:`summarize`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Unpack

import numpy as np
import polars as pl

from polars_hidden_rate._types import CountArray
from polars_hidden_rate.api import CountOptions, plan
from polars_hidden_rate.checks import check_percentage
from polars_hidden_rate.digits import decisive, exact
from polars_hidden_rate.frames import as_lazy
from polars_hidden_rate.verdict import (
    DEFAULT_MAX_OWN_COPIES,
    Evidence,
    Inspector,
    Verdict,
    VerdictOptions,
    split_options,
)

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


class OwnCopiesError(AssertionError):
    """More avatars than a gate allows are identical to their own original.

    Attributes
    ----------
    own_copies_percent
        The percentage of avatars identical to their own original on the raw features.
    max_own_copies
        The most the gate allowed, in percent.
    """

    def __init__(self, own_copies: int, n: int, max_own_copies: float) -> None:
        self.own_copies = own_copies
        self.own_copies_percent = 100.0 * own_copies / n
        self.max_own_copies = max_own_copies
        super().__init__(
            f"{own_copies} of {n} avatars ({self.own_copies_percent:.2f} %) are identical to "
            f"their own original, above the maximum of {max_own_copies:g} %"
        )


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
        ``hidden_rate >= min_rate`` (True when there is no ``min_rate``) and, when the
        evidence was gathered, own copies at most ``max_own_copies``.
    evidence
        The link test, own copies and ties (:class:`~polars_hidden_rate.verdict.Evidence`),
        or None where they were not gathered (a summary of a written file, a cluster run).
    max_own_copies
        The most own copies the gate allows, in percent (None: not gated).
    provenance
        What was measured, and how: inputs, settings, versions (filled by the caller).
    """

    n: int
    hidden_rate: float
    not_hidden: int
    local_cloaking_median: float
    local_cloaking_q1: float
    local_cloaking_q3: float
    min_rate: float | None
    passed: bool
    evidence: Evidence | None = None
    max_own_copies: float | None = None
    provenance: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def not_hidden_share(self) -> float:
        """Percentage of records with ``local_cloaking == 0``."""
        return 100.0 * self.not_hidden / self.n

    @property
    def failures(self) -> list[str]:
        """Why the gate fails, one reason a line; empty when it passes."""
        reasons = []
        if self.min_rate is not None and self.hidden_rate < self.min_rate:
            reasons.append(
                f"hidden rate {decisive(self.hidden_rate, self.min_rate, 2, 'f')} % "
                f"< {exact(self.min_rate)} %"
            )
        if self.copies_fail:
            assert self.evidence is not None
            assert self.max_own_copies is not None
            reasons.append(
                f"own copies {self.evidence.own_copies_percent:.2f} % "
                f"> {self.max_own_copies:g} % (--max-own-copies)"
            )
        return reasons

    @property
    def copies_fail(self) -> bool:
        percent = None if self.evidence is None else self.evidence.own_copies_percent
        return (
            percent is not None
            and self.max_own_copies is not None
            and percent > self.max_own_copies
        )

    def with_provenance(self, provenance: Mapping[str, Any]) -> CloakingSummary:
        return replace(self, provenance=MappingProxyType(dict(provenance)))

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain Python values (the keys: docs/cli.md)."""
        evidence = (
            self.evidence.to_dict()
            if self.evidence is not None
            else {
                "own_copies": None,
                "own_copies_percent": None,
                "hidden_by_ties_only": None,
                "copy_features": None,
                "unseen_modalities": None,
                "link_test": None,
            }
        )
        return {
            "n": self.n,
            "hidden_rate": self.hidden_rate,
            "not_hidden": self.not_hidden,
            "not_hidden_share": self.not_hidden_share,
            "local_cloaking_median": self.local_cloaking_median,
            "local_cloaking_q1": self.local_cloaking_q1,
            "local_cloaking_q3": self.local_cloaking_q3,
            "min_rate": self.min_rate,
            "max_own_copies": self.max_own_copies,
            **evidence,
            "passed": self.passed,
            "failures": self.failures,
            "provenance": dict(self.provenance),
        }


def check_min_rate(min_rate: float | None, option: str = "min_rate") -> float | None:
    """``min_rate`` as a float, or a ValueError naming ``option`` unless it is None or a
    percentage in [0, 100]. A value in (0, 1] is refused: a fraction given for a percentage
    (0.9 for 90 %) would let almost any release pass."""
    if min_rate is None:
        return None
    return check_percentage(min_rate, option)


def summarize(
    per_record: pl.DataFrame | pl.LazyFrame,
    *,
    min_rate: float | None = None,
    evidence: Evidence | None = None,
    max_own_copies: float | None = None,
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
    evidence, max_own_copies
        The verdict's evidence gathered with the counts, and the most own copies that
        pass, in percent (None: not gated).

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
    summary = CloakingSummary(
        n=n,
        hidden_rate=rate,
        not_hidden=int(row["not_hidden"]),
        local_cloaking_median=float(row["median"]),
        local_cloaking_q1=float(row["q1"]),
        local_cloaking_q3=float(row["q3"]),
        min_rate=threshold,
        passed=threshold is None or rate >= threshold,
        evidence=evidence,
        max_own_copies=max_own_copies,
    )
    return replace(summary, passed=summary.passed and not summary.copies_fail)


def cloaking_summary(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    *,
    min_rate: float | None = None,
    allow_unlinked: bool = False,
    by_row_order: bool = False,
    max_own_copies: float = DEFAULT_MAX_OWN_COPIES,
    **options: Unpack[CountOptions],
) -> CloakingSummary:
    """Count and summarise in one go, with the verdict's evidence: what :func:`summarize`
    gives on the output of :func:`polars_hidden_rate.local_cloaking`, value for value, at
    less cost, and the link test, own copies and ties (docs/guarantees.md).

    The counts are first capped at :data:`QUARTILE_CAP` (each record stops at that
    many rivals). The hidden rate needs only ``c_i > 0``; the quartiles are exact
    when every order statistic they interpolate lies below the cap
    (:func:`quartiles_below`). Otherwise the records are counted again in full, from
    the same read.

    Parameters
    ----------
    allow_unlinked, by_row_order, max_own_copies
        The verdict options (:class:`~polars_hidden_rate.verdict.VerdictOptions`).

    Raises
    ------
    UnlinkedAvatarsError
        When the link looks random (from 50 records), unless ``allow_unlinked``.
    AmbiguousLinkError
        When linked by row order while both frames hold a key column, unless
        ``by_row_order``.
    """
    threshold = check_min_rate(min_rate)
    verdict = Verdict.of(
        {
            "allow_unlinked": allow_unlinked,
            "by_row_order": by_row_order,
            "max_own_copies": max_own_copies,
        }
    )
    request = plan(originals, avatars, options, caller="cloaking_summary")
    return summarize_inspected(Inspector.start(request, verdict), min_rate=threshold)


def summarize_inspected(inspector: Inspector, *, min_rate: float | None) -> CloakingSummary:
    """:func:`cloaking_summary` of a planned request, its evidence taken by ``inspector``."""
    request = inspector.request
    aligned = inspector.read()
    closer = np.zeros(len(aligned.originals), dtype=bool)
    counts = request.counts(aligned, cap=QUARTILE_CAP, closer=closer)
    inspector.after(counts, closer)
    if not quartiles_below(counts, QUARTILE_CAP):
        counts = request.counts(aligned, consume=True)
    return summarize(
        pl.DataFrame({"local_cloaking": counts}),
        min_rate=min_rate,
        evidence=inspector.evidence(),
        max_own_copies=inspector.verdict.max_own_copies,
    )


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


class GateOptions(CountOptions, VerdictOptions, total=False):
    """The counting options and the verdict options, as :func:`assert_hidden_rate` takes them."""


def assert_hidden_rate(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    min_rate: float = 90.0,
    **options: Unpack[GateOptions],
) -> float:
    """Raise :class:`HiddenRateTooLowError` when the hidden rate is below ``min_rate``,
    :class:`OwnCopiesError` when more than ``max_own_copies`` percent of the avatars are
    identical to their own original.

    Parameters
    ----------
    originals, avatars
        As for :func:`polars_hidden_rate.hidden_rate`.
    min_rate
        The minimum hidden rate, in percent.
    **options
        The keyword options of :func:`polars_hidden_rate.hidden_rate`
        (``coords``, ``features``, ``ncp``, ``on``, ``tie_tol``, ...), and the verdict
        options ``allow_unlinked``, ``by_row_order`` and ``max_own_copies`` (default 10)
        of :func:`cloaking_summary`.

    Returns
    -------
    float
        The hidden rate, when it is at least ``min_rate``.

    Raises
    ------
    HiddenRateTooLowError
        When the hidden rate is below ``min_rate``; it carries ``.rate`` and
        ``.min_rate``.
    OwnCopiesError
        When own copies exceed ``max_own_copies``.
    UnlinkedAvatarsError, AmbiguousLinkError
        As :func:`cloaking_summary` raises them.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0, 4.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 1.5, 3.1, 4.2]})
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
    counting, verdict = split_options(options)
    request = plan(originals, avatars, counting, caller="assert_hidden_rate")
    inspector = Inspector.start(request, verdict)
    counts = request.counts(inspector.read(), cap=1, consume=True)
    rate = 100.0 * int(np.count_nonzero(counts)) / len(counts)
    if rate < threshold:
        raise HiddenRateTooLowError(rate, threshold)
    copies = inspector.evidence().own_copies
    assert copies is not None  # a local read compares them
    if 100.0 * copies / len(counts) > verdict.max_own_copies:
        raise OwnCopiesError(copies, len(counts), verdict.max_own_copies)
    return rate
