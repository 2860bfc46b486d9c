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
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import BoolArray, CountArray, Float64Array, IndexArray
from polars_hidden_rate.checks import InvariantError, check_cap, check_flag, check_threads
from polars_hidden_rate.engine.arrays import (
    coordinates,
    linked_arrays,
    linked_queries,
    own_thresholds,
    squared_distances,
    strictly_below,
)
from polars_hidden_rate.engine.kdtree import KdTree, restore_rows
from polars_hidden_rate.engine.parallel import usable_cores
from polars_hidden_rate.engine.strategy import (
    STRATEGIES,
    Estimate,
    Strategy,
    check_strategy,
    choose_strategy,
    probe,
)
from polars_hidden_rate.progress import stage

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
    "count_within",
    "hidden_flags",
    "linked_arrays",
    "own_thresholds",
    "probe",
    "squared_distances",
    "strictly_below",
    "usable_cores",
    "within_result",
]


@dataclass(frozen=True)
class CountResult:
    """What a count returns (`cloaking_result`, `within_result`, the planner's
    `CountPlan.result`): the counts, and what the same count found beside them.

    Attributes
    ----------
    counts
        The counts as int64, one per query (``min(c_i, cap)`` with a cap).
    closer
        Per query, whether a rival lies strictly closer than its own avatar (within the
        ``closer_than`` bound); None when not asked.
    strategy
        What counted: ``"tree"`` or ``"flat"`` in the engine (what ``"auto"`` chose), the
        planner's ``"gpu"`` or ``"cluster"``; None where nothing was counted (no query, or
        no avatar).
    tree
        The plain kd-tree of the avatars that the count built, when asked (``keep_tree``)
        and where it built one; else None.
    """

    counts: CountArray
    closer: BoolArray | None = None
    strategy: str | None = None
    tree: KdTree | None = None


