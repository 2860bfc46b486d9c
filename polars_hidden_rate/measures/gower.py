"""anonymeter's space: its Gower-like distance between records of mixed types, exactly as
anonymeter 1.1 computes it (``anonymeter/neighbors/mixed_types_kneighbors.py`` and
``anonymeter/preprocessing/transformations.py``), for the attacks that take
``space="gower"``.

- **Columns.** A column of an integer or float type is numeric, any other (text,
  categories, booleans, dates, decimals) categorical, as pandas' ``select_dtypes("number")``
  splits what ``to_pandas`` makes of them (a Decimal becomes Python objects); a column must
  be of the same kind in every set. The numeric columns come first, sorted by name, then the
  categorical ones, sorted by name: the order anonymeter sums them in. The types pandas
  would compute otherwise are refused, with the cast that makes both agree: Float32 and
  Float16 (pandas scales them in their own precision), a Duration (a number to pandas, not
  to polars), and a signed integer narrower than 64 bits whose range over a search exceeds
  its type's largest value (pandas' range wraps).
- **Scaling.** For one search (the candidates, the records searched among, and the
  queries), each numeric column is divided by its range over the union of the two:
  ``max(max_c, max_q) - min(min_c, min_q)`` in float64, or 1 where that is 0. So the members' attack
  and the control's are scaled apart, each over the synthetic set and its own targets.
- **Distance.** ``sum |a_i / r_i - b_i / r_i|`` over the numeric columns, in their order,
  then plus 1 for each categorical column where the two differ (a missing category is a
  category of its own, as anonymeter's label encoding makes it); the float64 operations
  of anonymeter's loop, one after the other, so the very same floats.
- **Missing and infinite numbers** are refused, as in the projected space
  (`polars_hidden_rate.frames.missing_values`): anonymeter's distance is NaN there (an
  infinite value also makes its column's range infinite) and the record sorts last, which
  is no rule an attack can be judged by.

The searches are exact and sub-quadratic: a kd-tree of the scaled synthetic records
(`polars_hidden_rate.engine.nearest.k_nearest`), pruned by an L1 bound on the numeric
columns plus one per category outside a box's codes, which never exceeds a record's
float64 distance, so every record that ties at the edge is found; none is sampled.
Arrays out, for the attacks above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, cast

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, SchemaError

from polars_hidden_rate._types import BoolArray, CountArray, Float64Array
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import TreeSearch, distinct_groups, query_blocks
from polars_hidden_rate.frames import (
    inexact_counts,
    is_text,
    missing_values,
    raise_inexact,
    raise_missing,
)
from polars_hidden_rate.plan import CountOptions, require_cpu
from polars_hidden_rate.progress import Progress

Space = Literal["projected", "gower"]
"""Where an attack measures: ``"projected"``, the package's projection fitted on the
originals (the space of local cloaking), or ``"gower"``, anonymeter's distance."""

ANONYMETER_EPSILON = 1e-12
"""anonymeter divides a numeric guess's miss by the guess plus this."""

PROJECTION_OPTIONS = ("coords", "features", "ncp", "categorical", "impute")


def check_space(space: object, caller: str) -> Space:
    """``space`` checked: ``"projected"`` or ``"gower"``."""
    if space not in ("projected", "gower"):
        msg = f"{caller}(): `space` must be 'projected' or 'gower', got {space!r}"
        raise ValueError(msg)
    return space


def refuse_projection_options(options: Mapping[str, object], caller: str) -> None:
    """The options that shape the projection have no meaning in anonymeter's space."""
    for option in PROJECTION_OPTIONS:
        if options.get(option) not in (None, "none"):
            msg = (
                f"{caller}(space='gower') takes no `{option}`: it shapes the package's "
                "projection, and anonymeter's distance takes the columns by their types"
            )
            raise ValueError(msg)
    require_cpu(cast("CountOptions", options), caller)


NARROW_SIGNED: dict[type[pl.DataType], int] = {
    pl.Int8: 2**7 - 1,
    pl.Int16: 2**15 - 1,
    pl.Int32: 2**31 - 1,
}
"""Signed integer types narrower than 64 bits, with the largest range pandas holds in each:
beyond it, its ``max - min`` wraps."""


