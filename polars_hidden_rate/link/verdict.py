"""What a verdict needs beside the counts: a link that carries something, and own copies.

The gates (`cloaking_summary`,
[`assert_hidden_rate`][polars_hidden_rate.assert_hidden_rate], ``hidden-rate check``) and the report
refuse to judge a release whose link looks random (`polars_hidden_rate.link.link_test`), or
that is linked by row order while both frames hold a column that is a key, or while both are
sorted on one feature and, within its equal values, the rows pair up no better than at random
(an ORDER BY on both files: the rows then pair up by that feature's rank, not by record); and
they count
the avatars identical to their own original on the raw features, and the records hidden
only through ties. Everything here comes from the read that the counts come from
(`judged`), so a lazy plan that reorders its rows cannot make two reads disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

import numpy as np
import polars as pl

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import check_flag, check_real, known, quoted
from polars_hidden_rate.engine import CountResult
from polars_hidden_rate.frames import Aligned
from polars_hidden_rate.link.errors import (
    AmbiguousLinkError,
    UnlinkedAvatarsError,
)
from polars_hidden_rate.link.link_test import LinkTest, link_test_of_sample, sampled_rows
from polars_hidden_rate.link.sets import (
    COPY_PREFIX,
    LinkedSets,
    compares_coordinates,
    copy_features,
    shared_keys,
)
from polars_hidden_rate.link.sorted import SortCheck, check_sorted_link
from polars_hidden_rate.progress import stage
from polars_hidden_rate.stats import percent

DEFAULT_MAX_OWN_COPIES = 10.0
"""Percent of avatars that may copy their own original: the method's row direct-match target
(row_direct_match_protection > 90)."""


class VerdictOptions(TypedDict, total=False):
    """The options of a verdict, beside the counting options.

    Attributes
    ----------
    allow_unlinked
        Measure even when the link looks random (research on shuffled data); default False:
        `UnlinkedAvatarsError`. What it measures never counts toward a pass.
    allow_sorted_link
        Judge a row-order link even when both frames are sorted on one feature and, within
        its equal values, the rows do not pair up as records; default False:
        `SortedLinkError`.
    by_row_order
        Link by row order even though both frames hold a column unique per row with the
        same values (a key); default False: `AmbiguousLinkError`. It contradicts a key
        (``on``, ``left_on``/``right_on``), and is refused beside one.
    max_own_copies
        The largest percentage of avatars identical to their own original that passes;
        default `DEFAULT_MAX_OWN_COPIES`, ``100`` disables it.
    """

    allow_unlinked: bool
    allow_sorted_link: bool
    by_row_order: bool
    max_own_copies: float


VERDICT_OPTION_NAMES = frozenset(VerdictOptions.__annotations__)
LINK_OVERRIDES = ("allow_unlinked", "allow_sorted_link", "by_row_order")
"""The verdict options that relax the link's checks, each alone (the provenance's words)."""


@dataclass(frozen=True)
class Verdict:
    """The checked verdict options."""

    allow_unlinked: bool = False
    by_row_order: bool = False
    max_own_copies: float = DEFAULT_MAX_OWN_COPIES
    allow_sorted_link: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The options as the provenance states them."""
        return {
            "allow_unlinked": self.allow_unlinked,
            "allow_sorted_link": self.allow_sorted_link,
            "by_row_order": self.by_row_order,
            "max_own_copies": self.max_own_copies,
        }

    @classmethod
    def of(cls, options: VerdictOptions) -> Verdict:
        limit = options.get("max_own_copies", DEFAULT_MAX_OWN_COPIES)
        return cls(
            allow_unlinked=check_flag(options.get("allow_unlinked", False), "allow_unlinked"),
            by_row_order=check_flag(options.get("by_row_order", False), "by_row_order"),
            max_own_copies=check_real(limit, "max_own_copies", low=0.0, high=100.0),
            allow_sorted_link=check_flag(
                options.get("allow_sorted_link", False), "allow_sorted_link"
            ),
        )


