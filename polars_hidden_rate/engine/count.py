"""The engine's counting queries: `cloaking_result` (each original against the avatars,
at the canonical scale), `within_result` (queries against avatars, as given; the building
block of blocks and shards), both returning a `CountResult`; `count_cloaking`, the public
API's counts-only view; `hidden_flags` and `closer_rivals`. Every argument is checked once,
here; the strategies below take checked arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import BoolArray, CountArray, Float64Array, IndexArray
from polars_hidden_rate.checks import (
    InvariantError,
    check_cap,
    check_flag,
    check_threads,
    check_tie_tol,
)
from polars_hidden_rate.engine.arrays import (
    at_canonical_scale,
    check_rows,
    coordinates,
    linked_arrays,
    linked_coordinates,
    linked_queries,
    own_thresholds,
    strictly_below,
)
from polars_hidden_rate.engine.kdtree import KdTree, restore_rows
from polars_hidden_rate.engine.parallel import usable_cores
from polars_hidden_rate.engine.strategy import (
    Strategy,
    check_strategy,
    choose_strategy,
    flat_settled_early,
    tree_unbeaten,
)
from polars_hidden_rate.progress import Progress, stage


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
        How to find candidates; see `within_result`. Counts never depend on it.
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
    - with ``keep_tree``, the plain kd-tree (each point one avatar) that the count built on
      the avatars, whichever walk then counted (that tree's, the collapsed tree's, or the
      flat pass), for a caller that walks them again: its points are the avatars at the
      canonical scale of `linked_arrays` (their array, reordered in place, with
      ``overwrite_input``); None where it built none (heavy duplicates,
      ``strategy="flat"``) or put the avatars back (``restore_order``).

    Examples
    --------
    >>> import numpy as np
    >>> originals = np.array([[0.0], [1.0], [3.0]])
    >>> avatars = np.array([[1.0], [0.0], [1.0]])
    >>> result = cloaking_result(originals, avatars, strategy="tree", closer=True)
    >>> result.counts.tolist(), result.closer.tolist(), result.strategy
    ([2, 2, 1], [True, True, False], 'tree')
    """
    settings = checked_settings(
        threads, strategy, cap, overwrite_input, restore_order, keep_tree, progress
    )
    tie_tol = check_tie_tol(tie_tol)
    originals, avatars = linked_coordinates(originals, avatars)
    return linked_result(originals, avatars, tie_tol, settings, closer=check_flag(closer, "closer"))


def linked_result(
    originals: Float64Array,
    avatars: Float64Array,
    tie_tol: float,
    settings: CountSettings,
    *,
    closer: bool = False,
) -> CountResult:
    """`cloaking_result` of checked arguments, for the planner that checked them: linked
    arrays of one shape (`linked_coordinates`), ``tie_tol`` (`check_tie_tol`) and the
    ``settings`` (`checked_settings`)."""
    if not (
        originals.ndim == 2
        and originals.shape == avatars.shape
        and originals.dtype == avatars.dtype == np.float64
        and originals.flags.c_contiguous
        and avatars.flags.c_contiguous
    ):
        raise InvariantError("linked_result takes two C-order float64 arrays of one shape (n, d)")
    originals, avatars, thresholds = at_canonical_scale(
        originals, avatars, tie_tol, overwrite_input=settings.overwrite_input
    )
    below = None
    if closer:
        # With no tolerance the thresholds are the own d2 themselves.
        below = strictly_below(
            thresholds if tie_tol == 0.0 else own_thresholds(originals, avatars, 0.0)
        )
    return _count(_Query(originals, thresholds, None, below), avatars, None, settings)


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
    threads = check_threads(threads) or usable_cores()
    originals, avatars, own = linked_arrays(originals, avatars, 0.0)
    chosen = np.arange(len(originals)) if rows is None else np.asarray(rows, dtype=np.int64)
    check_rows(chosen, len(originals), every=False)
    return _within_strictly(originals, avatars, strictly_below(own), chosen, None, threads)


def _within_strictly(
    queries: Float64Array,
    avatars: Float64Array | KdTree,
    below: Float64Array,
    chosen: IndexArray,
    own: IndexArray | None,
    threads: int,
) -> BoolArray:
    """For the queries ``chosen``, whether an avatar other than their own lies within
    ``below`` (`strictly_below`; ``own``: their own avatars' rows, None for row ``i``),
    by a walk of the tree capped at one."""
    closer = np.zeros(len(chosen), dtype=bool)
    apart = np.flatnonzero(below[chosen] >= 0)  # nothing lies strictly closer than 0
    if len(apart):
        picked = chosen[apart]
        rows = picked if own is None else own[picked]
        tree = avatars if isinstance(avatars, KdTree) else None
        points = avatars.points if isinstance(avatars, KdTree) else avatars
        found = _count(
            _Query(queries[picked], below[picked], rows),
            points,
            tree,
            CountSettings(threads, "tree", 1),
        ).counts
        closer[apart] = found > 0
    return closer


