"""What is wrong with the data of a link, as values: counted in pieces, summed, raised once.

`KeyProblems` (null, duplicated and unmatched keys) and `CoordinateProblems`
(no rows, missing values, values float64 does not hold exactly) are found without raising,
so that the pieces of one read (a cluster's files and key buckets) each report theirs and
the sum (``combine``) raises the error the whole read raises (``raise_first``), word for word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, DuplicateError, NoDataError, ShapeError

from polars_hidden_rate.checks import quoted
from polars_hidden_rate.frames.dtypes import (
    as_text_if_category,
    common_feature_type,
    inexact_values,
)
from polars_hidden_rate.frames.schema import RESERVED_PREFIX

_AVATAR_ROW = f"{RESERVED_PREFIX}_avatar_row"
_KINDS = ("null", "NaN", "infinite")
QUOTED_ROLES = frozenset({"avatars", "synthetic"})
"""The sets whose values a message may quote: the released ones. The originals and a holdout
are real people's records, and a message lands in CI logs: it names their column and the
problem, never their values."""
UNSEEN_LIMIT = 0.5
"""A category (a categorical feature, a categorical secret) whose values in another set fall
outside the originals' categories for more than this share of its records is refused: the
two files do not code it alike (``F``/``M`` against ``f``/``m``)."""


def quotes_values(role: str) -> bool:
    """Whether a message may quote values of the ``role`` set (`QUOTED_ROLES`)."""
    return role in QUOTED_ROLES


def raise_unseen(
    name: str, role: str, unseen: int, rows: int, examples: Sequence[object], what: str = ""
) -> None:
    """Refuse a category ``name`` (a feature; ``what`` says when it is another, ``"secret"``)
    of which ``unseen`` of the ``rows`` values of ``role`` are none of the originals'
    categories, when they are more than `UNSEEN_LIMIT` of them: the one rule of recoded
    categories, for the avatars, a synthetic set and a holdout alike. Quotes ``examples`` (of
    ``role``'s unseen values) only where `quotes_values`; never the originals' values."""
    if not rows or unseen <= UNSEEN_LIMIT * rows:
        return
    owner, record = (f"{role}'", role[:-1]) if role.endswith("s") else (f"{role}'s", role)
    named = f"{owner} {what + ' ' if what else ''}{name!r}"
    shown = f" holds {', '.join(map(repr, examples))}, ..." if quotes_values(role) else ""
    msg = (
        f"{named}{shown}: {unseen} of {rows} {record} values are none of the originals' "
        "categories (recoded?); write both files with the same codes"
    )
    raise ComputeError(msg)


def nothing_to_measure(role: str) -> NoDataError:
    """The error for a side without rows."""
    return NoDataError(f"{role} is empty: there is nothing to measure")


def check_equal_heights(originals: int, avatars: int) -> None:
    """Linked by row order, both sides have as many rows: a ShapeError otherwise
    (`unequal_heights`)."""
    if originals != avatars:
        raise unequal_heights(originals, avatars)


def unequal_heights(originals: int, avatars: int) -> ShapeError:
    """The error for sides of another height linked by row order. A set of another height is
    no avatar per original (no key links them either: `check_link` sends a shared key to
    ``on``): the report judges it, without the link."""
    msg = (
        f"originals have {originals} rows but avatars have {avatars}: the hidden rate needs "
        "one avatar per original; a synthetic set of another size is judged on the "
        "measures that need no link by the report (hidden-rate report, privacy_report), "
        "with a holdout of real records the generator never saw (--holdout, holdout=)"
    )
    return ShapeError(msg)


def inexact_counts(
    frame: pl.DataFrame | pl.LazyFrame, dtypes: Mapping[str, pl.DataType]
) -> dict[str, int]:
    """How many values of each column of ``dtypes`` break `inexact_values`; columns
    without any left out (nothing is read when no type can break it)."""
    rules = {
        name: rule
        for name, dtype in dtypes.items()
        if (rule := inexact_values(pl.col(name), dtype)) is not None
    }
    if not rules:
        return {}
    counts = frame.lazy().select(
        rule.sum().alias(f"{RESERVED_PREFIX}_{i}") for i, rule in enumerate(rules.values())
    )
    row = counts.collect().row(0)
    return {name: int(count) for name, count in zip(rules, row, strict=True) if count}


def raise_inexact(
    counts: Mapping[str, int],
    dtypes: Mapping[str, pl.DataType],
    what: str,
    role: str,
    hint: str = "rescale or recode it",
) -> None:
    """A ComputeError for the first column of ``counts`` with values that break
    `inexact_values`, if any."""
    for name, count in counts.items():
        if not count:
            continue
        dtype = dtypes[name]
        if isinstance(dtype, pl.Decimal) and dtype.scale != 0:
            kind = (
                f"{count} value(s) whose nearest float64 is not theirs alone: float64 cannot "
                f"tell every {dtype} value apart at this magnitude"
            )
        else:
            kind = (
                f"{count} integer value(s) beyond 2^53 in absolute value, which float64 "
                "cannot hold exactly"
            )
        msg = f"{what} {name!r} of {role} has {kind}; {hint}"
        raise ComputeError(msg)


class MissingValuesError(ComputeError):
    """A ComputeError for null, NaN or infinite values (`raise_missing`): callers that
    can explain them (the projection names the features behind a coordinate) catch only it."""


MissingValues = Counter[tuple[str, str]]
"""Counts of missing values by ``(column, kind)``, kind ``null``, ``NaN`` or ``infinite``."""


def missing_values(
    frame: pl.DataFrame | pl.LazyFrame, numbers: Mapping[str, pl.Expr], others: Sequence[str] = ()
) -> MissingValues:
    """Null, NaN and infinite values of ``frame``, by column; zero counts left out.

    ``numbers`` maps each numeric column to its values as float64 (gaps as the expression
    leaves them: a filled value is not missing); ``others`` are counted for nulls only.
    """
    checks: list[tuple[str, str, pl.Expr]] = [
        *((c, "null", x.null_count()) for c, x in numbers.items()),
        *((c, "null", pl.col(c).null_count()) for c in others),
        *((c, "NaN", x.is_nan().sum()) for c, x in numbers.items()),
        *((c, "infinite", x.is_infinite().sum()) for c, x in numbers.items()),
    ]
    if not checks:
        return Counter()
    # Labelled by position: a column name may hold any character.
    counts = frame.lazy().select(
        count.alias(f"{RESERVED_PREFIX}_{i}") for i, (_, _, count) in enumerate(checks)
    )
    row = counts.collect().row(0)
    found: MissingValues = Counter()
    for (column, kind, _), count in zip(checks, row, strict=True):
        if count:
            found[column, kind] = int(count)
    return found


def raise_missing(
    missing: MissingValues, what: str, *, rows: int | None = None, hint: str = ""
) -> None:
    """A `MissingValuesError` naming every column of ``what`` with missing values,
    if any."""
    if not missing:
        return
    culprits = ", ".join(
        f"{column!r} ({count} {kind})" for (column, kind), count in missing.items()
    )
    where = f" in {rows} rows" if rows is not None else ""
    raise MissingValuesError(f"{what} have missing values: {culprits}{where}{hint}")


@dataclass(frozen=True)
class CoordinateProblems:
    """What is wrong with the coordinates of one side, counted: whether it has rows, its
    missing values (null, NaN, infinite) and the values float64 does not hold exactly
    (`inexact_values`).

    `of` counts them in one frame (the local read, or one of a cluster's files);
    `combine` sums the pieces of one side; `raise_first` raises what one read
    raises first: no rows, then missing values, then inexact ones.
    """

    role: str
    dtypes: Mapping[str, pl.DataType]
    """The coordinate columns as read, in order, with their types (for the messages)."""
    rows: int = 0
    missing: MissingValues = field(default_factory=Counter)
    inexact: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return not self.rows or bool(self.missing) or any(self.inexact.values())

    @classmethod
    def of(cls, frame: pl.DataFrame, columns: Sequence[str], role: str) -> CoordinateProblems:
        """The problems of ``columns`` of ``frame``, the coordinates of ``role``: the counts
        of `missing_values` (of the columns as float64) and of `inexact_counts`, in one pass
        over the frame."""
        dtypes: dict[str, pl.DataType] = {}
        # The missing values' kinds in `_KINDS` order, then the inexact values.
        by_kind: dict[str, list[tuple[str, pl.Expr]]] = {
            "null": [],
            "NaN": [],
            "infinite": [],
            "inexact": [],
        }
        for name in columns:
            dtype = dtypes[name] = frame.schema[name]
            values = pl.col(name).cast(pl.Float64)
            by_kind["null"].append((name, values.null_count()))
            by_kind["NaN"].append((name, values.is_nan().sum()))
            by_kind["infinite"].append((name, values.is_infinite().sum()))
            # Floats are float64 already (Float32 widens exactly): no rule to check.
            inexact = None if dtype.is_float() else inexact_values(pl.col(name), dtype)
            if inexact is not None:
                by_kind["inexact"].append((name, inexact.sum()))
        # Labelled by position: a column name may hold any character.
        labelled: list[pl.Expr] = []
        for kind in by_kind:
            for _, count in by_kind[kind]:
                labelled.append(count.alias(f"{RESERVED_PREFIX}_{len(labelled)}"))
        counts = iter(frame.select(labelled).row(0))
        missing: MissingValues = Counter()
        inexact_by_name: dict[str, int] = {}
        for kind, checks in by_kind.items():  # in `missing_values`' order: by kind, then column
            for name, _ in checks:
                if count := next(counts):
                    if kind == "inexact":
                        inexact_by_name[name] = int(count)
                    else:
                        missing[name, kind] = int(count)
        return cls(role, dtypes, frame.height, missing, inexact_by_name)

    @classmethod
    def combine(cls, pieces: Sequence[CoordinateProblems]) -> CoordinateProblems:
        """The problems of one side read in ``pieces``, counted as one read counts them (the
        missing values by kind, then by column, as `missing_values` orders them)."""
        first = pieces[0]
        missing: MissingValues = Counter()
        for kind in _KINDS:
            for name in first.dtypes:
                count = sum(piece.missing.get((name, kind), 0) for piece in pieces)
                if count:
                    missing[name, kind] = count
        inexact = {name: sum(p.inexact.get(name, 0) for p in pieces) for name in first.dtypes}
        return cls(
            first.role,
            first.dtypes,
            sum(piece.rows for piece in pieces),
            missing,
            {name: count for name, count in inexact.items() if count},
        )

    def raise_first(self, explain_missing: Callable[[], None] | None = None) -> None:
        """Raise the error one read raises first, if any. ``explain_missing``, when given, runs
        before missing values are raised: a caller that can name the features behind a
        missing coordinate (the projection) raises its own error there."""
        if not self.rows:
            raise nothing_to_measure(self.role)
        if self.missing:
            if explain_missing is not None:
                explain_missing()
            raise_missing(self.missing, f"coords of {self.role}", rows=self.rows)
        if any(self.inexact.values()):
            raise_inexact(self.inexact, self.dtypes, "coords column", self.role)


Example = tuple[Any, ...]
"""A key's values, in the order of the key columns."""


@dataclass(frozen=True)
class KeyProblems:
    """What is wrong with the keys of a link, counted, each with an example key.

    `link_by_key` finds them without raising, so that the pieces of one link (a
    cluster's key buckets) can each report theirs and the sum (`combine`) raises the
    error one link would (`raise_first`). Side 0 is the originals, side 1 the avatars.
    The example of a null key is the first in row order; of any other problem, the
    smallest key, so it does not depend on how the records were cut.
    """

    names: tuple[tuple[str, ...], tuple[str, ...]]
    nulls: tuple[int, int] = (0, 0)
    null_examples: tuple[Example | None, Example | None] = (None, None)
    duplicated: tuple[int, int] = (0, 0)
    duplicated_examples: tuple[Example | None, Example | None] = (None, None)
    orphans: int = 0
    orphan_example: Example | None = None
    extras: int = 0
    extra_example: Example | None = None

    def __bool__(self) -> bool:
        return bool(sum(self.nulls) or sum(self.duplicated) or self.orphans or self.extras)

    @classmethod
    def combine(cls, problems: Sequence[KeyProblems]) -> KeyProblems:
        """The problems of one link cut into ``problems`` (pieces in row order for nulls)."""
        first = problems[0]

        def side(counts: str, examples: str, k: int, pick: Any) -> tuple[int, Example | None]:
            found = [p for p in problems if getattr(p, counts)[k]]
            chosen = [getattr(p, examples)[k] for p in found]
            return sum(getattr(p, counts)[k] for p in found), pick(chosen, first.names[k])

        nulls = [side("nulls", "null_examples", k, _first) for k in (0, 1)]
        shared = [side("duplicated", "duplicated_examples", k, _smallest) for k in (0, 1)]
        return cls(
            first.names,
            (nulls[0][0], nulls[1][0]),
            (nulls[0][1], nulls[1][1]),
            (shared[0][0], shared[1][0]),
            (shared[0][1], shared[1][1]),
            sum(p.orphans for p in problems),
            _smallest([p.orphan_example for p in problems if p.orphans], first.names[0]),
            sum(p.extras for p in problems),
            _smallest([p.extra_example for p in problems if p.extras], first.names[1]),
        )

    def raise_first(self) -> None:
        """Raise the error one link raises first: each side's null then duplicated keys,
        originals first, then keys without a match on the other side."""
        for k, role in enumerate(("originals", "avatars")):
            keys = list(self.names[k])
            if self.nulls[k]:
                msg = (
                    f"key {keys} of {role} is null in {self.nulls[k]} rows, "
                    f"{self._named(k, self.null_examples[k])}; every record needs a key"
                )
                raise ComputeError(msg)
            if self.duplicated[k]:
                msg = (
                    f"key {keys} is not unique in {role}: {self.duplicated[k]} rows share a "
                    f"key, {self._named(k, self.duplicated_examples[k])}"
                )
                raise DuplicateError(msg)
        if self.orphans:
            msg = (
                f"{self.orphans} originals have no avatar with the same key {self._key(0)}, "
                f"{self._named(0, self.orphan_example)}"
            )
            raise ComputeError(msg)
        if self.extras:
            msg = (
                f"{self.extras} avatars have no original with the same key {self._key(1)}, "
                f"{self._named(1, self.extra_example)}"
            )
            raise ComputeError(msg)

    def _key(self, side: int) -> str:
        """The key columns of ``side``, `quoted`, and the other side's where they differ: a
        message names the columns, whatever it shows of the values."""
        own, other = self.names[side], self.names[1 - side]
        whose = "avatars'" if side == 0 else "originals'"
        return quoted(own) if own == other else f"{quoted(own)} (the {whose} {quoted(other)})"

    def _named(self, side: int, example: Example | None) -> str:
        """``e.g. {...}``, an example key of the avatars (the released set); nothing of the
        originals', whose values are never quoted (`QUOTED_ROLES`)."""
        if side == 0:
            return "its values not shown (they are the originals')"
        return f"e.g. {dict(zip(self.names[side], example or (), strict=True))}"


def _first(examples: list[Example | None], names: Sequence[str]) -> Example | None:
    return examples[0] if examples else None


def _smallest(examples: list[Example | None], names: Sequence[str]) -> Example | None:
    """The smallest key in Polars' order (the order `link_by_key` sorts by)."""
    if not examples:
        return None
    frame = pl.DataFrame(examples, schema=list(names), orient="row", infer_schema_length=None)
    return frame.sort(frame.columns).row(0)


def link_by_key(
    left: pl.DataFrame, right: pl.DataFrame, left_keys: Sequence[str], right_keys: Sequence[str]
) -> tuple[np.ndarray | None, KeyProblems]:
    """The row of ``right`` holding each row of ``left``'s match, and the problems found.

    Both sides are sorted by key: duplicates are neighbours, and the link holds exactly
    when the two sorted key columns are equal. This costs a few bytes per record where a
    hash join would build a table of every key. The order is None when there is a problem.
    """
    nulls, null_examples, duplicated, duplicated_examples, by_key = [], [], [], [], []
    for frame, keys in ((left, left_keys), (right, right_keys)):
        unset = frame.select(keys).filter(pl.any_horizontal(pl.col(keys).is_null()))
        nulls.append(unset.height)
        null_examples.append(unset.row(0) if unset.height else None)
        rows, ordered, shared, example = _sorted_by_key(frame, keys)
        duplicated.append(shared)
        duplicated_examples.append(example)
        by_key.append((rows, ordered))
    (left_rows, left_sorted), (right_rows, right_sorted) = by_key
    names = (tuple(left_keys), tuple(right_keys))
    problems = KeyProblems(
        names,
        (nulls[0], nulls[1]),
        (null_examples[0], null_examples[1]),
        (duplicated[0], duplicated[1]),
        (duplicated_examples[0], duplicated_examples[1]),
    )
    if problems:
        return None, problems
    right_sorted.columns = left_sorted.columns
    if left_sorted.height == right_sorted.height and left_sorted.equals(right_sorted):
        order = np.empty(left.height, dtype=np.int64)
        order[left_rows] = right_rows
        return order, problems
    orphans = left_sorted.join(right_sorted, on=left_sorted.columns, how="anti")
    extras = right_sorted.join(left_sorted, on=left_sorted.columns, how="anti")
    return None, KeyProblems(
        names,
        orphans=orphans.height,
        orphan_example=orphans.sort(orphans.columns).row(0) if orphans.height else None,
        extras=extras.height,
        extra_example=extras.sort(extras.columns).row(0) if extras.height else None,
    )


def _sorted_by_key(
    frame: pl.DataFrame, keys: Sequence[str]
) -> tuple[np.ndarray, pl.DataFrame, int, Example | None]:
    """The rows of ``frame`` in key order, its keys in that order, how many rows share a
    key, and the smallest such key."""
    rows = frame.select(pl.arg_sort_by(list(keys)).alias(_AVATAR_ROW)).to_series()
    # The keys sorted by value, not gathered by ``rows``: the same values (rows that tie
    # hold equal keys) at a fifth of the cost (no random reads; 2 s against 9.6 at 1e8).
    ordered = frame.select(keys).sort(list(keys))
    same = pl.all_horizontal(pl.col(k).eq_missing(pl.col(k).shift(1)) for k in keys)
    repeated = ordered.select(same.fill_null(False).alias(_AVATAR_ROW)).to_series()
    if not repeated.any():
        return rows.to_numpy(), ordered, 0, None
    shared = int((repeated | repeated.shift(-1, fill_value=False)).sum())
    return rows.to_numpy(), ordered, shared, ordered.row(int(repeated.arg_true()[0]))


def overlapping_rows(
    originals: pl.LazyFrame, other: pl.LazyFrame, *, exclude: Collection[str] = ()
) -> tuple[int, int, float]:
    """How many records of ``other`` (a holdout) equal an original exactly, on every column
    of the originals but ``exclude`` (the link's keys) that ``other`` holds, compared as the
    avatars' features are (`common_feature_type`, categories as their text; missing values
    equal); how many records ``other`` has; and, when some do, the share of the originals
    that equal another original: what a sample of the same table shares by chance (0.0 when
    none do)."""
    left, right = originals.collect_schema(), other.collect_schema()
    names = [name for name in left.names() if name not in exclude and name in right]
    rows = int(other.select(pl.len()).collect().item())
    if not names or not rows:
        return 0, rows, 0.0

    def compared(schema: pl.Schema) -> list[pl.Expr]:
        columns = []
        for name in names:
            common = common_feature_type(name, left[name], right[name], "holdout")
            column = as_text_if_category(pl.col(name), schema[name])
            columns.append(column if common is None else column.cast(common))
        return columns

    copies = other.select(compared(right)).join(
        originals.select(compared(left)).unique(), on=names, how="semi", nulls_equal=True
    )
    found = int(copies.select(pl.len()).collect().item())
    if not found:
        return 0, rows, 0.0
    repeated = originals.select(pl.struct(compared(left)).is_duplicated().mean()).collect()
    return found, rows, float(repeated.item() or 0.0)
