"""The kernels of `engine.arrays`: the ``d2`` of given pairs and of rows paired in order, a column
gathered by rows."""

from __future__ import annotations

import numpy as np

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.engine._kernels.common import kernel, point_d2


@kernel
def pair_squared_distances(
    originals: Float64Array, avatars: Float64Array, rows: IndexArray, cols: IndexArray
) -> Float64Array:
    """``d2(originals[rows[i]], avatars[cols[i]])`` for each ``i``: the engine's definition
    (`squared_distances`), a pair at a time rather than a column at a time, the same floats."""
    total = np.empty(len(rows))
    for i in range(len(rows)):
        # The difference's sign does not change its square (rounding is symmetric).
        total[i] = point_d2(avatars, cols[i], originals, rows[i])
    return total


@kernel
def row_squared_distances(originals: Float64Array, avatars: Float64Array) -> Float64Array:
    """``d2(originals[i], avatars[i])`` for each row ``i``: the engine's definition, a row at a
    time, into one new array (no temporary per column)."""
    total = np.empty(len(originals))
    for i in range(len(originals)):
        total[i] = point_d2(avatars, i, originals, i)
    return total


@kernel
def gather_column(
    out: Float64Array, column: int, values: Float64Array, rows: IndexArray, start: int, stop: int
) -> None:
    """``out[i, column] = values[rows[i]]`` for ``i`` in ``start:stop``."""
    for i in range(start, stop):
        out[i, column] = values[rows[i]]
