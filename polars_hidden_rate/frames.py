"""From frames to coordinate arrays: resolve columns and links, read and align them.

Plan-time checks use only the schemas, so a LazyFrame stays lazy; the data
checks run when :func:`read_aligned` collects the few columns it needs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl
import polars.selectors as cs
from polars.exceptions import (
    ColumnNotFoundError,
    ComputeError,
    DuplicateError,
    NoDataError,
    SchemaError,
    ShapeError,
)

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import check_count

ColumnSpec = str | Sequence[str] | cs.Selector | pl.Expr
"""Columns given by name, a list of names, a Polars selector, or an expression that only
selects columns (``pl.col("a", "b")``, ``pl.col("^Dim.*$")``)."""

OUTPUT_COLUMNS = ("local_cloaking", "hidden")
RESERVED_PREFIX = "__polars_hidden_rate"
"""Columns this package adds inside its plans start with this prefix."""
_AVATAR_ROW = f"{RESERVED_PREFIX}_avatar_row"
# Float64 holds every integer up to this magnitude exactly; beyond, distinct values may merge.
EXACT_INTEGER_LIMIT = 2**53
# Decimals of at most this many digits come back from their nearest float64 (DBL_DIG).
_FLOAT64_DIGITS = 15


@dataclass(frozen=True)
class Aligned:
    """Linked coordinates (row ``i`` with row ``i``) and columns carried from the same read:
    ``carried`` of each original, ``carried_avatars`` of its own avatar (same row order)."""

    originals: Float64Array
    avatars: Float64Array
    carried: pl.DataFrame
    carried_avatars: pl.DataFrame = field(default_factory=pl.DataFrame)
    # The fitted projection the coordinates come from (None for given coords), and per
    # categorical feature the avatars whose value is none of the originals' modalities.
    projection: Any = None
    unseen: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Link:
    """How each original finds its own avatar: by key columns, or by row order when empty."""

    left: tuple[str, ...] = ()
    right: tuple[str, ...] = ()
    # Per key pair, the type both sides are cast to before matching (None: no cast).
    common_types: tuple[pl.DataType | None, ...] = ()

    @property
    def by_row_order(self) -> bool:
        return not self.left

    def key_columns(self, side: Literal["left", "right"]) -> list[pl.Expr]:
        """The key columns of one side, cast to the types both sides share."""
        names = self.left if side == "left" else self.right
        return [
            pl.col(name) if dtype is None else pl.col(name).cast(dtype)
            for name, dtype in zip(names, self.common_types, strict=True)
        ]


# The conversion into polars of what people pass instead of a frame, by its type.
_CONVERSIONS = {
    "pandas.DataFrame": "pl.from_pandas({role})",
    "pyarrow.Table": "pl.from_arrow({role})",
    "pyarrow.RecordBatch": "pl.from_arrow({role})",
    "polars.Series": "{role}.to_frame()",
}


def as_lazy(frame: pl.DataFrame | pl.LazyFrame, role: str) -> pl.LazyFrame:
    """The frame as a LazyFrame, or a TypeError naming its role, its type in full
    (``pandas.DataFrame``) and, for pandas and pyarrow, the conversion."""
    if isinstance(frame, pl.LazyFrame):
        return frame
    if isinstance(frame, pl.DataFrame):
        return frame.lazy()
    kind = type(frame)
    package = kind.__module__.partition(".")[0]
    name = kind.__qualname__ if package == "builtins" else f"{package}.{kind.__qualname__}"
    msg = f"{role} must be a polars DataFrame or LazyFrame, got {name}"
    if name in _CONVERSIONS:
        msg += f"; convert it first: {_CONVERSIONS[name].format(role=role)}"
    raise TypeError(msg)


def resolve_columns(spec: ColumnSpec, schema: pl.Schema, role: str, option: str) -> list[str]:
    """Expand names, a selector or a column-selecting expression against ``schema``; every
    name must exist. Unordered collections (sets, dict views) are refused: the order of the
    columns matters (``ncp`` takes the first ones) and theirs changes from run to run."""
    if isinstance(spec, pl.Expr):
        names = _selected(spec, schema, role, option)
    elif isinstance(spec, str):
        names = [spec]
    elif isinstance(spec, AbstractSet | Mapping):
        msg = (
            f"`{option}` must be ordered: got a {type(spec).__name__}, whose order changes from "
            f"run to run; give the columns as a list or tuple, e.g. {sorted(map(str, spec))}"
        )
        raise TypeError(msg)
    else:
        names = list(spec)
        if not all(isinstance(name, str) for name in names):
            msg = f"`{option}` must be column names or a selector, got {spec!r}"
            raise TypeError(msg)
    missing = [name for name in names if name not in schema]
    if missing:
        msg = f"{option} column {missing[0]!r} not found in {role}; available: {schema.names()}"
        raise ColumnNotFoundError(msg)
    if not names:
        msg = f"`{option}` selects no column of {role}"
        raise ColumnNotFoundError(msg)
    if len(set(names)) != len(names):
        msg = f"`{option}` names a column twice: {names}"
        raise DuplicateError(msg)
    return names


def _selected(spec: pl.Expr, schema: pl.Schema, role: str, option: str) -> list[str]:
    """The columns of ``schema`` a selector, or an expression that only selects, picks."""
    if not isinstance(spec, cs.Selector):
        if not spec.meta.is_column_selection():
            msg = (
                f"`{option}` must only select columns (names, a selector, pl.col(...)); got "
                f"{spec}, which computes new values"
            )
            raise TypeError(msg)
        spec = spec.meta.as_selector()
    try:
        return pl.LazyFrame(schema=schema).select(spec).collect_schema().names()
    except ColumnNotFoundError as error:
        reason = str(error).splitlines()[0]
        msg = f"{option} {spec} selects a column not in {role} ({reason})"
        msg += f"; available: {schema.names()}"
        raise ColumnNotFoundError(msg) from None


def is_selection(spec: ColumnSpec | None) -> bool:
    """Whether ``spec`` picks columns by a rule (a selector or expression), not by name."""
    return isinstance(spec, pl.Expr)


def shared_schema(originals: pl.Schema, avatars: pl.Schema) -> pl.Schema:
    """The columns both frames hold, in the originals' order and types: where a selector
    is resolved, so that it picks no column that one side lacks."""
    return pl.Schema({name: dtype for name, dtype in originals.items() if name in avatars})


def resolve_coords(
    coords: ColumnSpec,
    ncp: int | None,
    originals: pl.Schema,
    avatars: pl.Schema,
) -> list[str]:
    """The first ``ncp`` coordinate columns; numeric and present in both frames."""
    names = resolve_columns(coords, originals, "originals", "coords")
    for name in names:
        if name not in avatars:
            msg = f"coords column {name!r} not found in avatars; available: {avatars.names()}"
            raise ColumnNotFoundError(msg)
        for role, schema in (("originals", originals), ("avatars", avatars)):
            if not schema[name].is_numeric():
                msg = f"coords column {name!r} of {role} must be numeric, got {schema[name]}"
                raise SchemaError(msg)
    return names[: check_ncp(ncp, len(names))]


def check_ncp(ncp: int | None, available: int) -> int:
    """``ncp`` itself, or ``available`` when None; ValueError unless 1 <= ncp <= available."""
    if ncp is None:
        return available
    ncp = check_count(ncp, "ncp")
    if ncp > available:
        msg = f"`ncp` must satisfy 1 <= ncp <= {available}, got ncp={ncp}"
        raise ValueError(msg)
    return ncp


def resolve_link(
    on: str | Sequence[str] | None,
    left_on: str | Sequence[str] | None,
    right_on: str | Sequence[str] | None,
    originals: pl.Schema,
    avatars: pl.Schema,
) -> Link:
    """Key columns that link originals to avatars, after Polars' join conventions."""
    if on is not None and (left_on is not None or right_on is not None):
        msg = "give either `on`, or both `left_on` and `right_on`, not both"
        raise ValueError(msg)
    if on is not None:
        left_on = right_on = on
    if left_on is None and right_on is None:
        return Link()
    if left_on is None or right_on is None:
        msg = "`left_on` and `right_on` must be given together"
        raise ValueError(msg)
    left = resolve_columns(left_on, originals, "originals", "key")
    right = resolve_columns(right_on, avatars, "avatars", "key")
    if len(left) != len(right):
        msg = f"`left_on` has {len(left)} keys but `right_on` has {len(right)}"
        raise ValueError(msg)
    common = tuple(
        _common_key_type(lname, originals[lname], rname, avatars[rname])
        for lname, rname in zip(left, right, strict=True)
    )
    return Link(tuple(left), tuple(right), common)


