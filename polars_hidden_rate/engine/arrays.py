"""The engine's boundary: the distance definition, the thresholds, and the checks every
array crosses on its way in.

Every count, on every path (the tree, the flat band, the GPU, the cluster's shards), is
settled against `squared_distances`: direct differences, squared and summed in
column order, in float64. `linked_arrays` brings linked coordinates to the
canonical scale (`polars_hidden_rate.engine.scale`) and gives each record its
threshold; `coordinates` and `linked_queries` check what a caller hands in.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.checks import check_tie_tol
from polars_hidden_rate.engine._kernels import (
    gather_column,
    pair_squared_distances,
    row_squared_distances,
)
from polars_hidden_rate.engine.parallel import parallel_map, usable_cores
from polars_hidden_rate.engine.scale import exponent_for, largest_magnitude, scaled_by

# Rows a thread gathers per task (`gather_into`).
GATHER_ROWS = 1 << 20


def squared_distances(
    originals: Float64Array,
    avatars: Float64Array,
    rows: IndexArray | slice,
    cols: IndexArray | slice,
) -> Float64Array:
    """Squared Euclidean distances ``d2(originals[rows], avatars[cols])`` in float64.

    This is the definition every count is settled against: direct differences,
    squared and summed in column order. ``rows`` and ``cols`` may be slices (no
    gather: `own_thresholds` pairs row ``i`` with row ``i``).
    """
    if not (isinstance(rows, slice) and isinstance(cols, slice)):
        # Gathered pairs a pair at a time (the same floats): a column at a time, each
        # gather jumps across the rows once per column (0.06 s against 0.16 s at 1e6 x 5).
        return pair_squared_distances(
            np.ascontiguousarray(originals, dtype=np.float64),
            np.ascontiguousarray(avatars, dtype=np.float64),
            _indices(rows, len(originals)),
            _indices(cols, len(avatars)),
        )
    paired = originals[rows], avatars[cols]
    if all(_rows_in_order(side) for side in paired) and paired[0].shape == paired[1].shape:
        # Rows in C order, a row at a time into one array: no temporary per column.
        return row_squared_distances(*paired)
    pairs = len(range(len(originals))[rows])
    total = np.zeros(pairs, dtype=np.float64)
    with np.errstate(over="ignore"):  # a square beyond float64's range is inf, as defined
        for k in range(originals.shape[1]):
            diff = originals[rows, k] - avatars[cols, k]
            total += diff * diff
    return total


def _indices(chosen: IndexArray | slice, length: int) -> IndexArray:
    """``chosen`` as int64 indices into ``length`` rows (negative ones from the end, as
    numpy takes them); one out of range is an IndexError, as numpy's gather raises it (the
    kernel checks none)."""
    if isinstance(chosen, slice):
        return np.arange(length, dtype=np.int64)[chosen]
    indices = np.ascontiguousarray(chosen, dtype=np.int64)
    if len(indices) and not (-length <= indices.min() and indices.max() < length):
        msg = f"an index is out of range for {length} rows"
        raise IndexError(msg)
    return np.where(indices < 0, indices + length, indices)


def own_thresholds(originals: Float64Array, avatars: Float64Array, tie_tol: float) -> Float64Array:
    """``T_i = d2(x_i, y_i) * (1 + tie_tol)``: a rival within ``T_i`` hides record ``i``."""
    if _rows_in_order(originals) and _rows_in_order(avatars) and originals.shape == avatars.shape:
        thresholds: Float64Array = row_squared_distances(originals, avatars)
    else:  # the same floats, a column at a time
        thresholds = squared_distances(originals, avatars, slice(None), slice(None))
    thresholds *= 1.0 + tie_tol  # in place: the same floats as a product into a new array
    return thresholds


def _rows_in_order(values: Float64Array) -> bool:
    """Float64 rows laid out one after the other (C order): read a row at a time."""
    return values.ndim == 2 and values.dtype == np.float64 and values.flags.c_contiguous


def linked_arrays(
    originals: npt.ArrayLike,
    avatars: npt.ArrayLike,
    tie_tol: float,
    *,
    overwrite_input: bool = False,
) -> tuple[Float64Array, Float64Array, Float64Array]:
    """Linked coordinates at the canonical scale, as contiguous float64, with each ``T_i``.

    Both arrays are multiplied by one power of two
    ([`canonical_scale`][polars_hidden_rate.engine.scale.canonical_scale]), exactly unless a
    coordinate falls below the normal range, before any ``d2`` is taken: data
    and the same data times ``2^k`` give bit-identical arrays, hence identical
    counts, and no square can overflow. With ``overwrite_input``, arrays that are
    already writable contiguous float64 are scaled in place.

    Raises
    ------
    TypeError, ValueError
        When the arrays are not 2-D arrays of numbers of the same shape, hold NaN
        or infinite coordinates, or ``tie_tol`` is not a finite number >= 0.
    """
    tie_tol = check_tie_tol(tie_tol)
    originals, avatars = linked_coordinates(originals, avatars)
    return at_canonical_scale(originals, avatars, tie_tol, overwrite_input=overwrite_input)


def linked_coordinates(originals: object, avatars: object) -> tuple[Float64Array, Float64Array]:
    """Both arrays as contiguous float64 of one shape ``(n, d)`` (`coordinates`), else a
    clear error."""
    originals, avatars = coordinates("originals", originals), coordinates("avatars", avatars)
    if originals.shape != avatars.shape:
        msg = (
            "`originals` and `avatars` must have the same shape (row i of one is linked to "
            f"row i of the other), got {originals.shape} and {avatars.shape}"
        )
        raise ValueError(msg)
    return originals, avatars


def at_canonical_scale(
    originals: Float64Array, avatars: Float64Array, tie_tol: float, *, overwrite_input: bool
) -> tuple[Float64Array, Float64Array, Float64Array]:
    """`linked_arrays` of checked arguments (`linked_coordinates`, `check_tie_tol`)."""
    # `canonical_scale` of the two, whose shapes are checked already.
    largest = max(largest_magnitude(originals, "originals"), largest_magnitude(avatars, "avatars"))
    if largest != 0.0:
        exponent = exponent_for(largest, originals.shape[1], tie_tol)
        originals, avatars = scaled_by(
            (originals, avatars), exponent, overwrite_input=overwrite_input
        )
    return originals, avatars, own_thresholds(originals, avatars, tie_tol)


def strictly_below(own: Float64Array) -> Float64Array:
    """The largest squared distance strictly below each own ``d2`` (-1 below a 0: nothing
    is strictly closer than a distance of 0), as thresholds of the strictly closer rivals."""
    below: Float64Array = np.where(own > 0, np.nextafter(own, -np.inf), -1.0)
    return below


def coordinates(name: str, values: object) -> Float64Array:
    """``values`` as a contiguous float64 array of shape ``(n, d)``, else a clear error."""
    array = np.asarray(values)
    if array.dtype.kind not in "iuf":
        msg = f"`{name}` must hold numbers (integers or floats), got dtype {array.dtype}"
        raise TypeError(msg)
    if array.ndim != 2:
        msg = f"`{name}` must be a 2-D array of shape (n, d), got shape {array.shape}"
        raise ValueError(msg)
    return np.ascontiguousarray(array, dtype=np.float64)


def linked_queries(
    queries: object, thresholds: object, own: object, avatars_shape: tuple[int, ...]
) -> tuple[Float64Array, Float64Array, IndexArray | None]:
    """Queries, their thresholds and own rows, checked against avatars of ``avatars_shape``;
    ``own=None`` (query ``i`` owns avatar ``i``) needs as many queries as avatars."""
    queries = coordinates("queries", queries)
    thresholds = np.ascontiguousarray(thresholds, dtype=np.float64)
    if queries.shape[1] != avatars_shape[1]:
        msg = f"queries of shape {queries.shape} against avatars of shape {avatars_shape}"
        raise ValueError(msg)
    if thresholds.shape != (len(queries),):
        msg = f"{len(queries)} queries need as many thresholds, got {thresholds.shape}"
        raise ValueError(msg)
    if np.isnan(thresholds).any() or (thresholds < 0).any():
        msg = "thresholds must be non-negative squared distances, not NaN"
        raise ValueError(msg)
    if own is None:
        if len(queries) != avatars_shape[0]:
            msg = (
                f"own=None links query i to avatar i, but there are {len(queries)} queries "
                f"and {avatars_shape[0]} avatars"
            )
            raise ValueError(msg)
        return queries, thresholds, None
    own = np.asarray(own)
    if own.size and own.dtype.kind not in "iu":
        msg = f"`own` must hold integers (rows of the avatars, or -1), got dtype {own.dtype}"
        raise TypeError(msg)
    own = own.astype(np.int64, copy=False)
    if own.shape != (len(queries),):
        msg = f"{len(queries)} queries need as many own rows, got {own.shape}"
        raise ValueError(msg)
    if len(own) and (own.max() >= avatars_shape[0] or own.min() < -1):
        msg = f"own rows must lie in [-1, {avatars_shape[0]}), got {own.min()}..{own.max()}"
        raise ValueError(msg)
    return queries, thresholds, own


def check_rows(rows: IndexArray, queries: int, *, every: bool) -> None:
    """Refuse ``rows`` (the order a kernel walks queries in; the kernels check no index)
    unless it names rows of ``queries`` queries only, as many as there are queries with
    ``every``, at most as many without."""
    if every and len(rows) != queries:
        msg = f"`rows` must name every one of the {queries} queries once, got {len(rows)} rows"
        raise ValueError(msg)
    if len(rows) > queries:
        msg = f"`rows` must name each of the {queries} queries at most once, got {len(rows)}"
        raise ValueError(msg)
    if len(rows) and (rows.min() < 0 or rows.max() >= queries):
        msg = f"`rows` must lie in [0, {queries}), got {rows.min()}..{rows.max()}"
        raise ValueError(msg)


def gather_into(out: Float64Array, column: int, values: Float64Array, rows: IndexArray) -> None:
    """``out[:, column] = values[rows]`` on every core, with no array of ``len(rows)`` in
    between: random reads, which the cores wait on side by side (the avatars' columns in the
    originals' order: 24 s on one core at 1e8 records)."""
    if out.shape[0] != len(rows) or not 0 <= column < out.shape[1]:
        msg = f"`out` of shape {out.shape} has no column {column} of {len(rows)} rows"
        raise ValueError(msg)
    values = np.ascontiguousarray(values, dtype=np.float64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if len(rows) and not (rows.min() >= 0 and rows.max() < len(values)):
        raise IndexError("a row to gather is out of range")
    tasks = -(-len(rows) // GATHER_ROWS)

    def gather(task: int) -> None:
        start = task * GATHER_ROWS
        gather_column(out, column, values, rows, start, min(start + GATHER_ROWS, len(rows)))

    for _ in parallel_map(usable_cores(), gather, tasks):
        pass
