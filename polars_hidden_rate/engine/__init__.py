"""The exact counting engine: coordinate arrays in, local cloaking counts out.

Row ``i`` of ``originals`` is linked to row ``i`` of ``avatars``. For each ``i``
the engine counts the rivals ``j != i`` with ``d2(x_i, y_j) <= T_i``, where
``T_i = d2(x_i, y_i) * (1 + tie_tol)`` and every ``d2`` is the float64 sum of
squared direct differences, taken in column order (`squared_distances`).

Two exact strategies share that definition, and ``"auto"`` (the default) runs
the one a probe of the data predicts faster (`choose_strategy`). ``"tree"``
walks a compiled kd-tree in float64 (`polars_hidden_rate.engine.kdtree`). ``"flat"`` finds
candidates in a FAISS flat index in float32: each float32 distance carries an
error bound, a pair is decided in float32 only when it lies outside that bound,
and every pair inside it is settled again in float64 by
`squared_distances`. The GPU path (`polars_hidden_rate.engine.gpu`) uses
the same float32 preparation and bound.

[`count_cloaking`][polars_hidden_rate.count_cloaking] first brings both arrays, exactly, to one
canonical scale (`linked_arrays`): the counts do not change when every coordinate is
multiplied by a power of two, and no square overflows or underflows on the way.

This module only re-exports; the queries live in `polars_hidden_rate.engine.count`.
"""

from __future__ import annotations

from polars_hidden_rate.engine.arrays import (
    linked_arrays,
    own_thresholds,
    squared_distances,
    strictly_below,
)
from polars_hidden_rate.engine.count import (
    CountResult,
    cloaking_result,
    closer_rivals,
    count_cloaking,
    hidden_flags,
    within_result,
)
from polars_hidden_rate.engine.parallel import usable_cores
from polars_hidden_rate.engine.strategy import (
    STRATEGIES,
    Estimate,
    Strategy,
    check_strategy,
    choose_strategy,
    probe,
)

__all__ = [
    "STRATEGIES",
    "CountResult",
    "Estimate",
    "Strategy",
    "check_strategy",
    "choose_strategy",
    "cloaking_result",
    "closer_rivals",
    "count_cloaking",
    "hidden_flags",
    "linked_arrays",
    "own_thresholds",
    "probe",
    "squared_distances",
    "strictly_below",
    "usable_cores",
    "within_result",
]