def _common_key_type(
    lname: str, ltype: pl.DataType, rname: str, rtype: pl.DataType
) -> pl.DataType | None:
    """None for equal types; Int64 for two integer types (csv reads UInt32 ids as Int64);
    String for two text types; otherwise a SchemaError naming both keys."""
    if ltype == rtype:
        return None
    if ltype.is_integer() and rtype.is_integer() and pl.UInt64 not in (ltype, rtype):
        return pl.Int64()
    text = (pl.String, pl.Categorical, pl.Enum)
    if isinstance(ltype, text) and isinstance(rtype, text):
        return pl.String()
    msg = f"key {lname!r} of originals is {ltype} but key {rname!r} of avatars is {rtype}"
    raise SchemaError(msg)


def check_output_free(schema: pl.Schema) -> None:
    """The originals must not already hold a column this package adds."""
    for name in OUTPUT_COLUMNS:
        if name in schema:
            msg = f"originals already have a column named {name!r}; rename or drop it first"
            raise DuplicateError(msg)


def check_unreserved(schema: pl.Schema, role: str) -> None:
    """No column may use the prefix of the columns this package adds inside its plans."""
    for name in schema.names():
        if name.startswith(RESERVED_PREFIX):
            msg = (
                f"column {name!r} of {role} starts with {RESERVED_PREFIX!r}, which this package "
                "reserves for its own columns; rename it first"
            )
            raise DuplicateError(msg)