@dataclass(frozen=True)
class Evidence:
    """What the verdict knows beside the counts.

    Attributes
    ----------
    n
        Records.
    link
        The link test (``link.tested`` is False below 50 records).
    own_copies
        Avatars identical to their own original on every feature of ``copy_features``
        (nulls match nulls, NaN matches NaN, ``-0.0`` matches ``0.0``); None where they
        could not be compared (a cluster run on projected features).
    copy_features
        The raw features compared.
    hidden_by_ties_only
        Hidden records without any rival strictly closer than their own avatar (None when
        not counted).
    unseen_modalities
        Per categorical feature, the avatars whose value is none of the originals'
        modalities (more than half is refused when reading).
    sorted_link
        What the sorted-link rule saw, on a row-order link the link test passes (None
        otherwise).
    """

    n: int
    link: LinkTest
    own_copies: int | None
    copy_features: tuple[str, ...]
    hidden_by_ties_only: int | None = None
    unseen_modalities: Mapping[str, int] = field(default_factory=dict)
    sorted_link: SortCheck | None = None

    @property
    def own_copies_percent(self) -> float | None:
        if self.own_copies is None:
            return None
        return percent(self.own_copies, self.n) if self.n else 0.0

    def copies_exceed(self, limit: float | None) -> bool:
        """Whether more than ``limit`` percent of the avatars are their own original's copy:
        the rule of every verdict on own copies (``hidden-rate check``'s gate and the
        report's); False without a limit or where they were not compared."""
        shown = self.own_copies_percent
        return shown is not None and limit is not None and shown > limit

    def counted(self, result: CountResult) -> Evidence:
        """This evidence with the hidden records that no rival is strictly closer to than
        their avatar, from the flags of ``result`` (a count asked for them: ``closer``)."""
        closer = known(result.closer, "the flags of a count asked for them")
        ties_only = int(np.count_nonzero((result.counts > 0) & ~closer))
        return replace(self, hidden_by_ties_only=ties_only)

    def to_dict(self) -> dict[str, Any]:
        return {
            "own_copies": self.own_copies,
            "own_copies_percent": self.own_copies_percent,
            "hidden_by_ties_only": self.hidden_by_ties_only,
            "copy_features": list(self.copy_features),
            "unseen_modalities": dict(self.unseen_modalities),
            "link_test": self.link.to_dict(),
            "sorted_link": None if self.sorted_link is None else self.sorted_link.to_dict(),
        }


def check_link(request: LinkedSets, verdict: Verdict) -> None:
    """Refuse a link that the verdict cannot trust before anything is read: a row-order
    link while both frames hold a key (`check_row_order_link`), and ``by_row_order`` beside
    a key. The link's records are judged once read (`judge_link`)."""
    if verdict.by_row_order and not request.link.by_row_order:
        keys = ", ".join(map(repr, request.link.left))
        msg = (
            f"--by-row-order (by_row_order=True) links by row order, but a key is given "
            f"({keys}, --on / on=): give one or the other"
        )
        raise ValueError(msg)
    check_row_order_link(request, verdict)


def check_row_order_link(request: LinkedSets, verdict: Verdict) -> None:
    """Refuse a row-order link while both frames hold a key (`shared_keys`), unless
    ``by_row_order``; and even then a key that the projection would take for a feature (the
    features not named): a key is never projected, at any size."""
    if not request.link.by_row_order:
        return
    keys = shared_keys(request)
    if not keys:
        return
    name = keys[0]
    if not verdict.by_row_order:
        msg = (
            f"both frames hold {name!r}, unique per row: link by it with --on {quoted(name)} "
            f"(on={name!r}), or say --by-row-order (by_row_order=True)"
        )
        raise AmbiguousLinkError(msg, name)
    projection = request.projection
    projected = [
        k
        for k in keys
        if projection is not None and projection.defaulted and k in projection.features
    ]
    if projected:
        name = projected[0]
        msg = (
            f"feature {name!r} is unique per row in both frames, with the same values: it is a "
            "key, which is never projected; drop it, or name the features to project "
            "(--features, features=)"
        )
        raise AmbiguousLinkError(msg, name)


