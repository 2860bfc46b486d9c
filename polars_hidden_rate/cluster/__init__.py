"""Exact counts on a Dask cluster: the same engine, on shards of the data.

`shards` sizes the tasks, bounds blocks and shards by their boxes, prunes the pairs
that cannot count and counts a block in a shard; `arrays` scatters in-memory
arrays (the ``cluster=`` path of the frame functions); `pipeline` drives the parquet
pipeline, where the workers read, link, count and write (their tasks: `pipeline_tasks`).
"""