def count_cloaking(
    originals: npt.ArrayLike,
    avatars: npt.ArrayLike,
    *,
    tie_tol: float = 1e-9,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
    cap: int | None = None,
    overwrite_input: bool = False,
    restore_order: bool = False,
) -> CountArray:
    """Exact local cloaking of every original against the avatars.

    The arrays are first brought exactly to one canonical scale (`linked_arrays`),
    so the counts do not change when every coordinate is multiplied by a power of two.
    The counts of `cloaking_result`, which also tells the strategy that ran and, when
    asked, which records have a rival strictly closer than their avatar.

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
        How to find candidates; see `count_within`. Counts never depend on it.
    progress
        Show a progress bar on stderr; None shows it only on a terminal.
    cap
        When given (at least 1), return ``min(c_i, cap)``: each record stops at its
        ``cap``-th rival, which costs less. ``cap=1`` gives the hidden flags
        (`hidden_flags`).
    overwrite_input
        Let the engine scale both arrays in place and reorder the avatars into its
        kd-tree, when they are writable contiguous float64: two fewer copies of the
        data (80 bytes per record at d = 5), for callers that own the arrays and do
        not use them afterwards. Their contents are then unspecified; the counts are
        the same.
    restore_order
        With ``overwrite_input``, put the avatars back in their row order after the count
        (one pass over them): both arrays are then the inputs at the canonical scale, which
        a second count scales no further (its power of two is then 1), so counting them
        again gives the same counts. For a caller that may count the same arrays twice (a
        capped count, then a full one) without a copy of them.

    Returns
    -------
    numpy.ndarray
        The counts ``c_i`` (or ``min(c_i, cap)``) as int64, one per original.

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
    progress = None if progress is None else check_flag(progress, "progress", or_none=True)
    overwrite_input = check_flag(overwrite_input, "overwrite_input")
    restore_order = check_flag(restore_order, "restore_order")
    return cloaking_result(
        originals,
        avatars,
        tie_tol=tie_tol,
        threads=threads,
        strategy=strategy,
        progress=progress,
        cap=cap,
        overwrite_input=overwrite_input,
        restore_order=restore_order,
    ).counts


def cloaking_result(
    originals: npt.ArrayLike,
    avatars: npt.ArrayLike,
    *,
    tie_tol: float = 1e-9,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
    cap: int | None = None,
    overwrite_input: bool = False,
    restore_order: bool = False,
    closer: bool = False,
    keep_tree: bool = False,
) -> CountResult:
    """[`count_cloaking`][polars_hidden_rate.count_cloaking] of the same arguments, with
    what else the count found: the strategy that ran (``"tree"`` or ``"flat"``; what
    ``"auto"`` chose), for the outputs that state how they were counted, and

    - with ``closer``, per original whether a rival is strictly closer than its own avatar
      (`closer_rivals`), found by the same walk (a hidden record without one is hidden only
      by ties);
    - with ``keep_tree``, the plain kd-tree of the avatars that the count built
      (`within_result`'s ``keep_tree``): its points are the avatars at the canonical scale
      of `linked_arrays` (their array, with ``overwrite_input``), for a caller that walks
      them again.

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [1.0]])
    >>> result = cloaking_result(originals, avatars, strategy="tree", closer=True)
    >>> result.counts.tolist(), result.closer.tolist(), result.strategy
    ([2, 2, 1], [True, True, False], 'tree')
    """
    threads, strategy = check_threads(threads), check_strategy(strategy)
    cap = check_cap(cap)
    originals, avatars, thresholds = linked_arrays(
        originals, avatars, tie_tol, overwrite_input=overwrite_input
    )
    below = None
    if closer:
        # With no tolerance the thresholds are the own d2 themselves.
        below = strictly_below(
            thresholds if tie_tol == 0.0 else own_thresholds(originals, avatars, 0.0)
        )
    return within_result(
        originals,
        thresholds,
        None,
        avatars,
        threads=threads,
        strategy=strategy,
        progress=progress,
        cap=cap,
        overwrite_input=overwrite_input,
        restore_order=restore_order,
        closer_than=below,
        keep_tree=keep_tree,
    )


def hidden_flags(
    originals: npt.ArrayLike,
    avatars: npt.ArrayLike,
    *,
    tie_tol: float = 1e-9,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
) -> BoolArray:
    """Whether each original is hidden (``c_i > 0``), exactly, at the cost of its first rival.

    The arguments are those of [`count_cloaking`][polars_hidden_rate.count_cloaking]; this is
    ``count_cloaking(..., cap=1) > 0``: the tree walk of a record stops at its
    first rival (a whole box within ``T_i`` settles it at once), and the flat
    strategy settles in float64 only the records that no sure rival hides.

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [3.0]])
    >>> hidden_flags(originals, avatars).tolist()
    [True, True, False]
    """
    counts = count_cloaking(
        originals,
        avatars,
        tie_tol=tie_tol,
        threads=threads,
        strategy=strategy,
        progress=progress,
        cap=1,
    )
    flags: BoolArray = counts > 0
    return flags


def closer_rivals(
    originals: npt.ArrayLike,
    avatars: npt.ArrayLike,
    rows: npt.ArrayLike | None = None,
    *,
    threads: int | None = None,
) -> BoolArray:
    """Whether each original of ``rows`` (default all) has a rival strictly closer than its
    own avatar: ``d2(x_i, y_j) < d2(x_i, y_i)`` for some ``j != i``, exactly in float64.

    A hidden record (``c_i > 0``) without one is hidden only by ties: every rival that
    hides it lies at its own avatar's distance (within ``tie_tol``). The arrays are
    brought to the canonical scale as for [`count_cloaking`][polars_hidden_rate.count_cloaking], so
    the answer does not change when every coordinate is multiplied by a power of two.

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [1.0]])
    >>> closer_rivals(originals, avatars).tolist()  # record 2 is hidden by a tie only
    [True, True, False]
    """
    originals, avatars, own = linked_arrays(originals, avatars, 0.0)
    chosen = np.arange(len(originals)) if rows is None else np.asarray(rows, dtype=np.int64)
    return _within_strictly(originals, avatars, strictly_below(own), chosen, None, threads)


def _within_strictly(
    queries: Float64Array,
    avatars: Float64Array | KdTree,
    below: Float64Array,
    chosen: IndexArray,
    own: IndexArray | None,
    threads: int | None,
) -> BoolArray:
    """For the queries ``chosen``, whether an avatar other than their own lies within
    ``below`` (`strictly_below`; ``own``: their own avatars' rows, None for row ``i``),
    by a walk of the tree capped at one."""
    closer = np.zeros(len(chosen), dtype=bool)
    apart = np.flatnonzero(below[chosen] >= 0)  # nothing lies strictly closer than 0
    if len(apart):
        picked = chosen[apart]
        rows = picked if own is None else own[picked]
        found = count_within(
            queries[picked], below[picked], rows, avatars, threads=threads, strategy="tree", cap=1
        )
        closer[apart] = found > 0
    return closer


def count_within(
    queries: npt.ArrayLike,
    thresholds: npt.ArrayLike,
    own: npt.ArrayLike | None,
    avatars: npt.ArrayLike | KdTree,
    *,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
    cap: int | None = None,
    overwrite_input: bool = False,
    restore_order: bool = False,
) -> CountArray:
    """For each query, count the avatars within its threshold, its own avatar aside: the
    counts of `within_result`, which also tells the strategy that ran and, when asked,
    whether each query has an avatar within a smaller bound.

    This is the engine's building block: whole data sets, blocks and shards all
    go through it. It rescales nothing: ``thresholds`` are squared distances in
    the units of the coordinates as given, and a square beyond float64's range
    is inf (below it, 0) there. Bring the data to a sane scale first, as
    [`count_cloaking`][polars_hidden_rate.count_cloaking] does with `linked_arrays`.

    Parameters
    ----------
    queries
        Originals, float64 of shape ``(m, d)``.
    thresholds
        ``T_i`` for each query (see `own_thresholds`), in the squared units
        of ``queries``.
    own
        For each query, the row of ``avatars`` holding its own avatar, or -1
        when that avatar is not among them; None when query ``i``'s own avatar
        is row ``i`` (as many queries as avatars), which saves the per-query
        index arrays.
    avatars
        The avatars to count, float64 of shape ``(s, d)``, or a
        `KdTree` already built on them (the
        ``"tree"`` strategy then reuses it; ``own`` still indexes the avatars).
    threads
        Threads to count with, at least 1 (no more than the machine's cores run);
        None uses all cores.
    strategy
        ``"tree"`` walks a compiled kd-tree of the avatars in float64 per query
        (`polars_hidden_rate.engine.kdtree`). ``"flat"`` compares every query
        with every avatar in a FAISS flat index and settles the float32 band in
        float64. ``"auto"`` builds the tree, walks it for a small sample of the
        queries counting its work, and runs the strategy predicted faster
        (`choose_strategy`); a prebuilt tree always runs as ``"tree"``.
    progress
        Show a progress bar on stderr; None shows it only on a terminal.
    cap
        When given (at least 1), each count is ``min(count, cap)``, found at less cost.
    overwrite_input
        Let the kd-tree reorder writable contiguous float64 ``avatars`` in place
        instead of copying them (see [`count_cloaking`][polars_hidden_rate.count_cloaking]);
        with ``own=None`` and no ``restore_order``, the rows of writable contiguous
        ``queries``, ``thresholds`` and ``closer_than`` move with them (the walk then reads
        them in sequence; their contents are then unspecified).
    restore_order
        With ``overwrite_input``, put reordered ``avatars`` back in their row order after
        the count.

    Returns
    -------
    numpy.ndarray
        Counts as int64, one per query.

    Raises
    ------
    TypeError, ValueError
        On inconsistent arrays, or an argument of the wrong type or value.
    """
    return within_result(
        queries,
        thresholds,
        own,
        avatars,
        threads=threads,
        strategy=strategy,
        progress=progress,
        cap=cap,
        overwrite_input=overwrite_input,
        restore_order=restore_order,
    ).counts


def within_result(
    queries: npt.ArrayLike,
    thresholds: npt.ArrayLike,
    own: npt.ArrayLike | None,
    avatars: npt.ArrayLike | KdTree,
    *,
    threads: int | None = None,
    strategy: Strategy = "auto",
    progress: bool | None = False,
    cap: int | None = None,
    overwrite_input: bool = False,
    restore_order: bool = False,
    closer_than: npt.ArrayLike | None = None,
    keep_tree: bool = False,
) -> CountResult:
    """`count_within` of the same arguments, with what else the count found: the strategy
    that ran (``"tree"`` or ``"flat"``: what ``"auto"`` chose; None where nothing was
    counted, without queries or avatars), and

    - with ``closer_than`` (one squared distance per query), per query whether an avatar
      counted for it lies within ``closer_than[i]`` (`strictly_below` of its own ``d2``,
      for the rivals strictly closer than its own avatar). The tree finds it in the walk
      that counts; after a flat pass, a capped walk of the tree over the counted queries
      does.
    - with ``keep_tree``, the plain kd-tree (each point one avatar) that the count built on
      ``avatars``, whichever walk then counted (that tree's, the collapsed tree's, or the
      flat pass), for the walks that follow on the same avatars; None where it built none
      (a prebuilt tree, heavy duplicates, ``strategy="flat"``) or put the avatars back
      (``restore_order``). With ``overwrite_input`` its points are the avatars' array,
      reordered in place, and the queries do not move with them.
    """
    threads, strategy = check_threads(threads) or usable_cores(), check_strategy(strategy)
    cap = check_cap(cap)
    if isinstance(avatars, KdTree):
        tree, points = avatars, avatars.points
    else:
        tree, points = None, coordinates("avatars", avatars)
    queries, thresholds, own = linked_queries(queries, thresholds, own, points.shape)
    below: Float64Array | None = None
    closer: BoolArray | None = None
    if closer_than is not None:
        below = np.ascontiguousarray(closer_than, dtype=np.float64)
        if below.shape != (len(queries),):
            msg = f"`closer_than` must hold one value per query ({len(queries)}), got {below.shape}"
            raise ValueError(msg)
        closer = np.zeros(len(queries), dtype=np.bool_)
    if len(queries) == 0 or len(points) == 0:
        return CountResult(np.zeros(len(queries), dtype=np.int64), closer, None)
    for name, values in (("queries", queries), ("avatars", points)):
        if not np.isfinite(values).all():
            msg = f"`{name}` hold NaN or infinite coordinates; the counts need finite ones"
            raise ValueError(msg)
    if strategy == "flat" and tree is not None:
        raise ValueError("the flat strategy takes the avatars, not a kd-tree")
    # The avatars' array and where each avatar went, when the tree reordered it in place.
    reordered: tuple[Float64Array, IndexArray] | None = None
    # Where each query went, when the tree took the queries along (`_in_tree_order`).
    moved: IndexArray | None = None
    kept: KdTree | None = None  # the plain tree, with `keep_tree`
    with stage("counting", len(queries), enabled=progress) as bar:
        if strategy == "auto" and tree is not None:
            strategy = "tree"  # a prebuilt tree (a Dask shard) is walked
        walked = None
        if strategy != "flat" and tree is None:
            # On duplicated avatars the walk runs on each distinct value once (the counts
            # are the same): heavy duplicates are told from a sample before any tree is
            # built, lighter ones from the plain tree. The flat pass takes the avatars.
            walked = KdTree.build_collapsed(points, threads=threads)
            if walked is None:
                # Not where the rows must go back: three more passes at random places cost
                # more than the walk gains (measured at 1e8).
                along = (
                    _along(points, queries, thresholds, below)
                    if own is None and overwrite_input and not restore_order and not keep_tree
                    else ()
                )
                tree = KdTree.build(
                    points, threads=threads, overwrite_input=overwrite_input, companions=along
                )
                if restore_order and tree.points is points:
                    reordered = tree.points, tree.position
                elif keep_tree:
                    kept = tree
                if along:
                    moved = tree.order
                    tree = _in_tree_order(tree)
                walked = tree.collapsed(threads=threads) or tree
            if strategy == "auto":
                strategy = choose_strategy(
                    walked, queries, thresholds, own, threads=threads, cap=cap
                )
            if strategy == "tree":
                tree = walked  # the plain tree's arrays are let go before the walk
        if strategy == "flat":
            from polars_hidden_rate.engine import flat  # FAISS is loaded when used

            given_own = own
            if tree is not None:  # the tree's points may be the avatars, reordered in place
                points, own = tree.points, tree.own_positions(own)
            elif own is None:
                own = np.arange(len(queries), dtype=np.int64)
            counts = flat.count_flat(
                queries, thresholds, own, points, threads=threads, bar=bar, cap=cap
            )
            if closer is not None and below is not None:
                counted = np.flatnonzero(counts > 0)
                if tree is None:  # the flat pass's points are the avatars as given
                    tree = walked or KdTree.build(points, threads=threads)
                    given_own = own
                closer[counted] = _within_strictly(
                    queries, tree, below, counted, given_own, threads
                )
        else:
            if tree is None:
                raise InvariantError("the tree strategy runs without a tree")
            counts, closer = tree.count_and_closer(
                queries, thresholds, own, below, threads=threads, cap=cap, advance=bar.advance
            )
    if moved is not None:  # back in the queries' row order
        del tree, walked  # the boxes first
        in_rows = np.empty_like(counts)
        in_rows[moved] = counts
        counts = in_rows
        if closer is not None:
            closer[moved] = closer.copy()
    if reordered is not None:
        restore_rows(*reordered)
    return CountResult(counts, closer, strategy, kept)


def _along(
    points: Float64Array,
    queries: Float64Array,
    thresholds: Float64Array,
    below: Float64Array | None,
) -> tuple[Float64Array, ...]:
    """The queries, their thresholds and ``below`` as 2-D rows that a tree built on
    ``points`` may take along (`KdTree.build`'s ``companions``), or () where one of them is
    not a writable C-order array of its own."""
    arrays = [queries, thresholds] if below is None else [queries, thresholds, below]
    own = all(
        array.flags.c_contiguous
        and array.flags.writeable
        and len(array) == len(points)
        and not np.shares_memory(array, points)
        for array in arrays
    )
    return tuple(array.reshape(len(array), -1) for array in arrays) if own else ()


def _in_tree_order(tree: KdTree) -> KdTree:
    """The tree as if its avatars had been given in its own order, for queries that its
    build moved with the avatars (query ``p`` then owns point ``p``): the walk reads the
    queries, thresholds and counts in sequence rather than each query at a random place
    (9 % of the walk at 1e7 records, 3 % at 1e8). No count changes: each query keeps its
    values, its threshold and its own avatar. The identity takes the place of
    ``tree.position``, which nothing needs any more."""
    identity = tree.position
    for start in range(0, len(identity), 1 << 20):  # no second array of that length
        stop = min(start + (1 << 20), len(identity))
        identity[start:stop] = np.arange(start, stop, dtype=np.int64)
    return replace(tree, order=identity, position=identity)