def read_aligned(
    originals: pl.LazyFrame,
    avatars: pl.LazyFrame,
    columns: Sequence[str],
    link: Link,
    carry: Sequence[pl.Expr] = (),
    carry_avatars: Sequence[pl.Expr] = (),
) -> Aligned:
    """Collect ``columns`` of both frames as float64, avatars reordered to match the originals.

    Row ``i`` of the avatars array is the avatar of row ``i`` of the originals, and
    row ``i`` of ``carried`` holds the ``carry`` expressions of that original, from
    the same read (row ``i`` of ``carried_avatars``, ``carry_avatars`` of its avatar).
    Reads only ``columns``, the key columns and what the carried expressions need.
    """
    columns = list(columns)
    left = originals.select(
        *link.key_columns("left"), *(c for c in columns if c not in link.left), *carry
    ).collect()
    right = avatars.select(
        *link.key_columns("right"), *(c for c in columns if c not in link.right), *carry_avatars
    ).collect()
    _check_finite(left, columns, "originals")
    _check_finite(right, columns, "avatars")
    carried = left.select(expr.meta.output_name() for expr in carry)
    carried_avatars = right.select(expr.meta.output_name() for expr in carry_avatars)
    order = None
    if not link.by_row_order:
        order = _avatar_order(left, right, link)
    elif left.height != right.height:
        msg = (
            f"originals have {left.height} rows but avatars have {right.height}; "
            "linking by row order needs equal heights (or give `on`)"
        )
        raise ShapeError(msg)
    # The frames go (keys too, but what `carried` holds); the coordinate columns are
    # converted, and let go, one at a time.
    left_columns = _take(left.get_columns(), columns)
    right_columns = _take(right.get_columns(), columns)
    del left, right
    originals_array = _to_float64(left_columns)
    if order is not None and carried_avatars.width:
        carried_avatars = carried_avatars[order]
    return Aligned(originals_array, _to_float64(right_columns, order), carried, carried_avatars)


def _take(series: list[pl.Series], names: list[str]) -> list[pl.Series]:
    """The series named ``names``, in that order; the others are let go."""
    by_name = {column.name: column for column in series}
    series.clear()
    return [by_name.pop(name) for name in names]


def _to_float64(columns: list[pl.Series], rows: np.ndarray | None = None) -> Float64Array:
    """``columns`` (of ``rows``, in that order) as a new C-order float64 array that no one
    else holds, emptying the list: each column is let go once copied, so the data is held
    twice one column at a time, not as a whole."""
    out = np.empty((len(columns[0]) if rows is None else len(rows), len(columns)))
    columns.reverse()
    for k in range(out.shape[1]):
        values = columns.pop().cast(pl.Float64).to_numpy()
        out[:, k] = values if rows is None else values[rows]
    return out


def _check_finite(frame: pl.DataFrame, columns: list[str], role: str) -> None:
    """Rows to measure, and every coordinate a finite number that float64 holds exactly."""
    if frame.height == 0:
        msg = f"{role} is empty: there is nothing to measure"
        raise NoDataError(msg)
    as_float = {c: pl.col(c).cast(pl.Float64) for c in columns}
    raise_missing(missing_values(frame, as_float), f"coords of {role}", rows=frame.height)
    dtypes = {c: frame.schema[c] for c in columns}
    raise_inexact(inexact_counts(frame, dtypes), dtypes, "coords column", role)


