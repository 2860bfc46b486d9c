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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import numpy as np
import polars as pl
from polars.exceptions import ComputeError

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.checks import check_flag, check_real, known, quoted
from polars_hidden_rate.engine import CountResult
from polars_hidden_rate.frames import RESERVED_PREFIX, Aligned, Link, common_feature_type, is_text
from polars_hidden_rate.link.link_test import (
    ALPHA,
    MIN_GROUP,
    MIN_RECORDS,
    LinkTest,
    link_test_of_sample,
    link_test_within,
    sampled_rows,
)
from polars_hidden_rate.progress import stage

if TYPE_CHECKING:
    from polars_hidden_rate.projection import ProjectedCoordinates

DEFAULT_MAX_OWN_COPIES = 10.0
"""Percent of avatars that may copy their own original: the method's row direct-match target
(row_direct_match_protection > 90)."""

_COPY = f"{RESERVED_PREFIX}_copy"


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


class UnlinkedAvatarsError(ComputeError):
    """The avatars do not look linked to the originals: the link test cannot reject a
    random link. ``.test`` holds the `LinkTest`."""

    def __init__(self, message: str, test: LinkTest) -> None:
        super().__init__(message)
        self.test = test


class AmbiguousLinkError(ComputeError):
    """Linked by row order while both frames hold a key column (``.column``)."""

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column


class SortedLinkError(ComputeError):
    """Linked by row order while both frames are sorted on one feature (``.column``) and,
    within its equal values, the rows pair up no better than at random (``.test``, the link
    test within them): the rows may pair up by that feature's rank rather than by record."""

    def __init__(self, message: str, column: str, test: LinkTest | None = None) -> None:
        super().__init__(message)
        self.column = column
        self.test = test


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


class LinkedSets(Protocol):
    """What the link's checks read of a request (`polars_hidden_rate.plan.CountPlan` is one):
    the two sets, their link, the compared columns."""

    @property
    def originals(self) -> pl.LazyFrame: ...

    @property
    def avatars(self) -> pl.LazyFrame: ...

    @property
    def link(self) -> Link: ...

    @property
    def coords(self) -> list[str]: ...

    @property
    def given_coords(self) -> tuple[str, ...]: ...

    @property
    def projection(self) -> ProjectedCoordinates | None: ...

    @property
    def progress(self) -> bool | None: ...


@dataclass(frozen=True)
class SortCheck:
    """What the sorted-link rule saw of a row-order link the link test passes
    (`check_sorted_link`).

    Attributes
    ----------
    checked
        False where ``allow_sorted_link`` said not to look.
    column, direction
        The compared feature both frames are sorted on (``"ascending"`` or
        ``"descending"``), None where none is.
    within
        The link test within that feature's equal values (`link_test_within`).
    """

    checked: bool
    column: str | None = None
    direction: str | None = None
    within: LinkTest | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "column": self.column,
            "direction": self.direction,
            "within": None if self.within is None else self.within.to_dict(),
        }


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
        # As `measures.stats.percent`: the product first.
        return 100.0 * self.own_copies / self.n if self.n else 0.0

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


def compares_coordinates(request: LinkedSets) -> bool:
    """Whether own copies are compared on the coordinate arrays themselves: no projection,
    and every given coordinate is counted on (float64 holds each exactly, as the read checks)."""
    return request.projection is None and list(request.given_coords) == request.coords


def copy_features(request: LinkedSets) -> list[str]:
    """The columns own copies are compared on: the projected features (raw values), or
    every ``coords`` column given (also those past ``ncp``)."""
    if request.projection is not None:
        return list(request.projection.features)
    return list(request.given_coords)


def copy_columns(
    request: LinkedSets, features: Sequence[str]
) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """The raw ``features`` of each side, in the type both are compared in."""
    left = request.originals.collect_schema()
    right = request.avatars.collect_schema()
    sides: tuple[list[pl.Expr], list[pl.Expr]] = ([], [])
    for k, name in enumerate(features):
        common = common_feature_type(name, left[name], right[name])
        for side in sides:
            column = pl.col(name) if common is None else pl.col(name).cast(common)
            side.append(column.alias(f"{_COPY}{k}"))
    return sides