def gower_kind(name: str, dtype: pl.DataType, role: str) -> Literal["numeric", "categorical"]:
    """How anonymeter takes a column of ``dtype``: numeric where pandas' ``select_dtypes(
    "number")`` counts what ``to_pandas`` makes of it a number (integers, floats), categorical
    otherwise (a Decimal becomes Python objects); a SchemaError for the types pandas computes
    otherwise than this package would."""
    if dtype.is_float() and dtype != pl.Float64:  # Float32, Float16
        msg = (
            f"column {name!r} is {dtype} in {role}: pandas scales it in {dtype} for "
            "anonymeter's distance, not in float64; cast it to Float64 first (anonymeter "
            "then gives the same figure), or use space='projected'"
        )
        raise SchemaError(msg)
    if isinstance(dtype, pl.Duration):
        msg = (
            f"column {name!r} is {dtype} in {role}: pandas' select_dtypes counts a duration "
            "a number, polars' types do not, and the two would measure it apart; cast it to a "
            "number (`.dt.total_seconds()`) or to text first"
        )
        raise SchemaError(msg)
    if isinstance(dtype, pl.Decimal):
        return "categorical"
    return "numeric" if dtype.is_numeric() else "categorical"


@dataclass(frozen=True)
class GowerColumns:
    """The columns of one search in anonymeter's order: numeric (sorted), then categorical
    (sorted); ``narrow`` holds, for each numeric column, the narrowest signed integer type
    narrower than 64 bits it has in a set (None where it has none)."""

    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    narrow: tuple[pl.DataType | None, ...]

    @classmethod
    def of(cls, names: Sequence[str], schemas: Mapping[str, pl.Schema]) -> GowerColumns:
        """The kinds of ``names`` in the sets' ``schemas``, which must agree."""
        numeric: list[str] = []
        categorical: list[str] = []
        narrow: list[pl.DataType | None] = []
        first = next(iter(schemas))
        for name in sorted(names):
            kinds = {role: gower_kind(name, schema[name], role) for role, schema in schemas.items()}
            if len(set(kinds.values())) > 1:
                other = next(s[name] for r, s in schemas.items() if kinds[r] != kinds[first])
                msg = (
                    f"column {name!r} is {schemas[first][name]} in {first} but {other} "
                    "elsewhere: anonymeter's distance needs it numeric in every set, or in "
                    "none (a Decimal is categorical there, as pandas holds it); cast one side "
                    "to the other's type"
                )
                raise SchemaError(msg)
            if kinds[first] == "numeric":
                numeric.append(name)
                found = [s[name] for s in schemas.values() if type(s[name]) in NARROW_SIGNED]
                narrow.append(min(found, key=lambda t: NARROW_SIGNED[type(t)], default=None))
            else:
                categorical.append(name)
        return cls(tuple(numeric), tuple(categorical), tuple(narrow))

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.numeric, *self.categorical)

    def arrays(self, read: Mapping[str, pl.DataFrame]) -> dict[str, Float64Array]:
        """Each set's columns as float64 of shape ``(n, d)`` in this order: numbers as they
        are (refused when missing, infinite or beyond float64's exact integers), categories
        as codes shared by the sets (a missing value one more code)."""
        columns: dict[str, list[np.ndarray]] = {role: [] for role in read}
        for role, frame in read.items():
            dtypes = {name: frame.schema[name] for name in self.numeric}
            raise_inexact(inexact_counts(frame, dtypes), dtypes, "column", role)
            as_float = {name: pl.col(name).cast(pl.Float64) for name in self.numeric}
            raise_missing(
                missing_values(frame, as_float),
                f"columns of {role}",
                hint=(
                    "; anonymeter's distance to them is NaN: drop or fill those values first "
                    "(space='projected' fills null and NaN with `impute`)"
                ),
            )
            columns[role] += [frame.get_column(n).cast(pl.Float64).to_numpy() for n in self.numeric]
        for name in self.categorical:
            parts = [frame.get_column(name) for frame in read.values()]
            if all(is_text(part.dtype) for part in parts):
                parts = [part.cast(pl.String) for part in parts]
            codes = pl.concat(parts).rank("dense").fill_null(0).cast(pl.Float64).to_numpy()
            ends = np.cumsum([0, *(len(part) for part in parts)])
            for k, role in enumerate(read):
                columns[role].append(codes[ends[k] : ends[k + 1]])
        return {
            role: np.column_stack(arrays) if arrays else np.empty((read[role].height, 0))
            for role, arrays in columns.items()
        }

    def scaled(
        self, candidates: Float64Array, queries: Float64Array
    ) -> tuple[Float64Array, Float64Array]:
        """anonymeter's ``_scale_numerical`` of one search: each numeric column divided by
        its range over both arrays (1 where it is 0); the categorical codes as they are."""
        candidates, queries = candidates.copy(), queries.copy()
        for k, name in enumerate(self.numeric):
            both = (candidates[:, k], queries[:, k])
            low = min(float(part.min(initial=np.inf)) for part in both)
            high = max(float(part.max(initial=-np.inf)) for part in both)
            width = high - low  # in float64, as pandas takes it over mixed columns
            narrow = self.narrow[k]
            if narrow is not None and width > NARROW_SIGNED[type(narrow)]:
                msg = (
                    f"column {name!r} is {narrow} and its range over the synthetic set and "
                    f"the targets exceeds {narrow}'s largest value: pandas' range wraps "
                    "there, and anonymeter's scaling with it; cast it to Int64 first"
                )
                raise ComputeError(msg)
            width = 1.0 if width == 0.0 else width
            for part in both:
                part /= width
        return candidates, queries


