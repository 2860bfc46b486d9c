"""Gates for pipelines: summarise per-record local cloaking, and fail below a minimum rate.

[`assert_hidden_rate`][polars_hidden_rate.assert_hidden_rate] stops a Python pipeline; the
``hidden-rate check`` command line does the same with an exit code, from
[`summarize`][polars_hidden_rate.measures.summary.summarize]. The summaries themselves live in
`polars_hidden_rate.measures.summary`.
"""

from __future__ import annotations

from typing import Unpack

import numpy as np
import polars as pl

from polars_hidden_rate.checks import known
from polars_hidden_rate.link.errors import UnlinkedAvatarsError
from polars_hidden_rate.link.verdict import (
    DEFAULT_MAX_OWN_COPIES,
    Verdict,
    check_link,
    unlinked_message,
)
from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.measures.summary import (
    CloakingSummary,
    check_min_rate,
    quartiles_below,
    summarize,
)
from polars_hidden_rate.plan import CountOptions, CountPlan, GateOptions, plan, split_options
from polars_hidden_rate.progress import renamed, stage
from polars_hidden_rate.provenance import Describing, frames_described, stated, with_fit
from polars_hidden_rate.stats import percent

__all__ = [
    "QUARTILE_CAP",
    "GateOptions",
    "HiddenRateTooLowError",
    "OwnCopiesError",
    "assert_hidden_rate",
    "checked_request",
    "cloaking_summary",
    "summarize_judged",
    "summary_run",
]

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
        self.own_copies_percent = percent(own_copies, n)
        self.max_own_copies = max_own_copies
        shown = decisive(self.own_copies_percent, max_own_copies, 2, "f")
        super().__init__(
            f"{own_copies} of {n} avatars ({shown} %) are identical to their own original, "
            f"above the maximum of {exact(max_own_copies)} %"
        )


def cloaking_summary(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    *,
    min_rate: float | None = None,
    allow_unlinked: bool = False,
    by_row_order: bool = False,
    max_own_copies: float = DEFAULT_MAX_OWN_COPIES,
    allow_sorted_link: bool = False,
    **options: Unpack[CountOptions],
) -> CloakingSummary:
    """Count and summarise in one go, with the verdict's evidence: what
    [`summarize`][polars_hidden_rate.measures.summary.summarize] gives on the output of
    [`polars_hidden_rate.local_cloaking`][polars_hidden_rate.local_cloaking], value for value, at
    less cost, and the link test, own copies and ties (docs/guarantees.md).

    The counts are first capped at `QUARTILE_CAP` (each record stops at that
    many rivals). The hidden rate needs only ``c_i > 0``; the quartiles are exact
    when every order statistic they interpolate lies below the cap
    (`quartiles_below`). Otherwise the records are counted again in full, from
    the same read.

    Parameters
    ----------
    allow_unlinked, by_row_order, max_own_copies, allow_sorted_link
        The verdict options (`VerdictOptions`).

    Raises
    ------
    UnlinkedAvatarsError
        When the link looks random (from 50 records), unless ``allow_unlinked``.
    AmbiguousLinkError
        When linked by row order while both frames hold a key column, unless
        ``by_row_order``.
    SortedLinkError
        When linked by row order while both frames are sorted on one feature and the rows
        pair up no better than at random within its values, unless ``allow_sorted_link``.
    """
    threshold = check_min_rate(min_rate)
    verdict = Verdict.of(
        {
            "allow_unlinked": allow_unlinked,
            "allow_sorted_link": allow_sorted_link,
            "by_row_order": by_row_order,
            "max_own_copies": max_own_copies,
        }
    )
    return summary_run(
        originals, avatars, options, verdict, min_rate=threshold, caller="cloaking_summary"
    )


def checked_request(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    verdict: Verdict,
    *,
    caller: str,
) -> CountPlan:
    """The request of a gate, planned once (`plan`), its projection fitted (the settings it
    resolved can then be stated, and the count uses that very fit), its link checked before
    anything is counted (`check_link`)."""
    request = with_fit(plan(originals, avatars, options, caller=caller))
    check_link(request, verdict)
    return request


