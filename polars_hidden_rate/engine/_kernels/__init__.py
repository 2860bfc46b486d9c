"""Every numba kernel of the engine, under public names, one module a job: `common` (the
compilation, the tree as one value, the steps every walk shares), `build` (the tree's build),
`count` (the counting walk), `knearest` (the k-nearest walks, in ``d2`` or the Gower
distance), `nearest` (the nearest-two, within-reach and tied-match walks),
`capped` (the nearest walk in SDMetrics' capped mixed distance), `pairs` and `boxes` (the
kernels of `engine.arrays` and `engine.boxes`), `reach` (the routing of queries to the
shards their balls may reach). Imported from here.

Each is compiled without fastmath (it would fuse and reorder the sums), so every
distance a kernel compares is the engine's definition
(`squared_distances`): direct differences,
squared and summed in column order.
"""

from polars_hidden_rate.engine._kernels.boxes import closed_box_counts, open_box_counts
from polars_hidden_rate.engine._kernels.build import (
    TIED_SHARE,
    distinct_rows,
    leaves_below,
    node_boxes,
    node_splits,
    permute_rows,
    repeated_rows,
    select_nth,
    sorted_by_key,
    split_between_ties,
    split_nodes,
    swap_rows,
)
from polars_hidden_rate.engine._kernels.capped import capped_box, capped_nearest_walk, capped_pair
from polars_hidden_rate.engine._kernels.common import (
    SplitDims,
    TreeArrays,
    box_bounds,
    box_near,
    climb,
    kernel,
    leaf_below,
    point_d2,
    split_term,
)
from polars_hidden_rate.engine._kernels.count import NO_PROBE, Probe, Strictly, count_walk
from polars_hidden_rate.engine._kernels.knearest import (
    box_lower,
    heap_push,
    joint_overlaps,
    kth_walk,
    pair_distance,
    scan_k,
    segment_overlaps,
    within_walk,
)
from polars_hidden_rate.engine._kernels.nearest import (
    any_within,
    nearest_two_walk,
    reach_walk,
    scan_two,
    tied_match_walk,
    values_match,
)
from polars_hidden_rate.engine._kernels.pairs import (
    gather_column,
    pair_squared_distances,
    row_squared_distances,
)
from polars_hidden_rate.engine._kernels.reach import boxes_in_reach

__all__ = [
    "NO_PROBE",
    "TIED_SHARE",
    "Probe",
    "SplitDims",
    "Strictly",
    "TreeArrays",
    "any_within",
    "box_bounds",
    "box_lower",
    "box_near",
    "boxes_in_reach",
    "capped_box",
    "capped_nearest_walk",
    "capped_pair",
    "climb",
    "closed_box_counts",
    "count_walk",
    "distinct_rows",
    "gather_column",
    "heap_push",
    "joint_overlaps",
    "kernel",
    "kth_walk",
    "leaf_below",
    "leaves_below",
    "nearest_two_walk",
    "node_boxes",
    "node_splits",
    "open_box_counts",
    "pair_distance",
    "pair_squared_distances",
    "permute_rows",
    "point_d2",
    "reach_walk",
    "repeated_rows",
    "row_squared_distances",
    "scan_k",
    "scan_two",
    "segment_overlaps",
    "select_nth",
    "sorted_by_key",
    "split_between_ties",
    "split_nodes",
    "split_term",
    "swap_rows",
    "tied_match_walk",
    "values_match",
    "within_walk",
]
