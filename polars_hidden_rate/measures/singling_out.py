"""anonymeter's singling-out attack, with its control, every query counted: does the synthetic
set tell an attacker predicates that hold for exactly one of its training records?

A query is a predicate on the columns; it *singles out* a set when exactly one of its
records (duplicates dropped) satisfies it (anonymeter's ``SinglingOutEvaluator``, after
Cohen and Nissim 2020). The attacker writes queries from the synthetic set, those that
single out one synthetic record; the attack succeeds on a query when it singles out an
original, the control when it singles out a holdout record.

- **univariate**: anonymeter's generator, every query kept: for each column, ``is_null``
  where the synthetic set has exactly one missing value, ``<= min`` and ``>= max`` of a
  numeric column, ``== v`` for each value the synthetic set holds once (anonymeter shuffles
  them and keeps ``n_attacks``; here none is sampled away).
- **multivariate**: every (synthetic record, set of ``n_cols`` columns) anonymeter's
  generator can draw (it draws them at random): per column ``is_null`` where the record's
  value is missing, ``== v`` for text, categories and booleans, and for a number ``>= v``
  when ``v`` lies above the synthetic column's median, ``<= v`` otherwise. Where there are
  more than ``max_queries`` pairs, a deterministic design (`design`).

The queries kept are those that single out a synthetic record (anonymeter's too); each is
attacked once, so the shares are over their number. Counting the records a conjunction of
closed conditions matches is a box count (`polars_hidden_rate.engine.boxes`), exact, and no
query scans a set. When the originals and the holdout (duplicates dropped) differ in size,
the larger side's success on a query is the probability that it singles out one record of a
random subsample at the smaller side's size (`polars_hidden_rate.stats.single_chance`),
where anonymeter scales the control's count by a curve fitted to random subsamples.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, Literal

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, NoDataError, SchemaError

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.checks import check_confidence, check_flag, check_threads
from polars_hidden_rate.engine.boxes import count_in_closed_boxes
from polars_hidden_rate.frames import (
    ColumnSpec,
    as_lazy,
    common_feature_type,
    inexact_counts,
    is_text,
    raise_inexact,
    resolve_columns,
)
from polars_hidden_rate.measures.holdout import check_holdout
from polars_hidden_rate.measures.inference import SuccessRate, attack_against_control
from polars_hidden_rate.progress import stage
from polars_hidden_rate.stats import percent, single_chance

Mode = Literal["univariate", "multivariate"]
MODES: tuple[Mode, ...] = ("univariate", "multivariate")
MAX_QUERIES = 1_000_000
"""The default bound on the multivariate attack's (record, column set) pairs: above it, the
deterministic design (`design`)."""

Kind = Literal["numeric", "equal"]

ROLES = ("synthetic", "originals", "holdout")


@dataclass(frozen=True)
class Encoded:
    """The three sets (duplicates dropped) as float64 coordinates, two a column: its
    missing flag (1 where null) and its value (the number, or a code shared by the sets for
    text, booleans and dates; 0 where null). ``asked`` holds the synthetic set's values as
    anonymeter's multivariate queries ask for them (text escaped, as its queries write it);
    ``medians`` the synthetic set's median of each numeric column (NaN elsewhere)."""

    columns: tuple[str, ...]
    kinds: tuple[Kind, ...]
    sets: dict[str, Float64Array]
    asked: Float64Array
    medians: Float64Array

    @classmethod
    def of(cls, read: dict[str, pl.DataFrame], mode: Mode) -> Encoded:
        """From the sets' selected columns (duplicates already dropped)."""
        synthetic = read["synthetic"]
        columns = tuple(synthetic.columns)
        kinds: list[Kind] = []
        flags: dict[str, list[np.ndarray]] = {role: [] for role in ROLES}
        values: dict[str, list[np.ndarray]] = {role: [] for role in ROLES}
        asked, medians = [], []
        for name in columns:
            dtypes = {role: read[role].schema[name] for role in ROLES}
            kind = _kind(name, dtypes, mode)
            kinds.append(kind)
            parts = [read[role].get_column(name) for role in ROLES]
            for role, part in zip(ROLES, parts, strict=True):
                flags[role].append(part.is_null().to_numpy().astype(np.float64))
            ends = np.cumsum([0, *(len(part) for part in parts)])
            if kind == "numeric":
                medians.append(_median(synthetic.get_column(name)))
                numbers = [part.cast(pl.Float64).fill_null(0.0).to_numpy() for part in parts]
                for role, number in zip(ROLES, numbers, strict=True):
                    values[role].append(number + 0.0)  # -0.0 as 0.0, as == takes them
                asked.append(values["synthetic"][-1])
                continue
            medians.append(math.nan)
            text = all(is_text(dtype) for dtype in dtypes.values())
            series = [part.cast(pl.String) if text else part.to_physical() for part in parts]
            # anonymeter writes a String value into its query with its quotes escaped.
            escaped = isinstance(dtypes["synthetic"], pl.String) and mode == "multivariate"
            query = (
                series[0]
                .str.replace_all('"', '\\"', literal=True)
                .str.replace_all("'", "\\'", literal=True)
                if escaped
                else series[0]
            )
            codes = pl.concat([*series, query]).rank("dense").fill_null(0)
            codes_np = codes.cast(pl.Float64).to_numpy()
            for k, role in enumerate(ROLES):
                values[role].append(codes_np[ends[k] : ends[k + 1]])
            asked.append(codes_np[ends[-1] :])
        sets = {role: _interleave(flags[role], values[role], read[role].height) for role in ROLES}
        query_values = _interleave(flags["synthetic"], asked, synthetic.height)
        return cls(columns, tuple(kinds), sets, query_values, np.array(medians, dtype=np.float64))