def within_result(
    queries: npt.ArrayLike,
    thresholds: npt.ArrayLike,
    own: npt.ArrayLike | None,
    avatars: npt.ArrayLike | KdTree,
    *,
    threads: int | None = None,
    strategy: Strategy = "auto",
    cap: int | None = None,
    closer_than: npt.ArrayLike | None = None,
) -> CountResult:
    """For each query, count the avatars within its threshold, its own avatar aside, with
    what else the count found: the strategy that ran (``"tree"`` or ``"flat"``: what
    ``"auto"`` chose; None where nothing was counted, without queries or avatars), and,
    when asked, whether each query has an avatar within a smaller bound.

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
    cap
        When given (at least 1), each count is ``min(count, cap)``, found at less cost.
    closer_than
        One squared distance per query: the result's ``closer`` then says per query whether
        an avatar counted for it lies within ``closer_than[i]`` (`strictly_below` of its own
        ``d2``, for the rivals strictly closer than its own avatar). The tree finds it in
        the walk that counts; after a flat pass, a capped walk of the tree over the counted
        queries does.
    Returns
    -------
    CountResult
        The counts as int64, one per query, and what the count found beside them.

    Raises
    ------
    TypeError, ValueError
        On inconsistent arrays, or an argument of the wrong type or value.
    """
    count = checked_settings(threads, strategy, cap)
    if isinstance(avatars, KdTree):
        tree, points = avatars, avatars.points
    else:
        tree, points = None, coordinates("avatars", avatars)
    queries, thresholds, own = linked_queries(queries, thresholds, own, points.shape)
    below: Float64Array | None = None
    if closer_than is not None:
        below = np.ascontiguousarray(closer_than, dtype=np.float64)
        if below.shape != (len(queries),):
            msg = f"`closer_than` must hold one value per query ({len(queries)}), got {below.shape}"
            raise ValueError(msg)
    if len(queries) and len(points):
        for name, values in (("queries", queries), ("avatars", points)):
            if not np.isfinite(values).all():
                msg = f"`{name}` hold NaN or infinite coordinates; the counts need finite ones"
                raise ValueError(msg)
        if count.strategy == "flat" and tree is not None:
            raise ValueError("the flat strategy takes the avatars, not a kd-tree")
    query = _Query(queries, thresholds, own, below)
    return _count(query, points, tree, count)


@dataclass(frozen=True)
class CountSettings:
    """How a count runs, checked once at the public boundary (`checked_settings`): the
    threads (resolved), the strategy, the cap, and who owns the arrays (``overwrite_input``,
    ``restore_order``: `count_cloaking`'s), from the planner to the kd-tree."""

    threads: int
    strategy: Strategy
    cap: int | None
    overwrite_input: bool = False
    restore_order: bool = False
    keep_tree: bool = False
    progress: bool | None = False


@dataclass(frozen=True)
class _Query:
    """The queries of a count, checked: their thresholds, their own avatars' rows (None:
    row ``i``) and the bound of the ``closer`` flags (None: not asked)."""

    queries: Float64Array
    thresholds: Float64Array
    own: IndexArray | None
    below: Float64Array | None = None


@dataclass
class _Trees:
    """The trees a count built on the avatars (`_built`): the one its walk takes (the
    collapsed tree, the plain one, or a prebuilt one), the plain one (None where none was
    built, or once the walk no longer needs it), the one kept for the caller, and how to put
    the avatars (``reordered``) and the counts (``moved``) back in their row order."""

    walked: KdTree | None = None
    plain: KdTree | None = None
    kept: KdTree | None = None
    reordered: tuple[Float64Array, IndexArray] | None = None
    moved: IndexArray | None = None
    chosen: Literal["flat"] | None = None  # by `flat_settled_early`, before any tree


def checked_settings(
    threads: object,
    strategy: object,
    cap: object,
    overwrite_input: object = False,
    restore_order: object = False,
    keep_tree: object = False,
    progress: object = False,
) -> CountSettings:
    shown = None if progress is None else check_flag(progress, "progress", or_none=True)
    return CountSettings(
        check_threads(threads) or usable_cores(),
        check_strategy(strategy),
        check_cap(cap),
        check_flag(overwrite_input, "overwrite_input"),
        check_flag(restore_order, "restore_order"),
        check_flag(keep_tree, "keep_tree"),
        shown,
    )


