"""Summaries of per-record local cloaking: the figures a gate reports, from a frame of counts,
from order statistics (the cluster's, without the counts in one place), and histograms.

The gates (`polars_hidden_rate.gate`, ``hidden-rate check``) and the dataset paths build
their verdicts on these; nothing here counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import polars as pl
from polars.exceptions import NoDataError

from polars_hidden_rate._types import CountArray
from polars_hidden_rate.checks import (
    InvariantError,
    check_confidence,
    check_count,
    check_percentage,
)
from polars_hidden_rate.frames import as_lazy
from polars_hidden_rate.link.verdict import Evidence
from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.stats import percent, wilson


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
        evidence was gathered, own copies at most ``max_own_copies`` and a link the link test
        does not refuse (measured with ``allow_unlinked`` on a refused link: never passes).
    evidence
        The link test, own copies and ties (`Evidence`),
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
    # What was measured, not a figure: two summaries of the same counts are equal (as reports are).
    provenance: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )

    @property
    def not_hidden_share(self) -> float:
        """Percentage of records with ``local_cloaking == 0``."""
        return percent(self.not_hidden, self.n)

    @property
    def failures(self) -> list[str]:
        """Why the gate fails, one reason a line; empty when it passes."""
        reasons = []
        if self.link_refused and self.evidence is not None:
            test = self.evidence.link
            reasons.append(
                f"the link test refuses the link (own avatar closer than a random one for "
                f"{test.closer_share:.1f} %, p = {test.p_value:.2g}): measured with "
                "--allow-unlinked (allow_unlinked=True), it never passes"
            )
        if self.min_rate is not None and self.hidden_rate < self.min_rate:
            reasons.append(
                f"hidden rate {decisive(self.hidden_rate, self.min_rate, 2, 'f')} % "
                f"< {exact(self.min_rate)} %"
            )
        if self.copies_fail:
            share = None if self.evidence is None else self.evidence.own_copies_percent
            if share is None or self.max_own_copies is None:
                raise InvariantError("own copies fail only with evidence and a limit")
            reasons.append(
                f"own copies {decisive(share, self.max_own_copies, 2, 'f')} % "
                f"> {exact(self.max_own_copies)} % (--max-own-copies)"
            )
        return reasons

    @property
    def copies_fail(self) -> bool:
        return self.evidence is not None and self.evidence.copies_exceed(self.max_own_copies)

    @property
    def link_refused(self) -> bool:
        """Whether the figures were measured on a link the link test refuses: they never pass."""
        return self.evidence is not None and not self.evidence.link.linked

    def judged(self) -> CloakingSummary:
        """The summary with ``passed`` as its evidence leaves it: the rate against
        ``min_rate``, own copies against ``max_own_copies``, and never on a refused link."""
        rate_passes = self.min_rate is None or self.hidden_rate >= self.min_rate
        return replace(self, passed=rate_passes and not self.copies_fail and not self.link_refused)

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
    """Summarise the output of
    [`polars_hidden_rate.local_cloaking`][polars_hidden_rate.local_cloaking].

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
    >>> from polars_hidden_rate.measures.summary import summarize
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
    rate = percent(n - int(row["not_hidden"]), n)
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
    return summary.judged()


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


def summary_from_order_statistics(
    n: int,
    not_hidden: int,
    order_statistic: Callable[[int], int],
    *,
    min_rate: float | None,
) -> CloakingSummary:
    """The summary of ``n`` counts, ``not_hidden`` of them zero, from their ``k``-th smallest.

    The quartiles interpolate linearly between the order statistics at ``floor`` and
    ``ceil`` of ``q (n - 1)``, as Polars' ``quantile(q, "linear")`` and ``median`` do, so
    the summary is [`summarize`][polars_hidden_rate.measures.summary.summarize]'s, value for
    value, without the counts in one place.

    Examples
    --------
    >>> counts = sorted([0, 3, 5, 10])
    >>> summary = summary_from_order_statistics(4, 1, counts.__getitem__, min_rate=80)
    >>> summary.hidden_rate, summary.local_cloaking_median, summary.passed
    (75.0, 4.0, False)
    """
    if n == 0:
        msg = "there are no records to summarise"
        raise NoDataError(msg)

    def quantile(q: float) -> float:
        position = q * (n - 1)
        low = math.floor(position)
        below = float(order_statistic(low))
        above = float(order_statistic(min(low + 1, n - 1)))
        return below + (above - below) * (position - low)

    rate = percent(n - not_hidden, n)
    return CloakingSummary(
        n=n,
        hidden_rate=rate,
        not_hidden=not_hidden,
        local_cloaking_median=quantile(0.5),
        local_cloaking_q1=quantile(0.25),
        local_cloaking_q3=quantile(0.75),
        min_rate=min_rate,
        passed=min_rate is None or rate >= min_rate,
    )


def histogram(counts: CountArray, bins: int) -> CountArray:
    """How many counts equal ``0, 1, ..., bins - 1``, then how many are ``bins`` or more."""
    return np.bincount(np.minimum(counts, bins), minlength=bins + 1).astype(np.int64)


def hidden_rate_interval(n_hidden: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a hidden rate, in percent.

    With ``z`` the normal quantile of ``(1 + confidence) / 2``, the bounds are
    ``(k + z²/2 ± z sqrt(k(n - k)/n + z²/4)) / (n + z²)`` for ``k = n_hidden``
    (`polars_hidden_rate.stats.wilson`, as the inference attack's rates). Unlike the
    normal approximation, it stays within [0, 100] and keeps its coverage at rates near 100;
    the bound at an end is that end exactly (100 when every record is hidden, 0 when none is).

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