def _interleave(flags: list[np.ndarray], values: list[np.ndarray], rows: int) -> Float64Array:
    out = np.zeros((rows, 2 * len(flags)), dtype=np.float64)
    for c, (flag, value) in enumerate(zip(flags, values, strict=True)):
        out[:, 2 * c] = flag
        out[:, 2 * c + 1] = value
    return out


def _median(column: pl.Series) -> float:
    """The synthetic column's median as anonymeter's ``df.median()`` takes it (in the
    column's own type), as float64; NaN where every value is missing."""
    found = column.median()
    return math.nan if found is None else float(found)  # type: ignore[arg-type]


def _kind(name: str, dtypes: dict[str, pl.DataType], mode: Mode) -> Kind:
    """How anonymeter's queries take a column: numbers compared (integers and floats),
    everything else by equality; a SchemaError for the types its queries cannot ask of."""
    first = dtypes["synthetic"]
    if all(d.is_integer() or d.is_float() for d in dtypes.values()):
        return "numeric"
    if all(is_text(d) for d in dtypes.values()) or all(d == pl.Boolean for d in dtypes.values()):
        return "equal"
    if all(d.is_temporal() for d in dtypes.values()) and len(set(dtypes.values())) == 1:
        if mode == "univariate":
            return "equal"
        msg = (
            f"column {name!r} is {first}: anonymeter's multivariate query compares it to its "
            "text, which polars refuses; leave it out of `columns`, or cast it to a number "
            "or to text first"
        )
        raise SchemaError(msg)
    kinds = ", ".join(f"{role} {dtype}" for role, dtype in dtypes.items())
    msg = (
        f"column {name!r} ({kinds}): a singling-out query asks integers, floats, text, "
        "categories, booleans or (univariate) dates, the same kind in every set; cast it first"
    )
    raise SchemaError(msg)


def univariate_boxes(encoded: Encoded) -> tuple[IndexArray, Float64Array, Float64Array]:
    """anonymeter's univariate queries from the synthetic set, every one: for each column
    ``c``, its index, and the closed box over ``c``'s two coordinates (missing flag, value)."""
    synthetic = encoded.sets["synthetic"]
    column: list[int] = []
    lower: list[tuple[float, float]] = []
    upper: list[tuple[float, float]] = []
    inf = math.inf
    for c, kind in enumerate(encoded.kinds):
        flag, value = synthetic[:, 2 * c], synthetic[:, 2 * c + 1]
        present = value[flag == 0.0]
        if np.count_nonzero(flag) == 1:
            column.append(c)
            lower.append((1.0, -inf))
            upper.append((1.0, inf))
        if kind == "numeric" and len(present):
            low, high = float(present.min()), float(present.max())
            column += [c, c]
            lower += [(0.0, -inf), (0.0, high)]
            upper += [(0.0, low), (0.0, inf)]
        # Each value held once (a missing one asks `== None`, which matches nothing).
        seen, counts = np.unique(present, return_counts=True)
        for v in seen[counts == 1]:
            column.append(c)
            lower.append((0.0, float(v)))
            upper.append((0.0, float(v)))
    return (
        np.array(column, dtype=np.int64),
        np.array(lower, dtype=np.float64).reshape(-1, 2),
        np.array(upper, dtype=np.float64).reshape(-1, 2),
    )