def summary_run(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    verdict: Verdict,
    *,
    min_rate: float | None,
    caller: str,
    inputs: Describing = frames_described,
) -> CloakingSummary:
    """The gate's run, under `cloaking_summary` and ``hidden-rate check`` alike: the request
    planned and its link checked once (`checked_request`), counted and summarised
    (`summarize_judged`), with its provenance (`stated`: ``inputs`` as the caller describes
    them, the settings). ``min_rate`` comes checked."""
    with stage("planning", enabled=options.get("progress")):  # the schemas, the fit, the link
        request = checked_request(originals, avatars, options, verdict, caller=caller)
        described = inputs(request, None)
    summary, strategy = summarize_judged(request, verdict, min_rate=min_rate)
    # One avatar per original: the read the summary counts refuses any other link.
    block = stated(
        request,
        described({"originals": summary.n, "avatars": summary.n}),
        strategy=strategy,
        verdict=verdict,
        evidence=summary.evidence,
        min_rate=min_rate,
    )
    return summary.with_provenance(block)


def summarize_judged(
    request: CountPlan, verdict: Verdict, *, min_rate: float | None
) -> tuple[CloakingSummary, str | None]:
    """`cloaking_summary` of a planned request whose link `check_link` passed, its evidence
    taken from the read it counts (`CountPlan.read_judged`), and the strategy that counted."""
    read = request.read_judged(verdict)
    aligned = read.aligned
    # Counted in place (no copy of the coordinates), the arrays left for a count in full.
    result = request.result(
        aligned, cap=QUARTILE_CAP, overwrite_input=True, restore_order=True, closer=True
    )
    evidence = read.evidence.counted(result)
    counts = result.counts
    if not quartiles_below(counts, QUARTILE_CAP):
        with renamed("counting", "counting in full, for the quartiles"):
            counts = request.counts(aligned, overwrite_input=True)
    summary = summarize(
        pl.DataFrame({"local_cloaking": counts}),
        min_rate=min_rate,
        evidence=evidence,
        max_own_copies=verdict.max_own_copies,
    )
    return summary, result.strategy


def assert_hidden_rate(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    min_rate: float = 90.0,
    **options: Unpack[GateOptions],
) -> float:
    """Raise [`HiddenRateTooLowError`][polars_hidden_rate.HiddenRateTooLowError] when the hidden
    rate is below ``min_rate``, `OwnCopiesError` when more than ``max_own_copies`` percent of the
    avatars are identical to their own original.

    Parameters
    ----------
    originals, avatars
        As for [`polars_hidden_rate.hidden_rate`][polars_hidden_rate.hidden_rate].
    min_rate
        The minimum hidden rate, in percent.
    **options
        The keyword options of [`polars_hidden_rate.hidden_rate`][polars_hidden_rate.hidden_rate]
        (``coords``, ``features``, ``ncp``, ``on``, ``tie_tol``, ...), and the verdict
        options ``allow_unlinked``, ``allow_sorted_link``, ``by_row_order`` and
        ``max_own_copies`` (default 10) of `cloaking_summary`.

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
    UnlinkedAvatarsError
        When the link looks random (from 50 records), with ``allow_unlinked`` too: a hidden
        rate measured on such a link never passes.
    AmbiguousLinkError, SortedLinkError
        As `cloaking_summary` raises them.

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
    request = checked_request(originals, avatars, counting, verdict, caller="assert_hidden_rate")
    read = request.read_judged(verdict)
    test = read.evidence.link
    if not test.linked:  # measured with allow_unlinked: a refused link never passes
        message = unlinked_message(test, request, measured=True)
        raise UnlinkedAvatarsError(message, test)
    counts = request.counts(read.aligned, cap=1, overwrite_input=True)
    rate = percent(int(np.count_nonzero(counts)), len(counts))
    if rate < threshold:
        raise HiddenRateTooLowError(rate, threshold)
    copies = read.evidence.own_copies
    copies = known(copies, "the own copies, which a local read compares")
    if percent(copies, len(counts)) > verdict.max_own_copies:
        raise OwnCopiesError(copies, len(counts), verdict.max_own_copies)
    return rate