def _count(
    query: _Query,
    points: Float64Array,
    prebuilt: KdTree | None,
    options: CountSettings,
) -> CountResult:
    """`within_result` of checked arguments."""
    n = len(query.queries)
    closer = None if query.below is None else np.zeros(n, dtype=np.bool_)
    if n == 0 or len(points) == 0:
        return CountResult(np.zeros(n, dtype=np.int64), closer, None)
    strategy = options.strategy
    # A prebuilt tree (a Dask shard) is walked, as is any tree that cannot lose.
    if strategy == "auto" and (
        prebuilt is not None or tree_unbeaten(n, len(points), points.shape[1], options.threads)
    ):
        strategy = "tree"
    with stage("counting", n, enabled=options.progress) as bar:
        trees = _built(query, points, prebuilt, options, strategy)
        strategy = trees.chosen or strategy
        if strategy == "auto":
            strategy = "tree"
            if trees.walked is not None:
                strategy = choose_strategy(
                    trees.walked,
                    query.queries,
                    query.thresholds,
                    query.own,
                    threads=options.threads,
                    cap=options.cap,
                )
        if strategy == "flat":
            counts = _count_flat(query, points, trees, options, bar, closer)
        else:
            walked, trees.walked, trees.plain = trees.walked, None, None  # the plain tree's
            if walked is None:  # arrays are let go before the walk
                raise InvariantError("the tree strategy runs without a tree")
            counts, closer = walked.walk_counts(
                query.queries,
                query.thresholds,
                query.own,
                query.below,
                threads=options.threads,
                cap=options.cap,
                advance=bar.advance,
            )
            del walked
    if trees.moved is not None:  # back in the queries' row order
        trees.walked = trees.plain = None  # the boxes first
        in_rows = np.empty_like(counts)
        in_rows[trees.moved] = counts
        counts = in_rows
        if closer is not None:
            closer[trees.moved] = closer.copy()
    if trees.reordered is not None:
        restore_rows(*trees.reordered)
    return CountResult(counts, closer, strategy, trees.kept)


def _built(
    query: _Query,
    points: Float64Array,
    prebuilt: KdTree | None,
    options: CountSettings,
    strategy: Strategy,
) -> _Trees:
    """The trees a count walks (`_Trees`): none for the flat strategy, the prebuilt one
    as given. On duplicated avatars the walk runs on each distinct value once (the counts
    are the same): heavy duplicates are told from a sample before any tree is built,
    lighter ones from the plain tree."""
    if prebuilt is not None:
        return _Trees(walked=prebuilt, plain=prebuilt)
    if strategy == "flat":
        return _Trees()
    threads = options.threads
    collapsed = KdTree.build_collapsed(points, threads=threads)
    if collapsed is not None:
        return _Trees(walked=collapsed)
    # A tree kept for the caller, or own avatars elsewhere, is built whichever walk counts.
    if (
        strategy == "auto"
        and query.own is None
        and not options.keep_tree
        and flat_settled_early(
            points, query.queries, query.thresholds, threads=threads, cap=options.cap
        )
    ):
        return _Trees(chosen="flat")
    # Not where the rows must go back: three more passes at random places cost more than
    # the walk gains (measured at 1e8).
    takes_along = (
        query.own is None
        and options.overwrite_input
        and not options.restore_order
        and not options.keep_tree
    )
    along = _along(points, query.queries, query.thresholds, query.below) if takes_along else ()
    tree = KdTree.build(
        points, threads=threads, overwrite_input=options.overwrite_input, companions=along
    )
    trees = _Trees()
    if options.restore_order and tree.points is points:
        trees.reordered = tree.points, tree.position
    elif options.keep_tree:
        trees.kept = tree
    if along:
        trees.moved = tree.order
        tree = _in_tree_order(tree)
    trees.walked, trees.plain = tree.collapsed(threads=threads) or tree, tree
    return trees


def _count_flat(
    query: _Query,
    points: Float64Array,
    trees: _Trees,
    options: CountSettings,
    bar: Progress,
    closer: BoolArray | None,
) -> CountArray:
    """The flat pass's counts, and the ``closer`` flags of the counted queries (in place)
    by a capped walk of a tree."""
    from polars_hidden_rate.engine import flat  # FAISS is loaded when used

    own = given_own = query.own
    tree = trees.plain
    if tree is not None:  # the tree's points may be the avatars, reordered in place
        points, own = tree.points, tree.own_positions(own)
    elif own is None:
        own = np.arange(len(query.queries), dtype=np.int64)
    counts = flat.count_flat(
        query.queries,
        query.thresholds,
        own,
        points,
        threads=options.threads,
        bar=bar,
        cap=options.cap,
    )
    if closer is not None and query.below is not None:
        counted = np.flatnonzero(counts > 0)
        if tree is None:  # the flat pass's points are the avatars as given
            tree = trees.walked or KdTree.build(points, threads=options.threads)
            given_own = own
        closer[counted] = _within_strictly(
            query.queries, tree, query.below, counted, given_own, options.threads
        )
    return counts


def _along(
    points: Float64Array,
    queries: Float64Array,
    thresholds: Float64Array,
    below: Float64Array | None,
) -> tuple[Float64Array, ...]:
    """The queries, their thresholds and ``below`` as 2-D rows that a tree built on
    ``points`` may take along (`KdTree.build`'s ``companions``), or () where one of them is
    not a writable C-order array of its own."""
    rows = []
    for array in (queries, thresholds) if below is None else (queries, thresholds, below):
        if not (
            array.flags.c_contiguous
            and array.flags.writeable
            and len(array) == len(points)
            and not np.shares_memory(array, points)
        ):
            return ()
        rows.append(array.reshape(len(array), -1))
    return tuple(rows)


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
