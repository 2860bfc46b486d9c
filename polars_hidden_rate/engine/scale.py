"""One exact power of two that brings coordinates to a canonical magnitude before any ``d2``.

Multiplying by a power of two is exact (unless a value falls below the normal
range), so data and the same data times ``2^k`` become bit-identical arrays, and
every count or distance taken on them is the same; and at the canonical magnitude
no square overflows and squares of small differences keep the most room above the
subnormal range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from polars_hidden_rate._types import Float64Array


def exponent_for(largest: float, dim: int, tie_tol: float = 0.0) -> int:
    """The ``e`` of [`canonical_scale`][polars_hidden_rate.engine.scale.canonical_scale] for data
    of ``dim`` coordinates whose largest ``|coordinate|`` is ``largest`` (0 when it is 0): what
    parts of the data, reduced to their largest, agree on.

    ``2^e`` brings ``largest`` into ``[2^(t-1), 2^t)``, with ``t`` the highest that keeps every
    ``d2`` and ``T_i`` finite. Every ``|difference|`` is then below ``2^(t+1)`` and every
    square below ``2^(2t+2)``; with ``dim <= 2^D`` and ``1 + tie_tol < 2^L`` (as rounded),
    ``T_i`` is below ``2^(2t+2+D+L)`` times the rounding of ``dim + 1`` operations, a factor
    below 2, so ``2t + 3 + D + L <= 1023`` keeps it below ``2^1023``. The highest such ``t``
    leaves the squares of small differences the most room above the subnormal range: for
    ``d <= 8`` and ``tie_tol < 1``, ``t = 508``, and a difference ``2^-1000`` times the
    largest coordinate still has a normal square.

    Examples
    --------
    >>> exponent_for(4.0, 2), exponent_for(0.0, 2)
    (506, 0)
    >>> exponent_for(1.0, 5), exponent_for(1.0, 2, tie_tol=1e-9), exponent_for(1.0, 10**6)
    (507, 508, 498)
    """
    if largest == 0.0:
        return 0
    dim_bits = max(dim - 1, 0).bit_length()  # D = ceil(log2(dim))
    tol_bits = math.frexp(1.0 + tie_tol)[1]  # L: 1 + tie_tol < 2^L, exactly
    return (1020 - dim_bits - tol_bits) // 2 - math.frexp(largest)[1]


def largest_magnitude(array: Float64Array, name: str | None = None) -> float:
    """The largest ``|coordinate|`` of ``array`` (0 when empty); a NaN or infinite one is a
    ValueError naming ``name``: with `exponent_for`, the exponent that
    [`canonical_scale`][polars_hidden_rate.engine.scale.canonical_scale] gives any set of arrays
    (that of their largest), told without scaling them."""
    # max and min rather than abs(): no temporary as large as the array
    magnitude = max(float(array.max(initial=0.0)), -float(array.min(initial=0.0)))
    if not math.isfinite(magnitude):
        what = f"`{name}`" if name is not None else "coordinates"
        msg = f"{what} hold NaN or infinite coordinates; the counts need finite ones"
        raise ValueError(msg)
    return magnitude


def canonical_scale(
    *arrays: Float64Array,
    tie_tol: float = 0.0,
    names: Sequence[str] = (),
    overwrite_input: bool = False,
) -> tuple[tuple[Float64Array, ...], int]:
    """Multiply every array by one power of two ``2^e`` (`exponent_for`).

    A distance ``s`` taken on the scaled arrays is ``np.ldexp(s, -e)`` in the input
    units, exactly.

    Parameters
    ----------
    *arrays
        Float64 arrays of shape ``(n, d)``, all with the same ``d``.
    tie_tol
        The relative tie tolerance the thresholds will carry.
    names
        The arrays' names, for the error on a NaN or infinite coordinate.
    overwrite_input
        Scale arrays that are already writable contiguous float64 in place, instead of
        into new arrays: for callers that own them and need no unscaled copy.

    Returns
    -------
    tuple
        The scaled arrays (contiguous float64, in the order given) and ``e``;
        ``e = 0`` when every coordinate is zero or the arrays are empty.

    Examples
    --------
    >>> import numpy as np
    >>> (scaled,), exponent = canonical_scale(np.array([[3.0, -4.0]]))
    >>> exponent, np.ldexp(scaled, -exponent).tolist()
    (506, [[3.0, -4.0]])
    """
    checked = same_columns(*arrays)
    largest = 0.0
    for k, array in enumerate(checked):
        largest = max(largest, largest_magnitude(array, names[k] if k < len(names) else None))
    if largest == 0.0:
        return tuple(checked), 0
    exponent = exponent_for(largest, checked[0].shape[1], tie_tol)
    return scaled_by(checked, exponent, overwrite_input=overwrite_input), exponent


def same_columns(*arrays: Float64Array) -> list[Float64Array]:
    """The arrays as contiguous float64, which must be 2-D with one number of columns (a
    ValueError says their shapes otherwise)."""
    checked = [np.ascontiguousarray(array, dtype=np.float64) for array in arrays]
    dims = {array.shape[1] for array in checked if array.ndim == 2}
    if len(dims) > 1 or any(array.ndim != 2 for array in checked):
        shapes = [array.shape for array in checked]
        msg = f"arrays must be 2-D with the same number of columns, got shapes {shapes}"
        raise ValueError(msg)
    return checked


def scaled_by(
    arrays: Sequence[Float64Array], exponent: int, *, overwrite_input: bool = False
) -> tuple[Float64Array, ...]:
    """Each of the contiguous float64 ``arrays`` times ``2^exponent``, exactly: the
    product of `canonical_scale`, for a caller that knows the exponent (that of more arrays
    than it scales). ``overwrite_input`` as there: without it, new arrays, whatever the
    exponent (0 included: a caller may reorder them)."""
    scaled: list[Float64Array] = []
    for k, array in enumerate(arrays):
        # in place only where no other array shares its memory (it would be scaled twice)
        in_place = overwrite_input and array.flags.writeable
        for j, other in enumerate(arrays):
            in_place = in_place and (j == k or not np.may_share_memory(array, other))
        scaled.append(np.ldexp(array, exponent, out=array if in_place else None))
    return tuple(scaled)