def multivariate_boxes(
    encoded: Encoded, columns: Sequence[int], records: IndexArray
) -> tuple[Float64Array, Float64Array]:
    """anonymeter's multivariate query of each synthetic record of ``records`` on
    ``columns``, as closed boxes over those columns' coordinates (missing flag, value)."""
    asked = encoded.asked[records]
    k = len(columns)
    lower = np.empty((len(records), 2 * k), dtype=np.float64)
    upper = np.empty_like(lower)
    for j, c in enumerate(columns):
        flag, value = asked[:, 2 * c], asked[:, 2 * c + 1]
        missing = flag == 1.0
        lower[:, 2 * j] = upper[:, 2 * j] = flag
        if encoded.kinds[c] == "numeric":
            above = value > encoded.medians[c]  # False against a NaN median
            lower[:, 2 * j + 1] = np.where(above, value, -math.inf)
            upper[:, 2 * j + 1] = np.where(above, math.inf, value)
        else:
            lower[:, 2 * j + 1] = upper[:, 2 * j + 1] = value
        lower[missing, 2 * j + 1] = -math.inf
        upper[missing, 2 * j + 1] = math.inf
    return lower, upper


def coordinates(columns: Sequence[int]) -> list[int]:
    """The two coordinates (missing flag, value) of each of ``columns``."""
    return [i for c in columns for i in (2 * c, 2 * c + 1)]