def copy_fingerprints(request: LinkedSets) -> tuple[pl.Expr, pl.Expr]:
    """Per side, a 64-bit hash of each record's raw copy features (`copy_features`) in the
    type both are compared in: where the raw features never meet (the cluster's link buckets
    hold coordinates), an own copy is a record whose coordinates and hash both equal its
    avatar's. A copy is always counted; a record that is not one is counted only when its
    coordinates and its hash both collide with its avatar's (a chance of 2^-64 at most)."""
    left, right = copy_columns(request, copy_features(request))
    return pl.struct(left).hash(seed=0), pl.struct(right).hash(seed=0)


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


def shared_keys(request: LinkedSets) -> list[str]:
    """The columns of both frames that are a key: integer or text, unique per row, without
    nulls, holding the same values in both frames."""
    left, right = request.originals.collect_schema(), request.avatars.collect_schema()
    candidates = [
        name
        for name in left.names()
        if name in right and all(s[name].is_integer() or is_text(s[name]) for s in (left, right))
    ]
    if not candidates:
        return []

    def unique(frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.select(
            (
                (pl.col(c).n_unique() == pl.len()) & (pl.col(c).null_count() == 0) & (pl.len() > 1)
            ).alias(c)
            for c in candidates
        )

    flags = pl.collect_all([unique(request.originals), unique(request.avatars)])
    keys = [c for c in candidates if flags[0][c].item() and flags[1][c].item()]
    total = request.originals.select(pl.len()).collect().item() if keys else 0
    found = []
    for name in keys:
        common = common_feature_type(name, left[name], right[name])
        values = [pl.col(name) if common is None else pl.col(name).cast(common)]
        shared = (
            request.originals.select(values)
            .join(request.avatars.select(values), on=name, how="semi")
            .select(pl.len())
            .collect()
            .item()
        )
        if shared == total:
            found.append(name)
    return found


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


def _orderable(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() or dtype.is_temporal() or is_text(dtype) or dtype == pl.Boolean


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
    sort = check_sorted_link(request, verdict, x, y, population) if test.linked else None
    return test, sort


def shared_sorts(request: LinkedSets) -> list[tuple[str, str]]:
    """The compared features (a projected feature, or a coordinate) both frames are sorted on
    in one direction (their non-null values monotone), each with that direction, where a file
    in random order would be so sorted with a chance of at most `ALPHA` in each frame:
    ``2 * prod(m_v!) / n!`` for ``n`` non-null values of which ``m_v`` equal ``v`` (a feature
    of few values, or all but one alike, is not taken as sorted on purpose)."""
    left, right = request.originals.collect_schema(), request.avatars.collect_schema()
    features = [
        name
        for name in dict.fromkeys(copy_features(request))
        if name in left and name in right and _orderable(left[name]) and _orderable(right[name])
    ]
    if not features:
        return []

    def monotone(frame: pl.LazyFrame, schema: pl.Schema) -> pl.LazyFrame:
        exprs = []
        for k, name in enumerate(features):
            v = _sort_value(name, schema).drop_nulls()
            several = v.n_unique() > 1
            exprs.append(((v >= v.shift(1)).all() & several).alias(f"up{k}"))
            exprs.append(((v <= v.shift(1)).all() & several).alias(f"down{k}"))
        return frame.select(exprs)

    flags = pl.collect_all([monotone(request.originals, left), monotone(request.avatars, right)])
    found = []
    for k, name in enumerate(features):
        for way, words in (("up", "ascending"), ("down", "descending")):
            if not (flags[0][f"{way}{k}"].item() and flags[1][f"{way}{k}"].item()):
                continue
            if all(
                _sorted_by_chance(frame, _sort_value(name, schema).drop_nulls()) <= math.log(ALPHA)
                for frame, schema in ((request.originals, left), (request.avatars, right))
            ):
                found.append((name, words))
                break
    return found


def check_sorted_link(
    request: LinkedSets, verdict: Verdict, x: Float64Array, y: Float64Array, population: int
) -> SortCheck | None:
    """Refuse a row-order link while both frames are sorted on one feature (`shared_sorts`),
    unless the sort cannot have made the pairing; unless ``allow_sorted_link``. ``x``, ``y``:
    the records the link test compares (the rows of `sampled_rows` of ``population``, in
    record order).

    An ORDER BY on both files pairs the rows by that feature's rank, and the link test passes
    such a pairing (the own avatar shares the rank, hence is close on that feature). A real
    row-order link escapes it two ways. Where the avatars move off their records' values,
    the avatars are not sorted even where the originals are. Where the avatars keep them (a
    site, a category), each row's avatar holds its original's value, and within each value
    the rows still pair up record by record; a sort alone pairs them at random there. So a
    shared sort is refused unless every row's two values are equal (nulls alike) and the
    link test within each value (`link_test_within`) finds a link, from `MIN_RECORDS`
    records of values held by `MIN_GROUP` rows or more (a feature of distinct values, as a
    float, never shows one).

    Raises
    ------
    SortedLinkError
        Naming the first such feature (with the test within its values, where it ran).
    """
    if not request.link.by_row_order:
        return None
    if verdict.allow_sorted_link:
        return SortCheck(checked=False)
    checks = []
    for name, words in shared_sorts(request):
        if not _values_kept(request, name):
            raise SortedLinkError(_sorted_message(name, words, None), name)
        within = link_test_within(x, y, _values_of(request, name, population), population)
        if not (within.tested and within.p_value <= ALPHA):
            raise SortedLinkError(_sorted_message(name, words, within), name, within)
        checks.append(SortCheck(True, name, words, within))
    return checks[0] if checks else SortCheck(checked=True)


def _sorted_message(name: str, words: str, within: LinkTest | None) -> str:
    if within is None:
        why = "and some avatars do not hold their own row's value of it"
    elif within.tested:
        why = (
            f"and within its values the rows pair up no better than at random (own avatar "
            f"closer than another of the same value for {within.closer_share:.1f} %, "
            f"p = {within.p_value:.2g}, n = {within.n})"
        )
    else:
        why = (
            f"and {within.n} records share their value with {MIN_GROUP - 1} others or more, too "
            f"few to tell a link within its values ({MIN_RECORDS} needed)"
        )
    return (
        f"both frames are sorted on {name!r} ({words}) {why}: linked by row order, the rows "
        f"may pair up by {name!r} alone, not by record; link by a key with --on (on=), or "
        "--allow-sorted-link (allow_sorted_link=True) to measure it anyway"
    )


def _sort_value(name: str, schema: pl.Schema) -> pl.Expr:
    column = pl.col(name)
    if schema[name] in (pl.Categorical, pl.Enum):
        column = column.cast(pl.String)
    return column


def _values_kept(request: LinkedSets, name: str) -> bool:
    """Whether every row's avatar holds its original's value of ``name`` (nulls alike, NaN
    alike), in the type both are compared in."""
    left, right = copy_columns(request, [name])
    both = pl.concat(
        [request.originals.select(left[0].alias("o")), request.avatars.select(right[0].alias("a"))],
        how="horizontal",
    )
    return bool(both.select(pl.col("o").eq_missing(pl.col("a")).all()).collect().item())


def _values_of(request: LinkedSets, name: str, population: int) -> IndexArray:
    """Per record the link test compares, the label of its original's value of ``name``
    (nulls alike), numbered in order of first appearance."""
    rows = sampled_rows(population)
    schema = request.originals.collect_schema()
    side = request.originals.select(_sort_value(name, schema).alias("v"))
    if rows is not None:
        index = pl.Series(rows, dtype=pl.UInt64)
        side = side.with_row_index("row").filter(pl.col("row").is_in(index)).drop("row")
    groups = (
        side.with_row_index("row")
        .group_by("v", maintain_order=True)
        .agg("row")
        .with_row_index("label")
        .explode("row")
        .collect()
    )
    labels = np.empty(groups.height, dtype=np.int64)
    labels[groups["row"].to_numpy()] = groups["label"].to_numpy()
    return labels


def _sorted_by_chance(frame: pl.LazyFrame, values: pl.Expr) -> float:
    """The log of the chance that ``values`` in random order are monotone (either way)."""
    counts = frame.select(values.value_counts().struct.field("count")).collect().to_series()
    n = int(counts.sum())
    ways = sum(math.lgamma(int(m) + 1) for m in counts) - math.lgamma(n + 1)
    return math.log(2.0) + ways


@dataclass(frozen=True)
class JudgedRead:
    """A read the link's checks passed (`judged`): the linked arrays, and the evidence
    taken from that very read (``hidden_by_ties_only`` still None: `Evidence.counted`)."""

    aligned: Aligned
    evidence: Evidence


def copies_carried(request: LinkedSets) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """The raw features each side carries through the read for `judged` (none when the
    coordinate arrays themselves are compared)."""
    if compares_coordinates(request):
        return [], []
    return copy_columns(request, copy_features(request))


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
        names = [f"{_COPY}{k}" for k in range(len(features))]
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
