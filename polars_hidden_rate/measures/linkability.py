"""anonymeter's linkability attack, with its control: can the synthetic set link two halves
of a real record that an attacker holds apart?

The attacker holds two tables of the same people, one with the columns ``A``, the other
with ``B``, and the synthetic set. For a target (a real record), it takes the
``n_neighbors`` synthetic records nearest to the target on ``A``, and those nearest on
``B``: when the two sets share a record, the target's halves are linked (anonymeter's
``LinkabilityEvaluator``, Giomi et al., PoPETs 2023). Run against the originals (the
generator's training records) and against a holdout of the same population (the
control), the excess of the first success over the second is what the synthetic set gives
away about its own training records.

- **Every record** of the originals and of the holdout is attacked (anonymeter samples
  ``n_attacks``, 500 by default); each share is over its own set's size.
- **Ties are shared.** Where several synthetic records tie at the ``k``-th distance
  (``k = n_neighbors``), which of them fill the last places of the ``k`` nearest is drawn
  at random, on ``A`` and on ``B`` apart, and the target's success is the probability that
  the two sets then meet: exact, from the counts of the records certainly among the
  nearest (``C``) and tied at the edge (``T``) on each side and of their overlaps, a sum
  of hypergeometric terms in integers, whatever the records' order (anonymeter takes
  whichever its unstable sort puts first). A record ties at the edge when its distance
  (``d2`` in the projected space, the distance in anonymeter's) lies within a factor ``1 +
  tie_tol`` of the ``k``-th's, either side; one below that is certainly in. Where no record
  ties at the edge, the success is anonymeter's 0 or 1.
- **Rates and risk** as for the inference attack: Wilson's centres at the smaller set's
  size and each set's own error at ``confidence``
  (`polars_hidden_rate.stats.compared_rates`), the risk ``(attack - control) / (1 -
  control)`` with its first-order error, both cut to [0, 1]
  (`polars_hidden_rate.stats.residual_risk`).

The searches are the engine's exact k-nearest search
(`polars_hidden_rate.engine.nearest.k_nearest`), a kd-tree of the synthetic records pruned
by bounds that never exceed a record's float64 distance, so every record tied at the edge
is found: in the projected space the float64 ``d2`` of the engine (squared differences
summed in column order, the arrays of one side at one power-of-two scale), in anonymeter's
the floats of its own loop (`polars_hidden_rate.measures.gower`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Unpack

import numpy as np
import polars as pl
from polars.exceptions import DuplicateError, NoDataError

from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.checks import AllComponents, check_confidence, check_count, check_tie_tol
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import (
    K_NEAREST_WALKS,
    Joint,
    KNearest,
    TreeSearch,
    distinct_groups,
    query_blocks,
)
from polars_hidden_rate.engine.scale import canonical_scale
from polars_hidden_rate.frames import ColumnSpec, as_lazy, resolve_columns
from polars_hidden_rate.measures.gower import (
    GowerColumns,
    Space,
    check_space,
    gower_search,
    refuse_projection_options,
)
from polars_hidden_rate.measures.holdout import check_holdout, holdout_plan
from polars_hidden_rate.measures.inference import SuccessRate, attack_against_control
from polars_hidden_rate.plan import CountOptions
from polars_hidden_rate.progress import Progress, stage
from polars_hidden_rate.stats import percent


def link_chances(sides: Sequence[KNearest], k: int, joint: Joint) -> Float64Array:
    """Each target's probability that its ``k`` nearest on ``A`` and on ``B`` share a
    record, the places at each edge filled at random among the tied: 1 when the certain
    sets meet; else one minus the chance that ``A``'s random fill avoids ``B``'s certain
    records and ``B``'s then avoids all of ``A``'s, a hypergeometric sum in integers.
    ``sides``: the searches on ``A`` and on ``B``, among the synthetic records grouped by
    their identical rows on each side (``joint``, `grouped_searches`)."""
    a, b = sides
    certain_a, certain_b = a.counts(a.certain), b.counts(b.certain)
    tied_a, tied_b = a.counts() - certain_a, b.counts() - certain_b
    left_a, left_b = k - certain_a, k - certain_b
    # The records both sides found for a target, by how each side holds them.
    # Certain on both (surely linked), A's tied records B holds surely, tied on both sides,
    # A's certain records among B's tied.
    shared = a.joint_overlaps(b, joint)
    sure, met = shared[:, 0] > 0, shared.sum(axis=1) > 0
    into_b, both, from_a = shared[:, 1], shared[:, 2], shared[:, 3]
    # Where neither side draws (every tied record fills a place), the sets meet or not.
    drawn = ~sure & ((tied_a != left_a) | (tied_b != left_b))
    chances = np.where(met, 1.0, 0.0)
    for i in np.flatnonzero(drawn):
        ta, tb, ra, rb = int(tied_a[i]), int(tied_b[i]), int(left_a[i]), int(left_b[i])
        tied, sure_b, sure_a = int(both[i]), int(into_b[i]), int(from_a[i])
        rest = ta - tied - sure_b  # A's tied records on neither of B's lists
        missed = sum(
            math.comb(tied, x) * math.comb(rest, ra - x) * math.comb(tb - sure_a - x, rb)
            for x in range(min(tied, ra) + 1)
        )
        chances[i] = float(1 - Fraction(missed, math.comb(ta, ra) * math.comb(tb, rb)))
    return chances


@dataclass(frozen=True)
class LinkabilityRisk:
    """anonymeter's linkability attack on a synthetic set, with the holdout as its control.

    Attributes
    ----------
    risk
        ``(members.rate - control.rate) / (1 - control.rate)``, cut to [0, 1]: 0 when the
        synthetic set links the halves of its training records no better than those of any
        record of the population.
    risk_interval
        The risk plus and minus its propagated error, cut to [0, 1] (also `interval`).
    members, control
        The attack's success on the originals and on the holdout (`SuccessRate`).
    members_success, control_success
        Each target's chance of a link (0 or 1 unless records tie at the edge), in its
        set's order.
    synthetic
        The size of the synthetic set.
    aux_cols
        The attacker's two sets of columns, ``A`` and ``B``.
    n_neighbors
        How many nearest synthetic records each side keeps (at most the synthetic set's
        size).
    space
        ``"projected"`` or ``"gower"``.
    confidence
        The level of the rates' errors and of ``risk_interval``.
    tie_tol
        The relative tolerance within which a record ties at the edge.
    """

    risk: float
    risk_interval: tuple[float, float]
    members: SuccessRate
    control: SuccessRate
    members_success: Float64Array
    control_success: Float64Array
    synthetic: int
    aux_cols: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    n_neighbors: int = 1
    space: Space = "projected"
    confidence: float = 0.95
    tie_tol: float = 1e-9

    @property
    def interval(self) -> tuple[float, float]:
        """`risk_interval`: the risk plus and minus its error, cut to [0, 1]."""
        return self.risk_interval

    @classmethod
    def of_shares(
        cls,
        members_success: Float64Array,
        control_success: Float64Array,
        synthetic: int,
        *,
        confidence: float = 0.95,
        n_neighbors: int = 1,
        tie_tol: float = 1e-9,
    ) -> LinkabilityRisk:
        """From each target's chance of a link, in the originals and the holdout."""
        attack, control, risk, interval = attack_against_control(
            members_success, control_success, confidence, "linked every record"
        )
        return cls(
            risk,
            interval,
            attack,
            control,
            members_success,
            control_success,
            synthetic,
            n_neighbors=n_neighbors,
            confidence=confidence,
            tie_tol=tie_tol,
        )

    @classmethod
    def of_arrays(
        cls,
        sides: Sequence[tuple[Float64Array, Float64Array, Float64Array]],
        *,
        n_neighbors: int = 1,
        tie_tol: float = 1e-9,
        confidence: float = 0.95,
        threads: int | None = None,
        bar: Progress | None = None,
    ) -> LinkabilityRisk:
        """The attack in coordinate arrays: ``sides`` holds, for ``A`` and for ``B``, the
        (originals, synthetic, holdout) coordinates of that side's space; each side is
        brought to one power-of-two scale, the squared distances are the engine's."""
        check_confidence(confidence)
        k = _neighbours(n_neighbors)
        scaled = [
            canonical_scale(synthetic, originals, holdout, tie_tol=tie_tol)[0]
            for originals, synthetic, holdout in sides
        ]
        synthetic = len(scaled[0][0])
        k = min(k, synthetic)
        threads = threads or usable_cores()
        joint, grouped = _grouped([side[0] for side in scaled])
        trees = [KdTree.build(points, threads=threads) for points, _ in grouped]
        members, control = (
            _chances(
                [
                    TreeSearch(tree, side[t], threads, copies=copies)
                    for tree, side, (_, copies) in zip(trees, scaled, grouped, strict=True)
                ],
                len(scaled[0][t]),
                k,
                joint,
                tie_tol,
                bar,
            )
            for t in (1, 2)
        )
        return cls.of_shares(
            members, control, synthetic, confidence=confidence, n_neighbors=k, tie_tol=tie_tol
        )

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON values (the report's ``linkability``): ``risk``,
        ``risk_interval``, ``confidence``, ``members`` and ``control`` (`SuccessRate.to_dict`),
        ``synthetic``, ``aux_cols`` (``[A, B]``), ``n_neighbors``, ``space``, ``tie_tol``."""
        low, high = self.risk_interval
        return {
            "risk": self.risk,
            "risk_interval": [low, high],
            "confidence": self.confidence,
            "members": self.members.to_dict(),
            "control": self.control.to_dict(),
            "synthetic": self.synthetic,
            "aux_cols": [list(side) for side in self.aux_cols],
            "n_neighbors": self.n_neighbors,
            "space": self.space,
            "tie_tol": self.tie_tol,
        }

    def rows(self) -> list[tuple[str, str]]:
        """The attack as (label, value) lines, for the text and the page of a report: the
        risk, what the attacker holds, the links made."""
        low, high = self.risk_interval
        level = f"{100 * self.confidence:g} %"
        members, control = self.members, self.control
        rule = (
            "the synthetic record nearest on A is the one nearest on B"
            if self.n_neighbors == 1
            else f"the {self.n_neighbors} synthetic records nearest on A and those on B share one"
        )
        a, b = (", ".join(map(repr, side)) for side in self.aux_cols)
        return [
            (
                "linkability risk",
                f"{self.risk:.4f} ({low:.4f} to {high:.4f}, {level}; 0: no more than on the "
                "holdout)",
            ),
            (
                "  attacker holds",
                f"A: {a}; B: {b}; linked when {rule} ({self.space} space)",
            ),
            (
                "  links made",
                f"{percent(members.successes, members.records):.2f} % of originals, "
                f"{percent(control.successes, control.records):.2f} % of the holdout (Wilson "
                f"rates {100 * members.rate:.2f} % and {100 * control.rate:.2f} %, which the risk "
                "compares)",
            ),
        ]


Sides = tuple[tuple[str, ...], tuple[str, ...]]
"""The attacker's two sets of columns, ``A`` and ``B``, as names."""


@dataclass(frozen=True)
class LinkabilityAttack:
    """What [`linkability_risk`][polars_hidden_rate.linkability_risk] is asked, checked: the
    linkability attack of a report is this, run on the report's sets. ``names`` says how an
    error names ``A`` and ``B`` (the command line's ``--aux-a`` and ``--aux-b``)."""

    aux_cols: Sides
    n_neighbors: int = 1
    space: Space = "projected"
    names: tuple[str, str] = ("aux_cols", "aux_cols")

    @classmethod
    def of(
        cls,
        aux_cols: Sequence[Sequence[str]],
        n_neighbors: int = 1,
        space: Space = "projected",
        *,
        names: tuple[str, str] = ("aux_cols", "aux_cols"),
    ) -> LinkabilityAttack:
        """Check the settings, each side of ``aux_cols`` resolved to names (`resolve_columns`)
        beforehand."""
        check_space(space, "linkability_risk")
        k = _neighbours(n_neighbors)
        if isinstance(aux_cols, str) or len(aux_cols) != 2:
            msg = f"`{names[0]}` must be a pair (A, B) of column sets, got {aux_cols!r}"
            raise TypeError(msg)
        sides = tuple(tuple(side) for side in aux_cols)
        for side, name in zip(sides, names, strict=True):
            if not side:
                raise ValueError(f"`{name}`: each of A and B needs at least one column")
        both = sorted(set(sides[0]) & set(sides[1]))
        if both:
            where = (
                f"`{names[0]}`: {both[0]!r} is in both A and B"
                if names[0] == names[1]
                else f"{both[0]!r} is in both {names[0]} and {names[1]}"
            )
            raise DuplicateError(f"{where}; the attacker's tables share none")
        return cls((sides[0], sides[1]), k, space, names)

    @property
    def columns(self) -> list[str]:
        """The columns of ``A`` then ``B``."""
        return [*self.aux_cols[0], *self.aux_cols[1]]

    def check(self, schemas: Mapping[str, pl.Schema]) -> None:
        """Check the columns of ``A`` and ``B`` in each set's schema (originals, synthetic,
        holdout), before anything is read."""
        for role, schema in schemas.items():
            for side, name in zip(self.aux_cols, self.names, strict=True):
                resolve_columns(list(side), schema, role, name)

    def run(
        self,
        originals: pl.DataFrame | pl.LazyFrame,
        synthetic: pl.DataFrame | pl.LazyFrame,
        holdout: pl.DataFrame | pl.LazyFrame,
        *,
        confidence: float = 0.95,
        **options: Unpack[CountOptions],
    ) -> LinkabilityRisk:
        """[`linkability_risk`][polars_hidden_rate.linkability_risk] of the three sets."""
        return linkability_risk(
            originals,
            synthetic,
            holdout,
            aux_cols=self.aux_cols,
            n_neighbors=self.n_neighbors,
            space=self.space,
            confidence=confidence,
            **options,
        )


def _neighbours(n_neighbors: object) -> int:
    return check_count(n_neighbors, "n_neighbors")


def _grouped(
    sides: Sequence[Float64Array],
) -> tuple[Joint, list[tuple[Float64Array, CountArray]]]:
    """Each side's synthetic records grouped by their identical rows (`distinct_groups`):
    the searches walk each distinct row once with its copies, and where records tie by the
    thousand (few categories) the links are counted through the groups' joint table."""
    found = [distinct_groups(side) for side in sides]
    joint = Joint.of(found[0][1], found[1][1])
    return joint, [(distinct, copies) for distinct, _, copies in found]


def _chances(
    searches: Sequence[TreeSearch],
    targets: int,
    k: int,
    joint: Joint,
    tie_tol: float,
    bar: Progress | None,
) -> Float64Array:
    """Each target's chance of a link, from each side's search, by blocks of targets
    (`query_blocks`: where records tie by the thousand, memory stays bounded)."""
    chances = np.empty(targets, dtype=np.float64)

    def block(rows: slice) -> int:
        sides = [search.k_nearest(rows, k, tie_tol=tie_tol, bar=bar) for search in searches]
        chances[rows] = link_chances(sides, k, joint)
        return max(len(side.rows) for side in sides)

    query_blocks(targets, block)
    return chances


def linkability_risk(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    *,
    aux_cols: tuple[ColumnSpec, ColumnSpec],
    n_neighbors: int = 1,
    space: Space = "projected",
    confidence: float = 0.95,
    **options: Unpack[CountOptions],
) -> LinkabilityRisk:
    """anonymeter's linkability attack: holding two tables of the same people with the
    columns ``A`` and ``B``, can an attacker link their rows through the synthetic set,
    beyond what it could for any record of the population?

    For each target, the ``n_neighbors`` synthetic records nearest on ``A`` and those
    nearest on ``B``; the target is linked when the two sets share a record. Every original
    (the members) and every holdout record (the control) is attacked, and ties at the edge
    of the nearest are shared ([`LinkabilityRisk`][polars_hidden_rate.LinkabilityRisk]).
    Target: at most a small risk (anonymeter reads 0 as no risk found).

    Parameters
    ----------
    originals
        The records the synthetic set was generated from (the members).
    synthetic
        The synthetic records, any number of them, with the columns of ``A`` and ``B``.
    holdout
        Real records of the same population that the generator never saw, with the
        originals' columns and types.
    aux_cols
        ``(A, B)``: the columns of the attacker's two tables, one or more each (names or a
        selector), no column in both.
    n_neighbors
        How many nearest synthetic records each side keeps (anonymeter's 1 by default; at
        most the synthetic set's size).
    space
        ``"projected"`` (default): each side in its own projection, fitted on the
        originals' columns of that side with every component (``ncp="all"`` unless
        given), the standardized Euclidean distance of
        [`inference_risk`][polars_hidden_rate.inference_risk], ties within ``tie_tol`` of
        the edge's ``d2``. ``"gower"``: anonymeter's distance
        (`polars_hidden_rate.measures.gower`), numbers divided by their range over the
        synthetic set and the targets, categories 0 or 1, summed; ties within ``tie_tol``
        of the edge's distance. Where no record ties at the edge, the risk is anonymeter's
        run on every record.
    confidence
        The level of the rates' errors and of the risk's interval.
    **options
        ``categorical``, ``impute`` and ``ncp`` shape each side's projection, as for
        [`local_cloaking`][polars_hidden_rate.local_cloaking] (refused with
        ``space="gower"``; ``categorical`` names may be of either side, each side takes its
        own); ``tie_tol``; ``threads``. ``coords``, ``features``, the link
        options, ``cluster`` and ``device="gpu"`` are refused.

    Raises
    ------
    polars.exceptions.ColumnNotFoundError
        When a column of ``A`` or ``B`` is missing from a set, before anything is read.
    polars.exceptions.DuplicateError
        When a column is named twice, or in both ``A`` and ``B``.
    polars.exceptions.SchemaError
        When the holdout's columns or types differ from the originals', or (``"gower"``) a
        column's type is one pandas measures otherwise (the message names the cast).
    polars.exceptions.ComputeError
        When a column holds values that cannot be measured: null, NaN or infinite numbers
        (in the projected space, ``impute`` fills null and NaN), integers beyond 2^53.
    polars.exceptions.NoDataError
        When a set holds no record.
    ValueError, TypeError
        For a bad option (the message names it).

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"age": [30, 40, 50, 60], "zip": [1, 2, 3, 4]})
    >>> synthetic = originals  # copies: every record's halves are linked
    >>> holdout = pl.DataFrame({"age": [31, 41, 52, 58], "zip": [4, 3, 1, 2]})
    >>> found = phr.linkability_risk(originals, synthetic, holdout, aux_cols=("age", "zip"))
    >>> found.members.successes, found.control.successes, round(found.risk, 3)
    (4.0, 0.0, 0.676)
    """
    check_confidence(confidence)
    check_space(space, "linkability_risk")
    k = _neighbours(n_neighbors)
    for option in ("coords", "features", "on", "left_on", "right_on"):
        if options.get(option) is not None:
            why = (
                "each side's space is its `aux_cols`'"
                if option in ("coords", "features")
                else "the attack needs no link between the sets"
            )
            raise ValueError(f"linkability_risk() takes no `{option}`: {why}")
    if space == "gower":
        refuse_projection_options(options, "linkability_risk")
    tie_tol = check_tie_tol(options.get("tie_tol", 1e-9))
    frames = {
        "originals": as_lazy(originals, "originals"),
        "synthetic": as_lazy(synthetic, "synthetic"),
        "holdout": as_lazy(holdout, "holdout"),
    }
    schemas = {role: frame.collect_schema() for role, frame in frames.items()}
    check_holdout(schemas["originals"], schemas["holdout"])
    sides = _aux_cols(aux_cols, schemas)
    asked = options.get("ncp")
    ncp: int | AllComponents = "all" if asked is None else asked
    side_options: list[CountOptions] = [
        {**options, "features": list(side), "ncp": ncp} for side in sides
    ]
    named = options.get("categorical")
    if isinstance(named, str):
        named = [named]
    if isinstance(named, list | tuple) and all(isinstance(name, str) for name in named):
        # Names of either side's columns: each side takes its own (a name of neither is
        # refused by the first side's plan, naming it).
        for side, side_option in zip(sides, side_options, strict=True):
            own = [n for n in named if n in side or n not in (*sides[0], *sides[1])]
            side_option["categorical"] = own or None
    sets = (frames["originals"], frames["synthetic"], frames["holdout"])
    for side_option in side_options:
        holdout_plan(*sets, side_option, "linkability_risk")
    names = [*sides[0], *sides[1]]
    read = {role: frame.select(names).collect() for role, frame in frames.items()}
    for role, frame in read.items():
        if frame.height == 0:
            raise NoDataError(f"{role}: no record, so there is nothing to attack")
    # Two searches (A and B) of the originals and of the holdout.
    searched = 2 * K_NEAREST_WALKS * (read["originals"].height + read["holdout"].height)
    if space == "gower":
        with stage(
            "linkability attack, nearest records", searched, enabled=options.get("progress")
        ) as bar:
            found = _in_gower(read, schemas, sides, k, tie_tol, confidence, bar)
        return replace(found, aux_cols=sides, space=space)
    arrays = []
    for side_option in side_options:
        request = holdout_plan(
            read["originals"], read["synthetic"], read["holdout"], side_option, "linkability_risk"
        ).fitted()
        arrays.append(
            (
                request.coordinates_of(request.originals, "originals"),
                request.coordinates_of(request.avatars, "synthetic"),
                request.coordinates_of(read["holdout"].lazy(), "holdout"),
            )
        )
    with stage(
        "linkability attack, nearest records", searched, enabled=options.get("progress")
    ) as bar:
        found = LinkabilityRisk.of_arrays(
            arrays,
            n_neighbors=k,
            tie_tol=tie_tol,
            confidence=confidence,
            threads=options.get("threads"),
            bar=bar,
        )
    return replace(found, aux_cols=sides, space=space)


def _aux_cols(
    aux_cols: object, schemas: dict[str, pl.Schema]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(A, B)`` resolved in every set, disjoint."""
    if not isinstance(aux_cols, tuple | list) or len(aux_cols) != 2:
        msg = f"`aux_cols` must be a pair (A, B) of column sets, got {aux_cols!r}"
        raise TypeError(msg)
    sides = []
    for side in aux_cols:
        for role, schema in schemas.items():
            names = resolve_columns(side, schema, role, "aux_cols")
        if not names:
            raise ValueError("`aux_cols`: each of A and B needs at least one column")
        sides.append(tuple(names))
    both = sorted(set(sides[0]) & set(sides[1]))
    if both:
        msg = f"`aux_cols`: {both[0]!r} is in both A and B; the attacker's tables share none"
        raise DuplicateError(msg)
    return sides[0], sides[1]


def _in_gower(
    read: dict[str, pl.DataFrame],
    schemas: dict[str, pl.Schema],
    sides: tuple[tuple[str, ...], tuple[str, ...]],
    k: int,
    tie_tol: float,
    confidence: float,
    bar: Progress | None = None,
) -> LinkabilityRisk:
    """The attack in anonymeter's space, each side's columns scaled over the synthetic set
    and the targets of each attack, as anonymeter's searches scale them."""
    columns = [GowerColumns.of(side, schemas) for side in sides]
    arrays = [
        column.arrays({role: frame.select(column.names) for role, frame in read.items()})
        for column in columns
    ]
    synthetic = read["synthetic"].height
    k = min(k, synthetic)
    joint, grouped = _grouped([side["synthetic"] for side in arrays])
    members, control = (
        _chances(
            [
                gower_search(column, distinct, side[role], copies=copies)
                for column, side, (distinct, copies) in zip(columns, arrays, grouped, strict=True)
            ],
            read[role].height,
            k,
            joint,
            tie_tol,
            bar,
        )
        for role in ("originals", "holdout")
    )
    return LinkabilityRisk.of_shares(
        members, control, synthetic, confidence=confidence, n_neighbors=k, tie_tol=tie_tol
    )