def inexact_values(column: pl.Expr, dtype: pl.DataType) -> pl.Expr | None:
    """Where float64 does not hold a value of ``dtype`` faithfully (a boolean expression of
    ``column``), or None when it holds every value of that type.

    The one exact-number rule, for every numeric type: an integer (of any width, signed or
    not, or a Decimal of scale 0) must lie within 2^53 in magnitude, where float64 holds every
    integer exactly; a decimal fraction is read as its nearest float64, as a decimal text is,
    and must come back from it, so that no two values of its type become one float64. Floats
    are float64 already (Float32 widens exactly).
    """
    if isinstance(dtype, pl.Decimal):
        digits = 38 if dtype.precision is None else dtype.precision
        if digits <= _FLOAT64_DIGITS:
            return None
        if dtype.scale == 0:
            return (column > EXACT_INTEGER_LIMIT) | (column < -EXACT_INTEGER_LIMIT)
        back = column.cast(pl.Float64).cast(dtype, strict=False)
        return back.ne_missing(column)
    if dtype.is_integer() and dtype not in _SMALL_INTEGERS:
        return (column > EXACT_INTEGER_LIMIT) | (column < -EXACT_INTEGER_LIMIT)
    return None


_SMALL_INTEGERS = (pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16, pl.UInt32)


def inexact_counts(
    frame: pl.DataFrame | pl.LazyFrame, dtypes: Mapping[str, pl.DataType]
) -> dict[str, int]:
    """How many values of each column of ``dtypes`` break :func:`inexact_values`; columns
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
    :func:`inexact_values`, if any."""
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
    """A ComputeError for null, NaN or infinite values (:func:`raise_missing`): callers that
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
    """A :class:`MissingValuesError` naming every column of ``what`` with missing values,
    if any."""
    if not missing:
        return
    culprits = ", ".join(
        f"{column!r} ({count} {kind})" for (column, kind), count in missing.items()
    )
    where = f" in {rows} rows" if rows is not None else ""
    raise MissingValuesError(f"{what} have missing values: {culprits}{where}{hint}")


def _avatar_order(left: pl.DataFrame, right: pl.DataFrame, link: Link) -> np.ndarray:
    """Row of ``right`` holding each original's avatar; every key unique, set and matched."""
    order, problems = link_by_key(left, right, link.left, link.right)
    problems.raise_first()
    assert order is not None  # no problem: every key matched
    return order


Example = tuple[Any, ...]
"""A key's values, in the order of the key columns."""


@dataclass(frozen=True)
class KeyProblems:
    """What is wrong with the keys of a link, counted, each with an example key.

    :func:`link_by_key` finds them without raising, so that the pieces of one link (a
    cluster's key buckets) can each report theirs and the sum (:meth:`combine`) raises the
    error one link would (:meth:`raise_first`). Side 0 is the originals, side 1 the avatars.
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
                    f"e.g. {self._named(k, self.null_examples[k])}; every record needs a key"
                )
                raise ComputeError(msg)
            if self.duplicated[k]:
                msg = (
                    f"key {keys} is not unique in {role}: {self.duplicated[k]} rows share a "
                    f"key, e.g. {self._named(k, self.duplicated_examples[k])}"
                )
                raise DuplicateError(msg)
        if self.orphans:
            msg = (
                f"{self.orphans} originals have no avatar with the same key, "
                f"e.g. {self._named(0, self.orphan_example)}"
            )
            raise ComputeError(msg)
        if self.extras:
            msg = (
                f"{self.extras} avatars have no original with the same key, "
                f"e.g. {self._named(1, self.extra_example)}"
            )
            raise ComputeError(msg)

    def _named(self, side: int, example: Example | None) -> dict[str, Any]:
        return dict(zip(self.names[side], example or (), strict=True))


def _first(examples: list[Example | None], names: Sequence[str]) -> Example | None:
    return examples[0] if examples else None


def _smallest(examples: list[Example | None], names: Sequence[str]) -> Example | None:
    """The smallest key in Polars' order (the order :func:`link_by_key` sorts by)."""
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
    ordered = frame.select(pl.col(list(keys)).gather(rows))
    same = pl.all_horizontal(pl.col(k).eq_missing(pl.col(k).shift(1)) for k in keys)
    repeated = ordered.select(same.fill_null(False).alias(_AVATAR_ROW)).to_series()
    if not repeated.any():
        return rows.to_numpy(), ordered, 0, None
    shared = int((repeated | repeated.shift(-1, fill_value=False)).sum())
    return rows.to_numpy(), ordered, shared, ordered.row(int(repeated.arg_true()[0]))