def judge_link(
    request: LinkedSets, verdict: Verdict, x: Float64Array, y: Float64Array, population: int
) -> tuple[LinkTest, SortCheck | None]:
    """The link test of ``population`` linked records, given the rows it compares (those of
    `sampled_rows`, in record order), and what the sorted-link rule saw; the one judge of
    every path (local, file by file, on a cluster).

    Raises
    ------
    UnlinkedAvatarsError
        When the link looks random, unless ``allow_unlinked``.
    SortedLinkError
        As `check_sorted_link` raises it.
    """
    test = link_test_of_sample(x, y, population)
    if not test.linked and not verdict.allow_unlinked:
        raise UnlinkedAvatarsError(unlinked_message(test, request), test)
    # A sort can only fool a test that passes: a refused link is never judged anyway.
    sort = None
    if test.linked:
        sort = check_sorted_link(request, x, y, population, allow=verdict.allow_sorted_link)
    return test, sort


@dataclass(frozen=True)
class JudgedRead:
    """A read the link's checks passed (`judged`): the linked arrays, and the evidence
    taken from that very read (``hidden_by_ties_only`` still None: `Evidence.counted`)."""

    aligned: Aligned
    evidence: Evidence


def judged(request: LinkedSets, verdict: Verdict, aligned: Aligned) -> JudgedRead:
    """Test the link and count own copies on ``aligned``, read with `copies_carried`;
    return it without the carried features, with its evidence. Raises as `judge_link`
    does. Everything comes from the read that the counts come from, so a lazy plan that
    reorders its rows cannot make two reads disagree."""
    with stage("link test and own copies", enabled=request.progress):
        x, y = aligned.originals, aligned.avatars
        population = len(x)
        rows = sampled_rows(population)
        if rows is not None:
            x, y = x[rows], y[rows]
        link, sort = judge_link(request, verdict, x, y, population)
        features = copy_features(request)
        names = [f"{COPY_PREFIX}{k}" for k in range(len(features))]
        own_copies = 0
        if compares_coordinates(request):
            same_rows = (aligned.originals == aligned.avatars).all(axis=1)
            own_copies = int(np.count_nonzero(same_rows))
        else:
            if names:
                same = pl.all_horizontal(
                    aligned.carried[name].eq_missing(aligned.carried_avatars[name])
                    for name in names
                )
                own_copies = int(pl.select(same.sum()).item())
            aligned = replace(
                aligned,
                carried=aligned.carried.drop(names, strict=False),
                carried_avatars=aligned.carried_avatars.drop(names, strict=False),
            )
    records = link.n if link.population is None else link.population
    evidence = Evidence(records, link, own_copies, tuple(features), None, aligned.unseen, sort)
    return JudgedRead(aligned, evidence)


def unlinked_message(test: LinkTest, request: LinkedSets, *, measured: bool = False) -> str:
    """Why a link looks random, with the figure and the way out (``measured``: why a gate
    that measured it anyway, with ``allow_unlinked``, does not pass it)."""
    how = (
        "by row order"
        if request.link.by_row_order
        else f"by key {', '.join(map(repr, request.link.left))}"
    )
    # A row-order link is one where the frames share no key (`check_row_order_link`): no
    # `on` to give, and a set that is not one avatar per original has the report.
    fix = (
        "the hidden rate needs one avatar per original: judge a synthetic set (CT-GAN, "
        "synthpop) with the report (hidden-rate report, privacy_report) on the measures "
        "that need no link, with a holdout (--holdout, holdout=)"
        if request.link.by_row_order
        else "check the key links each original to its own avatar"
    )
    way_out = (
        "measured with --allow-unlinked (allow_unlinked=True), it never passes a gate"
        if measured
        else "or --allow-unlinked (allow_unlinked=True) to measure it anyway"
    )
    return (
        f"the avatars do not look linked to the originals {how}: the own avatar is closer "
        f"than a random one for {test.closer_share:.1f} % of records (p = "
        f"{test.p_value:.2g}, n = {test.n}); {fix}, {way_out}"
    )
