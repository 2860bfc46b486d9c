"""Which exact strategy counts faster, the kd-tree walk or the flat band: the cost model of
``strategy="auto"`` and the probe that feeds it.

The strategies never change a count, only its time (``docs/engine.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.engine import kdtree
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.parallel import parallel_map, usable_cores

Strategy = Literal["auto", "flat", "tree"]
STRATEGIES: tuple[Strategy, ...] = ("auto", "flat", "tree")


# The cost model of "auto" (choose_strategy), in seconds on one thread, fitted by
# benchmarks/calibrate_auto.py on this project's 2-core machine (docs/engine.md): the tree
# pays per box tested and per point compared, per coordinate, and per query; the flat pass
# per pair and per pair-coordinate (FAISS), per rival it handles and settles, and per call.
TREE_BOX_COST = 5.9e-9
TREE_POINT_COST = 9.7e-10
TREE_QUERY_COST = 3.9e-6
FLAT_PAIR_COST = 1.27e-8
FLAT_PAIR_COORD_COST = 1.5e-10
FLAT_RESULT_COST = 5e-8
FLAT_CALL_COST = 1e-2
# The probe walks one query in PROBE_SHARE, at least PROBE_MIN and at most PROBE_MAX, each
# walk stopped once it costs PROBE_BUDGET times a flat pass's work per query.
PROBE_SHARE = 128
PROBE_MIN, PROBE_MAX = 32, 1024
PROBE_BUDGET = 1.5
# Below this predicted flat time the tree runs without a probe: both are fast.
PROBE_FLOOR_SECONDS = 0.05
# Walks stopped at their budget (so their mean work is a floor) that predict the tree at
# more than FLAT_SETTLED times the flat pass settle the flat pass: a tree on a sample of
# the avatars before the full tree is built, the probe's first walks on the full tree.
FLAT_SETTLED = 1.2
# Before the tree on every avatar is built, `PROBE_MIN` queries walk a tree on one avatar in
# SAMPLE_SHARE (at least SAMPLE_MIN of them, and the probed queries' own avatars).
SAMPLE_SHARE = 8
SAMPLE_MIN = 4096


def check_strategy(strategy: object) -> Strategy:
    """``strategy``, one of `STRATEGIES`."""
    if not (isinstance(strategy, str) and strategy in STRATEGIES):
        msg = f"`strategy` must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}"
        raise ValueError(msg)
    return strategy


def choose_strategy(
    tree: KdTree,
    queries: Float64Array,
    thresholds: Float64Array,
    own: IndexArray | None,
    *,
    threads: int,
    cap: int | None = None,
) -> Literal["flat", "tree"]:
    """The strategy predicted faster for these queries against the avatars of ``tree``.

    The probe walks the tree for a random sample of the queries (fixed seed), counting
    the boxes it tests and the points it compares. The tree's time is predicted from
    that work, the flat pass's from the pairs it compares (every query with every
    avatar), both with costs measured on one machine (``docs/engine.md``). The probe walks
    one query in `PROBE_SHARE` and stops each walk at `PROBE_BUDGET` times a
    flat pass's work per query, and stops after its first `PROBE_MIN` walks when they
    already predict the tree at more than `FLAT_SETTLED` times the flat pass: it costs a
    few percent of the run it chooses. Where even walks of every box and point
    (`_tree_bound`) would cost less than the flat pass, nothing is walked.
    """
    # Both fast, or the tree cannot lose (a collapsed tree of few distinct values, a few
    # dimensions): no walk to predict.
    threads = max(1, min(threads, usable_cores()))
    dim = tree.points.shape[1]
    _, flat_pass = _flat_costs(len(queries), tree.avatars, dim, threads)
    if (
        flat_pass < PROBE_FLOOR_SECONDS
        or _tree_bound(len(queries), len(tree.begin), len(tree.points), dim, threads) < flat_pass
    ):
        return "tree"
    estimate = probe(tree, queries, thresholds, own, threads=threads, cap=cap)
    return "flat" if estimate.flat_seconds < estimate.tree_seconds else "tree"


@dataclass(frozen=True)
class Estimate:
    """Times predicted by `probe` for the whole count, and what the probe walked."""

    tree_seconds: float
    flat_seconds: float
    sampled: int
    stopped: int


def probe(
    tree: KdTree,
    queries: Float64Array,
    thresholds: Float64Array,
    own: IndexArray | None,
    *,
    threads: int,
    cap: int | None = None,
) -> Estimate:
    """Predict the tree's and the flat pass's times from the walks of a sample of queries.

    See `choose_strategy`. With fewer pairs than `PROBE_FLOOR_SECONDS` of
    flat work, nothing is walked and the tree is predicted free.
    """
    # A collapsed tree holds fewer points than avatars; a flat pass compares them all.
    n_queries, n_avatars, dim = len(queries), tree.avatars, tree.points.shape[1]
    threads = max(1, min(threads, usable_cores()))
    flat_per_query, flat_pass = _flat_costs(n_queries, n_avatars, dim, threads)
    if flat_pass < PROBE_FLOOR_SECONDS:
        return Estimate(0.0, flat_pass, 0, 0)
    sample = min(n_queries, max(PROBE_MIN, min(PROBE_MAX, n_queries // PROBE_SHARE)))
    chosen = np.random.default_rng(0).choice(n_queries, size=sample, replace=False)
    box, point = dim * TREE_BOX_COST, dim * TREE_POINT_COST
    budget = PROBE_BUDGET * flat_per_query
    _ = tree.arrays  # its splits made once here, not first by the threads

    def walks(rows: IndexArray) -> tuple[Float64Array, CountArray]:
        parts = np.array_split(rows, threads)

        def walk(part: int) -> tuple[IndexArray, CountArray]:
            return tree.walk_work(
                queries,
                thresholds,
                own,
                parts[part],
                cap=cap,
                box_cost=box,
                point_cost=point,
                budget=budget,
            )

        done = list(parallel_map(threads, walk, len(parts)))
        work = np.concatenate([w for w, _ in done]).astype(np.float64)
        per_query = work[:, 0] * box + work[:, 1] * point + TREE_QUERY_COST
        return per_query, np.concatenate([c for _, c in done])

    # A first batch whose every walk runs past the budget, or that already predicts the tree
    # (a floor: its walks were stopped) at more than `FLAT_SETTLED` times the flat pass,
    # settles it: the tree costs more than the flat pass on most queries (full-rank data in
    # many dimensions), and the rest of the sample would cost as much again per walk.
    per_query, found = walks(np.sort(chosen[:PROBE_MIN]))
    first = _estimate(per_query, found, n_queries, threads, flat_pass, budget)
    if (
        len(chosen) == PROBE_MIN
        or first.stopped == PROBE_MIN
        or first.tree_seconds > FLAT_SETTLED * first.flat_seconds
    ):
        return first
    more, found_more = walks(np.sort(chosen[PROBE_MIN:]))
    per_query, found = np.concatenate([per_query, more]), np.concatenate([found, found_more])
    return _estimate(per_query, found, n_queries, threads, flat_pass, budget)


def _estimate(
    per_query: Float64Array,
    found: CountArray,
    n_queries: int,
    threads: int,
    flat_pass: float,
    budget: float,
) -> Estimate:
    """The times `probe` predicts from its walks' predicted seconds and rivals found."""
    tree_seconds = n_queries * float(per_query.mean()) / threads
    # A flat pass handles every pair within reach: at least the rivals the walks found.
    flat_seconds = flat_pass + n_queries * FLAT_RESULT_COST * float(found.mean())
    stopped = int(np.count_nonzero(per_query - TREE_QUERY_COST > budget))
    return Estimate(tree_seconds, flat_seconds, len(per_query), stopped)


