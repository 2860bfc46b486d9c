"""The documented import path of the in-memory scatter path (docs/scale.md); it lives in
`polars_hidden_rate.cluster.arrays`, its sizing and pruning in
`polars_hidden_rate.cluster.shards`, its client helpers in `polars_hidden_rate.tasks`.
"""

from polars_hidden_rate.cluster.arrays import count_cloaking_distributed, nearest_two_distributed
from polars_hidden_rate.cluster.shards import Sizing, pairs_within_reach, size_tasks
from polars_hidden_rate.tasks import EXTRA_HINT, WorkerSpec, require_client, worker_specs

__all__ = [
    "EXTRA_HINT",
    "Sizing",
    "WorkerSpec",
    "count_cloaking_distributed",
    "nearest_two_distributed",
    "pairs_within_reach",
    "require_client",
    "size_tasks",
    "worker_specs",
]
