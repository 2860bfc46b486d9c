"""The documented import path of the parquet pipeline on a cluster (docs/scale.md); it lives
in `polars_hidden_rate.cluster.pipeline`, its task plan in
`polars_hidden_rate.cluster.shards`."""

from polars_hidden_rate.cluster.pipeline import count_and_write
from polars_hidden_rate.cluster.shards import TaskPlan, plan_tasks, records_per_task

__all__ = ["TaskPlan", "count_and_write", "plan_tasks", "records_per_task"]