def tree_unbeaten(n_queries: int, n_avatars: int, dim: int, threads: int) -> bool:
    """Whether ``"auto"`` runs the tree with nothing walked to predict it: both strategies are
    fast (a flat pass under `PROBE_FLOOR_SECONDS`), or the tree on every avatar cannot lose
    (`_tree_bound` of its largest number of boxes below the flat pass's time: up to 5
    dimensions with the fitted costs). Where it holds, `flat_settled_early` settles nothing
    and `choose_strategy` chooses the tree too (its bound takes the tree's own boxes)."""
    threads = max(1, min(threads, usable_cores()))
    _, flat_pass = _flat_costs(n_queries, n_avatars, dim, threads)
    if flat_pass < PROBE_FLOOR_SECONDS:
        return True
    # A tree on n points has fewer than 4 n / LEAF_SIZE boxes (`KdTree.build`).
    boxes = 4 * n_avatars // kdtree.LEAF_SIZE + 1
    return _tree_bound(n_queries, boxes, n_avatars, dim, threads) < flat_pass


def _flat_costs(n_queries: int, n_avatars: int, dim: int, threads: int) -> tuple[float, float]:
    """A flat pass's predicted seconds per query on one thread, and for the whole count."""
    per_query = n_avatars * (FLAT_PAIR_COST + dim * FLAT_PAIR_COORD_COST)
    return per_query, n_queries * per_query / threads + FLAT_CALL_COST


