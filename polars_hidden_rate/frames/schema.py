"""Frames as this package takes them: the columns a request names, and the link between sides.

Plan-time checks use only the schemas, so a LazyFrame stays lazy; the data checks run when
`read_aligned` collects the few columns it needs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Literal

import polars as pl
import polars.selectors as cs
from polars.exceptions import (
    ColumnNotFoundError,
    DuplicateError,
    SchemaError,
)

from polars_hidden_rate.checks import check_ncp_option
from polars_hidden_rate.frames.dtypes import common_key_type

ColumnSpec = str | Sequence[str] | cs.Selector | pl.Expr
"""Columns given by name, a list of names, a Polars selector, or an expression that only
selects columns (``pl.col("a", "b")``, ``pl.col("^Dim.*$")``)."""

OUTPUT_COLUMNS = ("local_cloaking", "hidden")
RESERVED_PREFIX = "__polars_hidden_rate"
"""Columns this package adds inside its plans start with this prefix."""


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
        columns = []
        for name, dtype in zip(names, self.common_types, strict=True):
            columns.append(pl.col(name) if dtype is None else pl.col(name).cast(dtype))
        return columns


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
        for name in names:
            if not isinstance(name, str):
                msg = f"`{option}` must be column names or a selector, got {spec!r}"
                raise TypeError(msg)
    for name in names:  # the first missing one named
        if name not in schema:
            msg = f"{option} column {name!r} not found in {role}; available: {schema.names()}"
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


def resolve_coords(coords: ColumnSpec, originals: pl.Schema, avatars: pl.Schema) -> list[str]:
    """Every coordinate column ``coords`` gives (``ncp`` then takes the first: `check_ncp`);
    numeric and present in both frames."""
    names = resolve_columns(coords, originals, "originals", "coords")
    for name in names:
        if name not in avatars:
            msg = f"coords column {name!r} not found in avatars; available: {avatars.names()}"
            raise ColumnNotFoundError(msg)
        for role, schema in (("originals", originals), ("avatars", avatars)):
            if not schema[name].is_numeric():
                msg = f"coords column {name!r} of {role} must be numeric, got {schema[name]}"
                raise SchemaError(msg)
    return names


def check_ncp(ncp: object, available: int) -> int:
    """``ncp`` itself, or ``available`` when None or ``"all"``; ValueError unless
    1 <= ncp <= available."""
    wanted = None if ncp is None else check_ncp_option(ncp)
    if wanted is None or wanted == "all":
        return available
    if wanted > available:
        msg = f"`ncp` must satisfy 1 <= ncp <= {available} or be 'all', got ncp={wanted}"
        raise ValueError(msg)
    return wanted


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
        common_key_type(lname, originals[lname], rname, avatars[rname])
        for lname, rname in zip(left, right, strict=True)
    )
    return Link(tuple(left), tuple(right), common)


def default_features(
    originals: pl.Schema, avatars: pl.Schema | None, exclude: Collection[str]
) -> list[str]:
    """The features when none are given: the columns both frames hold (the originals' alone
    when there are no avatars), in the originals' order, less ``exclude`` (the keys: an
    avatar's key is not its content)."""
    return [
        name
        for name in originals.names()
        if (avatars is None or name in avatars) and name not in exclude
    ]


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