def gower_search(
    columns: GowerColumns,
    synthetic: Float64Array,
    targets: Float64Array,
    *,
    threads: int | None = None,
    copies: CountArray | None = None,
) -> TreeSearch:
    """A search of the synthetic records for the targets in anonymeter's space (both scaled
    over the synthetic set and these targets); ``copies``: the records each row of
    ``synthetic`` stands for (`distinct_groups`; the scaling's ranges are the same)."""
    candidates, queries = columns.scaled(synthetic, targets)
    threads = threads or usable_cores()
    tree = KdTree.build(candidates, threads=threads, overwrite_input=True)
    return TreeSearch(tree, queries, threads, len(columns.numeric), copies)


def anonymeter_right(
    guesses: Float64Array,
    secrets: Float64Array,
    kind: Literal["categorical", "numeric"],
    tolerance: float,
) -> BoolArray:
    """``right[i]``: whether guess ``guesses[i]`` is right for secret ``secrets[i]`` by
    anonymeter's ``evaluate_inference_guesses``: equal (categorical), or ``|g - s| / (g +
    1e-12) <= tolerance`` (numeric), or both missing."""
    g, s = guesses, secrets
    if kind == "numeric":
        with np.errstate(divide="ignore", invalid="ignore"):
            right = np.abs(g - s) / (g + ANONYMETER_EPSILON) <= tolerance
    else:
        right = g == s
    found: BoolArray = right | (np.isnan(g) & np.isnan(s))
    return found


def inference_shares(
    columns: GowerColumns,
    synthetic: Float64Array,
    targets: Float64Array,
    guesses: Float64Array,
    secrets: Float64Array,
    *,
    kind: Literal["categorical", "numeric"],
    tolerance: float,
    tie_tol: float,
    threads: int | None = None,
    bar: Progress | None = None,
) -> Float64Array:
    """Each target's chance of a right guess from its nearest synthetic record in
    anonymeter's space (scaled over the synthetic set and these targets): ``matching /
    tied`` over the synthetic records whose distance is at most the nearest's times ``1 +
    tie_tol``. ``guesses`` are the synthetic records' secrets, ``secrets`` the targets'."""
    # Records identical on the known columns and in their secret are one candidate with
    # its copies: where they tie by the thousand, the walk finds each group once.
    _, on_known, _ = distinct_groups(synthetic)
    _, by_guess = np.unique(
        np.asarray(guesses, dtype=np.float64).view(np.int64), return_inverse=True
    )
    _, first, copies = np.unique(
        on_known * (int(by_guess.max(initial=0)) + 1) + by_guess.reshape(-1),
        return_index=True,
        return_counts=True,
    )
    search = gower_search(
        columns, synthetic[first], targets, threads=threads, copies=copies.astype(np.int64)
    )
    guesses = np.asarray(guesses, dtype=np.float64)[first]
    shares = np.empty(len(targets), dtype=np.float64)

    def share(rows: slice) -> int:
        nearest = search.k_nearest(rows, 1, tie_tol=tie_tol, bar=bar)
        owner = nearest.queries + rows.start
        right = anonymeter_right(guesses[nearest.rows], secrets[owner], kind, tolerance)
        shares[rows] = nearest.counts(right) / nearest.counts()
        return len(nearest.rows)

    query_blocks(len(targets), share)
    return shares