def _tree_bound(n_queries: int, boxes: int, points: int, dim: int, threads: int) -> float:
    """The tree's predicted seconds were every query to test all ``boxes`` and compare all
    ``points``: no walk tests a box or compares a point twice, so no probe predicts more."""
    per_query = dim * (boxes * TREE_BOX_COST + points * TREE_POINT_COST) + TREE_QUERY_COST
    return n_queries * per_query / threads


def flat_settled_early(
    avatars: Float64Array,
    queries: Float64Array,
    thresholds: Float64Array,
    *,
    threads: int,
    cap: int | None = None,
) -> bool:
    """Whether the flat pass wins before any tree on every avatar is built: `PROBE_MIN`
    queries (row ``i`` owns avatar ``i``) walk a tree on a sample of the avatars, each walk
    stopped at `PROBE_BUDGET` times a flat pass's work per query over that sample, and
    their mean work passes `FLAT_SETTLED` times that flat work.

    A tree on fewer points compares a larger share of them (its boxes are wider for the
    same thresholds), so where the tree on the sample loses on most walks the tree on all
    avatars is not worth its build (full-rank data in many dimensions); anywhere else
    `probe` decides, on the full tree. It costs a tree on the sample and a few capped walks,
    and nothing where the tree cannot lose (`tree_unbeaten`: up to 5 dimensions with the
    fitted costs).
    """
    n_queries, n_avatars, dim = len(queries), len(avatars), avatars.shape[1]
    threads = max(1, min(threads, usable_cores()))
    sample = max(SAMPLE_MIN, n_avatars // SAMPLE_SHARE)
    if (
        n_queries != n_avatars
        or sample >= n_avatars // 2
        or tree_unbeaten(n_queries, n_avatars, dim, threads)
    ):
        return False
    rng = np.random.default_rng(0)
    probed = np.sort(rng.choice(n_queries, size=PROBE_MIN, replace=False))
    rows = np.union1d(probed, rng.choice(n_avatars, size=sample, replace=False))
    tree = KdTree.build(avatars[rows], threads=threads)
    flat_per_query, _ = _flat_costs(n_queries, len(rows), dim, threads)
    box, point = dim * TREE_BOX_COST, dim * TREE_POINT_COST
    work, _ = tree.walk_work(
        queries[probed],
        thresholds[probed],
        np.searchsorted(rows, probed),
        np.arange(len(probed)),
        cap=cap,
        box_cost=box,
        point_cost=point,
        budget=PROBE_BUDGET * flat_per_query,
    )
    walked = work[:, 0] * box + work[:, 1] * point
    return bool(walked.mean() > FLAT_SETTLED * flat_per_query)
