"""The exact counting engine: coordinate arrays in, local cloaking counts out.

Row ``i`` of ``originals`` is linked to row ``i`` of ``avatars``. For each ``i``
the engine counts the rivals ``j != i`` with ``d2(x_i, y_j) <= T_i``, where
``T_i = d2(x_i, y_i) * (1 + tie_tol)`` and every ``d2`` is the float64 sum of
squared direct differences, taken in column order (:func:`squared_distances`).

Two exact strategies share that definition. The default walks a compiled
kd-tree in float64 (:mod:`polars_hidden_rate.kdtree`). ``"flat"`` finds
candidates in a FAISS flat index in float32: each float32 distance carries an
error bound, a pair is decided in float32 only when it lies outside that bound,
and every pair inside it is settled again in float64 by
:func:`squared_distances`. The GPU path (:mod:`polars_hidden_rate.gpu`) uses
the same float32 preparation and bound.

:func:`count_cloaking` first brings both arrays, exactly, to one canonical scale
(:func:`linked_arrays`): the counts do not change when every coordinate is
multiplied by a power of two, and no square overflows or underflows on the way.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.checks import check_threads, check_tie_tol
from polars_hidden_rate.kdtree import KdTree, coordinates, linked_queries
from polars_hidden_rate.progress import Progress
from polars_hidden_rate.scale import canonical_scale

Strategy = Literal["auto", "flat", "tree"]
STRATEGIES: tuple[Strategy, ...] = ("auto", "flat", "tree")


def squared_distances(
    originals: Float64Array,
    avatars: Float64Array,
    rows: IndexArray | slice,
    cols: IndexArray | slice,
) -> Float64Array:
    """Squared Euclidean distances ``d2(originals[rows], avatars[cols])`` in float64.

    This is the definition every count is settled against: direct differences,
    squared and summed in column order. ``rows`` and ``cols`` may be slices (no
    gather: :func:`own_thresholds` pairs row ``i`` with row ``i``).
    """
    pairs = len(range(len(originals))[rows]) if isinstance(rows, slice) else len(rows)
    total = np.zeros(pairs, dtype=np.float64)
    with np.errstate(over="ignore"):  # a square beyond float64's range is inf, as defined
        for k in range(originals.shape[1]):
            diff = originals[rows, k] - avatars[cols, k]
            total += diff * diff
    return total


def own_thresholds(originals: Float64Array, avatars: Float64Array, tie_tol: float) -> Float64Array:
    """``T_i = d2(x_i, y_i) * (1 + tie_tol)``: a rival within ``T_i`` hides record ``i``."""
    every = slice(None)
    thresholds: Float64Array = squared_distances(originals, avatars, every, every) * (1.0 + tie_tol)
    return thresholds


def linked_arrays(
    originals: npt.ArrayLike, avatars: npt.ArrayLike, tie_tol: float
) -> tuple[Float64Array, Float64Array, Float64Array]:
    """Linked coordinates at the canonical scale, as contiguous float64, with each ``T_i``.

    Both arrays are multiplied by one power of two
    (:func:`~polars_hidden_rate.scale.canonical_scale`), exactly unless a
    coordinate falls below the normal range, before any ``d2`` is taken: data
    and the same data times ``2^k`` give bit-identical arrays, hence identical
    counts, and no square can overflow.

    Raises
    ------
    TypeError, ValueError
        When the arrays are not 2-D arrays of numbers of the same shape, hold NaN
        or infinite coordinates, or ``tie_tol`` is not a finite number >= 0.
    """
    tie_tol = check_tie_tol(tie_tol)
    originals, avatars = coordinates("originals", originals), coordinates("avatars", avatars)
    if originals.shape != avatars.shape:
        msg = (
            "`originals` and `avatars` must have the same shape (row i of one is linked to "
            f"row i of the other), got {originals.shape} and {avatars.shape}"
        )
        raise ValueError(msg)
    (originals, avatars), _ = canonical_scale(
        originals, avatars, tie_tol=tie_tol, names=("originals", "avatars")
    )
    return originals, avatars, own_thresholds(originals, avatars, tie_tol)


def check_strategy(strategy: object) -> Strategy:
    """``strategy``, one of :data:`STRATEGIES`."""
    if not (isinstance(strategy, str) and strategy in STRATEGIES):
        msg = f"`strategy` must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}"
        raise ValueError(msg)
    return strategy


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, as containers set it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def count_cloaking(
    originals: npt.ArrayLike,
    avatars: npt.ArrayLike,
    *,
    tie_tol: float = 1e-9,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
) -> CountArray:
    """Exact local cloaking of every original against the avatars.

    The arrays are first brought exactly to one canonical scale (:func:`linked_arrays`),
    so the counts do not change when every coordinate is multiplied by a power of two.

    Parameters
    ----------
    originals, avatars
        Arrays of numbers of shape ``(n, d)``, taken as float64; row ``i`` of
        ``avatars`` is the avatar of row ``i`` of ``originals``.
    tie_tol
        Relative tolerance, a finite number >= 0: a rival counts when its squared
        distance is at most ``d2(x_i, y_i) * (1 + tie_tol)``.
    threads
        Threads to count with, at least 1; None uses all cores.
    strategy
        How to find candidates; see :func:`count_within`. Counts never depend on it.
    progress
        Show a progress bar on stderr; None shows it only on a terminal.

    Returns
    -------
    numpy.ndarray
        The counts ``c_i`` as int64, one per original.

    Raises
    ------
    TypeError, ValueError
        On arrays that are not 2-D arrays of finite numbers of one shape, or an
        argument of the wrong type or value; the message names it.

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [3.0]])
    >>> count_cloaking(originals, avatars).tolist()
    [1, 1, 0]
    """
    threads, strategy = check_threads(threads), check_strategy(strategy)
    originals, avatars, thresholds = linked_arrays(originals, avatars, tie_tol)
    own = np.arange(len(originals), dtype=np.int64)
    return count_within(
        originals, thresholds, own, avatars, threads=threads, strategy=strategy, progress=progress
    )


def count_within(
    queries: npt.ArrayLike,
    thresholds: npt.ArrayLike,
    own: npt.ArrayLike,
    avatars: npt.ArrayLike | KdTree,
    *,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
) -> CountArray:
    """For each query, count the avatars within its threshold, its own avatar aside.

    This is the engine's building block: whole data sets, blocks and shards all
    go through it. It rescales nothing: ``thresholds`` are squared distances in
    the units of the coordinates as given, and a square beyond float64's range
    is inf (below it, 0) there. Bring the data to a sane scale first, as
    :func:`count_cloaking` does with :func:`linked_arrays`.

    Parameters
    ----------
    queries
        Originals, float64 of shape ``(m, d)``.
    thresholds
        ``T_i`` for each query (see :func:`own_thresholds`), in the squared units
        of ``queries``.
    own
        For each query, the row of ``avatars`` holding its own avatar, or -1
        when that avatar is not among them.
    avatars
        The avatars to count, float64 of shape ``(s, d)``, or a
        :class:`~polars_hidden_rate.kdtree.KdTree` already built on them (the
        ``"tree"`` strategy then reuses it; ``own`` still indexes the avatars).
    threads
        Threads to count with, at least 1 (no more than the machine's cores run);
        None uses all cores.
    strategy
        ``"tree"`` (and ``"auto"``) walks a compiled kd-tree of the avatars in
        float64 per query (:mod:`polars_hidden_rate.kdtree`). ``"flat"``
        compares every query with every avatar in a FAISS flat index and
        settles the float32 band in float64; it was measured slower at every
        size and dimension tried (``docs/engine.md``), and stays as the CPU
        twin of the GPU path and an independent check.
    progress
        Show a progress bar on stderr; None shows it only on a terminal.

    Returns
    -------
    numpy.ndarray
        Counts as int64, one per query.

    Raises
    ------
    TypeError, ValueError
        On inconsistent arrays, or an argument of the wrong type or value.
    """
    threads, strategy = check_threads(threads) or usable_cores(), check_strategy(strategy)
    if isinstance(avatars, KdTree):
        tree, points = avatars, avatars.points
    else:
        tree, points = None, coordinates("avatars", avatars)
    queries, thresholds, own = linked_queries(queries, thresholds, own, points.shape)
    if len(queries) == 0 or len(points) == 0:
        return np.zeros(len(queries), dtype=np.int64)
    for name, values in (("queries", queries), ("avatars", points)):
        if not np.isfinite(values).all():
            msg = f"`{name}` hold NaN or infinite coordinates; the counts need finite ones"
            raise ValueError(msg)
    with Progress(len(queries), enabled=progress) as bar:
        if strategy == "flat":
            if tree is not None:
                raise ValueError("the flat strategy takes the avatars, not a kd-tree")
            from polars_hidden_rate import flat  # FAISS is loaded when used

            return flat.count_flat(queries, thresholds, own, points, threads=threads, bar=bar)
        if tree is None:
            tree = KdTree.build(points, threads=threads)
        return tree.count_within(queries, thresholds, own, threads=threads, advance=bar.advance)