def design(records: int, sets: int, max_queries: int) -> list[IndexArray]:
    """The multivariate attack's pairs: for column set ``j`` (in `itertools.combinations`
    order), the ranks of the synthetic records it is asked with. Every pair where
    ``records * sets <= max_queries``; else each record, by its rank in the synthetic set's
    sorted order, takes ``t = max(1, max_queries // records)`` column sets in turn, record
    ``i`` the sets ``i t, i t + 1, ..., i t + t - 1`` modulo ``sets``: every record asked
    ``t`` times, the column sets evenly."""
    if records * sets <= max_queries:
        every = np.arange(records, dtype=np.int64)
        return [every for _ in range(sets)]
    t = max(1, max_queries // records)
    ranks = np.repeat(np.arange(records, dtype=np.int64), t)
    chosen = (ranks * t + np.tile(np.arange(t, dtype=np.int64), records)) % sets
    order = np.argsort(chosen, kind="stable")
    ends = np.searchsorted(chosen[order], np.arange(sets + 1))
    return [ranks[order[ends[j] : ends[j + 1]]] for j in range(sets)]


def query_counts(
    encoded: Encoded,
    mode: Mode,
    n_cols: int = 3,
    *,
    max_queries: int = MAX_QUERIES,
    threads: int = 1,
    exact: bool = False,
    progress: bool | None = None,
) -> tuple[dict[str, IndexArray], int, bool]:
    """For each query of the attack that singles out a synthetic record, how many records
    of the originals and of the holdout it matches; with how many queries were asked and
    whether every pair was (multivariate).

    Only whether a query matches one record matters, but for the larger of the two sides
    (`single_chance`): elsewhere a count stops at 2 (whole nodes of the kd-tree make up most
    of the rest), unless ``exact``. The synthetic set's counts always stop there. The
    queries asked are the units of the stage ``singling-out attack, queries`` (``progress``
    as `polars_hidden_rate.progress.stage` takes it)."""
    sizes = {role: len(points) for role, points in encoded.sets.items()}
    smaller = min(sizes["originals"], sizes["holdout"])
    caps = {
        role: None if exact or sizes[role] > smaller else 2 for role in ("originals", "holdout")
    }
    found: dict[str, list[IndexArray]] = {"originals": [], "holdout": []}
    asked = 0

    def count(columns: Sequence[int], lower: Float64Array, upper: Float64Array) -> None:
        nonlocal asked
        asked += len(lower)
        at = coordinates(columns)
        synthetic = count_in_closed_boxes(
            encoded.sets["synthetic"][:, at], lower, upper, cap=2, threads=threads
        )
        kept = synthetic == 1
        # One query once, as anonymeter keeps it: two records alike on the columns ask the
        # same query, kept only where it matches neither (text with quotes, asked escaped).
        boxes = np.unique(np.hstack([lower[kept], upper[kept]]), axis=0)
        lower, upper = boxes[:, : len(at)], boxes[:, len(at) :]
        for role, cap in caps.items():
            points = encoded.sets[role][:, at]
            found[role].append(
                count_in_closed_boxes(points, lower, upper, cap=cap, threads=threads)
            )

    exhaustive = True
    name = "singling-out attack, queries"
    if mode == "univariate":
        column, lower, upper = univariate_boxes(encoded)
        with stage(name, len(column), enabled=progress) as bar:
            for c in np.unique(column):
                rows = column == c
                count([int(c)], lower[rows], upper[rows])
                bar.advance(int(np.count_nonzero(rows)))
    else:
        sets = list(combinations(range(len(encoded.columns)), n_cols))
        records = len(encoded.asked)
        exhaustive = records * len(sets) <= max_queries
        # Ranks by value, so that the design does not depend on the records' order.
        ranked = np.lexsort(encoded.asked[:, ::-1].T)
        asked_ranks = design(records, len(sets), max_queries)
        total = sum(len(ranks) for ranks in asked_ranks)
        with stage(name, total, enabled=progress) as bar:
            for columns, ranks in zip(sets, asked_ranks, strict=True):
                if len(ranks):
                    count(columns, *multivariate_boxes(encoded, columns, ranked[ranks]))
                    bar.advance(len(ranks))
    joined = {
        role: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        for role, parts in found.items()
    }
    return joined, asked, exhaustive


@dataclass(frozen=True)
class SinglingOutRisk:
    """anonymeter's singling-out attack on a synthetic set, every query counted, with the
    holdout as its control.

    Attributes
    ----------
    risk
        ``(members.rate - control.rate) / (1 - control.rate)``, cut to [0, 1]: 0 when the
        synthetic set's queries single out its training records no more often than records
        of the population.
    risk_interval
        The risk plus and minus its propagated error, cut to [0, 1] (also `interval`).
    members, control
        The attack's success on the originals and on the holdout (`SuccessRate`), over
        `queries` trials each.
    members_success, control_success
        Each query's success: 1 or 0, or on the larger side (when the sizes differ) its
        chance of singling out one record of a subsample at the smaller side's size.
    queries
        How many queries single out a synthetic record: the attacks. Where none does, the
        risk is 0 and its interval [0, 1] (no trial bounds it).
    mode
        ``"univariate"`` or ``"multivariate"``.
    n_cols
        The columns of a multivariate query (1 for univariate).
    columns
        The attacker's columns.
    synthetic, originals, holdout
        The sets' sizes, duplicates dropped.
    exhaustive
        Whether every (record, column set) pair was asked (always for univariate), rather
        than the deterministic design.
    resized
        ``"originals"`` or ``"holdout"``: the larger side, whose success is taken at the
        smaller side's size; None when the sizes are equal.
    confidence
        The level of the rates' errors and of ``risk_interval``.
    """

    risk: float
    risk_interval: tuple[float, float]
    members: SuccessRate
    control: SuccessRate
    members_success: Float64Array
    control_success: Float64Array
    queries: int
    mode: Mode = "univariate"
    n_cols: int = 1
    columns: tuple[str, ...] = ()
    synthetic: int = 0
    originals: int = 0
    holdout: int = 0
    exhaustive: bool = True
    resized: Literal["originals", "holdout"] | None = None
    confidence: float = 0.95

    @property
    def interval(self) -> tuple[float, float]:
        """`risk_interval`: the risk plus and minus its error, cut to [0, 1]."""
        return self.risk_interval

    @classmethod
    def of_counts(
        cls,
        counts: dict[str, IndexArray],
        sizes: dict[str, int],
        *,
        confidence: float = 0.95,
    ) -> SinglingOutRisk:
        """From the matches in the originals and in the holdout of each query that singles
        out a synthetic record (`query_counts`), and the sets' sizes (duplicates dropped)."""
        queries = len(counts["originals"])
        originals, holdout = sizes["originals"], sizes["holdout"]
        if not queries:
            # No query to ask, no success: risk 0, and no trial to bound it.
            none, empty = SuccessRate(0.0, 0, 0.0, 0.0), np.zeros(0, dtype=np.float64)
            return cls(
                0.0,
                (0.0, 1.0),
                none,
                none,
                empty,
                empty,
                0,
                originals=originals,
                holdout=holdout,
                synthetic=sizes["synthetic"],
                confidence=confidence,
            )
        smaller = min(originals, holdout)
        resized: Literal["originals", "holdout"] | None = None
        shares = []
        for role in ("originals", "holdout"):
            matches = counts[role]
            if sizes[role] > smaller:
                resized = role
                shares.append(single_chance(matches, sizes[role], smaller))
            else:
                shares.append((matches == 1).astype(np.float64))
        attack, control, risk, interval = attack_against_control(
            shares[0], shares[1], confidence, "singled out a record with every query"
        )
        return cls(
            risk,
            interval,
            attack,
            control,
            shares[0],
            shares[1],
            queries,
            originals=originals,
            holdout=holdout,
            synthetic=sizes["synthetic"],
            resized=resized,
            confidence=confidence,
        )

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON values (the report's ``singling_out``): ``risk``,
        ``risk_interval``, ``confidence``, ``members`` and ``control``
        (`SuccessRate.to_dict`; ``share``, ``rate`` and ``error`` None without a query),
        ``queries``, ``mode``, ``n_cols``, ``columns``, the sets' sizes (duplicates dropped),
        ``exhaustive``, ``resized``."""
        low, high = self.risk_interval
        return {
            "risk": self.risk,
            "risk_interval": [low, high],
            "confidence": self.confidence,
            "members": _rate_entry(self.members),
            "control": _rate_entry(self.control),
            "queries": self.queries,
            "mode": self.mode,
            "n_cols": self.n_cols,
            "columns": list(self.columns),
            "synthetic": self.synthetic,
            "originals": self.originals,
            "holdout": self.holdout,
            "exhaustive": self.exhaustive,
            "resized": self.resized,
        }

    def rows(self) -> list[tuple[str, str]]:
        """The attack as (label, value) lines, for the text and the page of a report: the
        risk, the queries asked, the records singled out."""
        if not self.queries:
            return [
                (
                    "singling-out risk",
                    f"{self.risk:.4f} (no {self.mode} query singles out a synthetic record: "
                    "nothing to ask)",
                )
            ]
        low, high = self.risk_interval
        level = f"{100 * self.confidence:g} %"
        members, control = self.members, self.control
        asked = (
            "one column each"
            if self.mode == "univariate"
            else f"{self.n_cols} columns each"
            + ("" if self.exhaustive else ", a deterministic design of the pairs")
        )
        at = (
            ""
            if self.resized is None
            else f"; the {self.resized} taken at the other side's "
            f"{min(self.originals, self.holdout)} records"
        )
        return [
            (
                "singling-out risk",
                f"{self.risk:.4f} ({low:.4f} to {high:.4f}, {level}; 0: no more than on the "
                "holdout)",
            ),
            (
                "  queries",
                f"{self.queries} {self.mode} queries that single out a synthetic record, {asked}",
            ),
            (
                "  records singled out",
                f"by {percent(members.successes, members.records):.2f} % of the queries on the "
                f"originals, {percent(control.successes, control.records):.2f} % on the "
                f"holdout{at} (Wilson rates {100 * members.rate:.2f} % and "
                f"{100 * control.rate:.2f} %, which the risk compares)",
            ),
        ]


def _rate_entry(rate: SuccessRate) -> dict[str, Any]:
    """`SuccessRate.to_dict`, or without a trial its counts and no share, rate or error."""
    if rate.records:
        return rate.to_dict()
    return {"successes": 0.0, "records": 0, "share": None, "rate": None, "error": None}


@dataclass(frozen=True)
class SinglingOutAttack:
    """What [`singling_out_risk`][polars_hidden_rate.singling_out_risk] is asked, checked:
    the singling-out attack of a report is this, run on the report's sets."""

    mode: Mode
    n_cols: int = 3

    @classmethod
    def of(
        cls, mode: object, n_cols: object = 3, *, name: str = "singling_out"
    ) -> SinglingOutAttack:
        """Check the settings; ``name`` says how an error names the mode."""
        checked, cols = check_mode(mode, n_cols, name)
        if checked == "univariate" and cols != 3:
            msg = f"`n_cols` sets the multivariate singling-out attack: pass {name}='multivariate'"
            raise ValueError(msg)
        return cls(checked, cols)

    def run(
        self,
        originals: pl.DataFrame | pl.LazyFrame,
        synthetic: pl.DataFrame | pl.LazyFrame,
        holdout: pl.DataFrame | pl.LazyFrame,
        *,
        columns: ColumnSpec | None = None,
        confidence: float = 0.95,
        threads: int | None = 1,
        progress: bool | None = None,
    ) -> SinglingOutRisk:
        """[`singling_out_risk`][polars_hidden_rate.singling_out_risk] of the three sets."""
        return singling_out_risk(
            originals,
            synthetic,
            holdout,
            mode=self.mode,
            n_cols=self.n_cols,
            columns=columns,
            confidence=confidence,
            threads=threads,
            progress=progress,
        )


def check_mode(mode: object, n_cols: object, name: str = "mode") -> tuple[Mode, int]:
    """The attack's mode and its columns per query, checked."""
    if mode not in MODES:
        msg = f"`{name}` must be 'univariate' or 'multivariate', got {mode!r}"
        raise ValueError(msg)
    if isinstance(n_cols, bool) or not isinstance(n_cols, int) or n_cols < 1:
        msg = f"`n_cols` must be an integer of at least 1, got {n_cols!r}"
        raise ValueError(msg)
    return mode, n_cols


def singling_out_risk(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    *,
    mode: Mode = "univariate",
    n_cols: int = 3,
    columns: ColumnSpec | None = None,
    max_queries: int = MAX_QUERIES,
    confidence: float = 0.95,
    threads: int | None = 1,
    progress: bool | None = None,
) -> SinglingOutRisk:
    """anonymeter's singling-out attack, every query counted: do the predicates that single
    out one synthetic record single out one original more often than one holdout record?

    A query singles out a set when exactly one of its records (duplicates dropped) matches
    it. ``"univariate"``: every query of anonymeter's generator (for each column, ``<= min``
    and ``>= max`` of a number, each value the synthetic set holds once, its one missing
    value); ``"multivariate"``: every (synthetic record, set of ``n_cols`` columns) its
    generator can draw, each number asked ``>=`` or ``<=`` the record's value by the side
    of the synthetic column's median, everything else asked equal
    ([`SinglingOutRisk`][polars_hidden_rate.SinglingOutRisk]). Only the queries that single
    out a synthetic record are kept, as anonymeter keeps them; each is attacked once.
    Target: at most a small risk (anonymeter reads 0 as no risk found).

    Parameters
    ----------
    originals
        The records the synthetic set was generated from (the members).
    synthetic
        The synthetic records, with the attacker's columns.
    holdout
        Real records of the same population that the generator never saw, with the
        originals' columns and types.
    mode
        ``"univariate"`` (default) or ``"multivariate"``.
    n_cols
        The columns of a multivariate query (anonymeter's 3 by default; at most the
        columns').
    columns
        The attacker's columns (names or a selector); default every column of the
        originals.
    max_queries
        The most (record, column set) pairs the multivariate attack enumerates; above, a
        deterministic design asks each record ``max(1, max_queries // records)`` column
        sets in turn (`polars_hidden_rate.measures.singling_out.design`).
    confidence
        The level of the rates' errors and of the risk's interval.
    threads
        Threads of the counts (None: every core).
    progress
        Show the queries counted and an estimate of the time left on stderr (None: on a
        terminal only), as [`CountOptions`][polars_hidden_rate.CountOptions]' ``progress``.

    Raises
    ------
    polars.exceptions.ColumnNotFoundError
        When a column is missing from a set, before anything is read.
    polars.exceptions.SchemaError
        When the holdout's columns or types differ from the originals', a set's column is of
        another kind, or a column is of a type anonymeter's queries cannot ask of (the
        message names it): dates are asked only by the univariate attack.
    polars.exceptions.ComputeError
        When a float column holds NaN (anonymeter's frames hold them as missing values:
        make them null), or integers beyond 2^53.
    polars.exceptions.NoDataError
        When a set holds no record.
    ValueError, TypeError
        For a bad option (the message names it).

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"age": [30, 40, 50, 60], "zip": ["a", "b", "c", "d"]})
    >>> holdout = pl.DataFrame({"age": [35, 45, 55, 65], "zip": ["e", "f", "g", "h"]})
    >>> found = phr.singling_out_risk(originals, originals, holdout)
    >>> found.queries, found.members.successes, found.control.successes, round(found.risk, 3)
    (10, 10.0, 1.0, 0.824)
    """
    mode, n_cols = check_mode(mode, n_cols)
    check_confidence(confidence)
    workers = check_threads(threads)
    progress = None if progress is None else check_flag(progress, "progress", or_none=True)
    if isinstance(max_queries, bool) or not isinstance(max_queries, int) or max_queries < 1:
        msg = f"`max_queries` must be an integer of at least 1, got {max_queries!r}"
        raise ValueError(msg)
    frames = {
        "originals": as_lazy(originals, "originals"),
        "synthetic": as_lazy(synthetic, "synthetic"),
        "holdout": as_lazy(holdout, "holdout"),
    }
    schemas = {role: frame.collect_schema() for role, frame in frames.items()}
    names = resolve_columns(
        list(schemas["originals"].names()) if columns is None else columns,
        schemas["originals"],
        "originals",
        "columns",
    )
    if not names:
        raise ValueError("`columns`: the attacker needs at least one column")
    for role in ("synthetic", "holdout"):
        resolve_columns(names, schemas[role], role, "columns")
    check_holdout(
        pl.Schema({n: schemas["originals"][n] for n in names}),
        pl.Schema({n: schemas["holdout"][n] for n in names}),
    )
    for name in names:
        common_feature_type(
            name, schemas["originals"][name], schemas["synthetic"][name], "synthetic"
        )
    if mode == "multivariate" and n_cols > len(names):
        msg = f"`n_cols` is {n_cols}, but the attacker has {len(names)} columns"
        raise ValueError(msg)
    read = {role: frames[role].select(names).collect() for role in ROLES}
    for role, frame in read.items():
        if frame.height == 0:
            raise NoDataError(f"{role}: no record, so there is nothing to attack")
        _refuse_nan(frame, role)
    read = {role: frame.unique() for role, frame in read.items()}
    encoded = Encoded.of(read, mode)
    counts, _, exhaustive = query_counts(
        encoded,
        mode,
        n_cols,
        max_queries=max_queries,
        threads=workers if workers is not None else os.cpu_count() or 1,
        progress=progress,
    )
    found = SinglingOutRisk.of_counts(
        counts, {role: frame.height for role, frame in read.items()}, confidence=confidence
    )
    return replace(
        found,
        mode=mode,
        n_cols=n_cols if mode == "multivariate" else 1,
        columns=tuple(names),
        exhaustive=exhaustive,
    )


def _refuse_nan(frame: pl.DataFrame, role: str) -> None:
    """NaN is refused: anonymeter's frames come from pandas, which hands it over as a
    missing value, and a query compares nothing to it. Integers beyond 2^53 as elsewhere."""
    dtypes = {name: frame.schema[name] for name in frame.columns if frame.schema[name].is_numeric()}
    raise_inexact(inexact_counts(frame, dtypes), dtypes, "column", role)
    for name, dtype in dtypes.items():
        if dtype.is_float() and frame.get_column(name).is_nan().any():
            msg = (
                f"column {name!r} of {role} holds NaN: anonymeter's queries take it as a "
                "missing value (pandas hands NaN over as one); make it null first"
            )
            raise ComputeError(msg)
