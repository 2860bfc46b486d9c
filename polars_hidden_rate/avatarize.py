"""A reference avatar generator: the avatar method as published, for experiments.

This is **not** a certified anonymizer. It shows, before running a real
anonymization, how the number of neighbours ``k`` moves the hidden rate.

1. Project the records ([`Projection`][polars_hidden_rate.Projection], fitted on them)
   and keep ``ncp`` components.
2. For each record, find its ``k`` nearest other records in that space, exactly:
   float64 squared distances, ties broken by row order.
3. Weight each neighbour by ``(1 / d) * R * C``, with ``R ~ Exp(1)`` and
   ``C = 2 ** -pi``, ``pi`` a random permutation of ``1..k``; neighbours at
   distance 0, when there are any, take all the weight.
4. Average the neighbours in the full scaled space and map back: numeric columns
   de-scaled (integer columns rounded), categorical columns the modality with
   the largest weighted share.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import polars as pl

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.checks import check_count, check_seed
from polars_hidden_rate.frames import as_lazy, missing_values, raise_missing
from polars_hidden_rate.projection import Projection

KNN_BLOCK_VALUES = 1 << 16
"""Pairwise distances held at once while searching neighbours (512 KiB of float64: small blocks
stay in cache, which is faster than large ones)."""


def avatarize(
    df: pl.DataFrame | pl.LazyFrame,
    k: int,
    *,
    ncp: int | None = None,
    seed: int | None = None,
) -> pl.DataFrame:
    """Make one avatar per record with the avatar method (a reference, not a certified anonymizer).

    Every column is a feature: drop identifiers first. Numeric and temporal
    columns are numeric; String, Categorical, Enum and Boolean are categorical.

    Parameters
    ----------
    df
        The records, a DataFrame or a LazyFrame (collected), without nulls.
    k
        The number of neighbours each avatar is drawn from, ``1 <= k < n``.
    ncp
        The number of components the neighbours are searched in; default 5,
        capped at the dimensions available.
    seed
        Seed of the random weights; the same seed gives the same avatars.

    Returns
    -------
    DataFrame
        The avatars, with the schema and row order of ``df``: row ``i`` is the
        avatar of record ``i``.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> records = pl.DataFrame(
    ...     {"age": [31, 45, 52, 38, 60, 27], "sex": ["F", "M", "M", "F", "M", "F"]}
    ... )
    >>> avatars = phr.avatarize(records, k=2, seed=0)
    >>> avatars.schema == records.schema, avatars.height
    (True, 6)
    """
    records = df if isinstance(df, pl.DataFrame) else as_lazy(df, "df").collect()
    _refuse_missing(records)
    n = records.height
    k = check_count(k, "k")
    seed = None if seed is None else check_seed(seed)
    if not k < max(n, 1):
        msg = f"`k` must satisfy 1 <= k < {n} (the number of records), got k={k}"
        raise ValueError(msg)
    projection = Projection.fit(records, ncp=ncp)
    scaled = projection.scaled(records)
    coords = scaled @ projection.components[: projection.ncp].T
    neighbours, squared = nearest_others(coords, int(k))
    weights = avatar_weights(squared, np.random.default_rng(seed))
    mixed = np.zeros_like(scaled)
    for rank in range(neighbours.shape[1]):  # n x p at a time, not n x k x p
        mixed += weights[:, rank, None] * scaled[neighbours[:, rank]]
    return projection.unscale(mixed).select(records.columns)


def _refuse_missing(records: pl.DataFrame) -> None:
    """Every value set: the projection's fit would suggest ``impute=``, which this does not
    take."""
    floats = {name: pl.col(name) for name, dtype in records.schema.items() if dtype.is_float()}
    others = [name for name in records.columns if name not in floats]
    raise_missing(
        missing_values(records, floats, others),
        "records",
        rows=records.height,
        hint="; avatarize() fills no gap: fill them (fill_null, fill_nan) or drop those records",
    )


def nearest_others(coords: Float64Array, k: int) -> tuple[IndexArray, Float64Array]:
    """The ``k`` nearest other rows of each row, exactly, and their squared distances.

    Squared distances are float64 sums of squared direct differences, in column
    order (as the counting engine defines them); among equal distances the lower
    row index comes first.

    Examples
    --------
    >>> import numpy as np
    >>> rows, d2 = nearest_others(np.array([[0.0], [1.0], [2.0], [4.0]]), 2)
    >>> rows.tolist(), d2.tolist()
    ([[1, 2], [0, 2], [1, 0], [2, 1]], [[1.0, 4.0], [1.0, 1.0], [1.0, 4.0], [4.0, 9.0]])
    """
    n, dim = coords.shape
    block = max(8, KNN_BLOCK_VALUES // max(n, 1))
    neighbours = np.empty((n, k), dtype=np.int64)
    distances = np.empty((n, k), dtype=np.float64)
    for start in range(0, n, block):
        stop = min(start + block, n)
        squared = np.zeros((stop - start, n), dtype=np.float64)
        diff = np.empty_like(squared)
        for axis in range(dim):
            np.subtract(coords[start:stop, axis, None], coords[None, :, axis], out=diff)
            np.multiply(diff, diff, out=diff)
            squared += diff
        local = np.arange(stop - start)
        squared[local, start + local] = np.inf
        # Everything within the k-th distance is a candidate; order them by (distance, row).
        kth = np.partition(squared, k - 1, axis=1)[:, k - 1 : k]
        row, col = np.nonzero(squared <= kth)
        order = np.lexsort((col, squared[row, col], row))
        row, col = row[order], col[order]
        take = np.searchsorted(row, local)[:, None] + np.arange(k)
        neighbours[start:stop] = col[take]
        distances[start:stop] = squared[row[take], col[take]]
    return neighbours, distances


def avatar_weights(squared: Float64Array, rng: np.random.Generator) -> Float64Array:
    """Normalised weights ``(1/d) * R * C`` per row; zero-distance neighbours take all of it."""
    n, k = squared.shape
    draws = rng.exponential(size=(n, k))
    ranks = rng.permuted(np.tile(np.arange(1, k + 1, dtype=np.float64), (n, 1)), axis=1)
    random_part: npt.NDArray[np.float64] = draws * np.exp2(-ranks)
    distance = np.sqrt(squared)
    at_zero = distance == 0
    inverse = np.divide(1.0, distance, out=np.zeros_like(distance), where=~at_zero)
    weights = np.where(
        at_zero.any(axis=1, keepdims=True), random_part * at_zero, random_part * inverse
    )
    normalised: Float64Array = weights / weights.sum(axis=1, keepdims=True)
    return normalised
