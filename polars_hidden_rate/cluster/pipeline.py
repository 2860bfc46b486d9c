"""Local cloaking of parquet datasets on a Dask cluster: the workers read, link, count and write.

`count_and_write` runs [`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet]
with ``cluster=``. The driver holds futures, file metadata, split points and
scalars, never a column: its memory grows with the number of files, buckets and shards,
not with the records. Every stage is a set of pure tasks, each a function of files and
of other tasks' results, so a lost worker's results are recomputed by Dask from the
files, and the counts cannot change. This module is the driver (one method of `_Pipeline`
per stage); the tasks, and the values they pass each other, are in
`polars_hidden_rate.cluster.pipeline_tasks`.

1. **Read** (one task per file of each side): the key columns (cast to the types both
   sides share), the coordinates as float64, and each record's global row. The task
   checks what `read_aligned` checks and returns
   scalars: rows, the largest ``|coordinate|``, missing values, null keys, and a sample
   of the first coordinate for the split points. The records stay on the worker, cut
   into ``H`` buckets by a hash of the key (by key), or by ranges of rows (by row order),
   and move to their bucket (Dask's P2P shuffle, `DaskTasks.exchange`) as each read
   finishes.
2. The driver sums those scalars, raises the local errors, and chooses the canonical
   exponent (`exponent_for` of the global largest)
   and ``S - 1`` shard split points, quantiles of the sample of ``(first coordinate,
   row)`` pairs, as a distributed sort chooses them.
3. **Link** (one task per bucket): an original and its avatar have the same key, so
   they meet in one bucket. The task links them as locally (`link_by_key`)
   and reports its key problems, which the driver sums; it multiplies both sides
   by ``2^e``, computes each ``T_i`` (`own_thresholds`) and the shard of each avatar.
4. **Count** (one task per shard, the avatars between two split points): each bucket
   sends each shard its avatars there (every avatar is linked once, already at the
   canonical scale), the queries that own them, and the queries whose ball may reach the
   shard's slab of the first coordinate (the exact box test, query by query,
   `queries_in_reach`); the shard's task builds its kd-tree where it runs and calls
   `within_result` on them. Without a verdict each bucket sends as it finishes, while
   the driver sums the key problems (nothing is written before they pass); with one, only
   once the driver has judged the link.
5. **Write** (one task per originals file): the partial counts are exchanged back to
   their files by row and summed, the file is read again, given ``local_cloaking`` and
   ``hidden``, and written as its part. The task returns a histogram of the counts; the
   driver builds the summary from the histograms (and, for a quartile above them, by
   bisection over the workers' counts).

Every exchange is Dask's P2P shuffle, so a run submits tasks linear in files, buckets and
shards, known before it runs (`TaskPlan.tasks`).

The counts equal the local engine's, bit for bit: the same exponent, the same float64
thresholds, and every partial count exact (``docs/scale.md``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from polars_hidden_rate._types import CountArray
from polars_hidden_rate.cluster.pipeline_tasks import (
    BucketEvidence,
    Linked,
    LinkSpec,
    Read,
    ReadStats,
    ShardCounts,
    Side,
    Splits,
    Written,
    assemble,
    count_at_most,
    count_shard,
    link_bucket,
    link_problems,
    raise_missing_features,
    read_partition,
    read_pieces,
    read_stats,
    route_counts,
    route_to_shards,
    ties_in_file,
    write_partition,
)
from polars_hidden_rate.cluster.shards import TaskPlan, plan_tasks
from polars_hidden_rate.engine.scale import exponent_for
from polars_hidden_rate.frames import (
    CoordinateProblems,
    Dataset,
    KeyProblems,
    check_equal_heights,
)
from polars_hidden_rate.link.link_test import sampled_rows
from polars_hidden_rate.link.sets import compares_coordinates, copy_features, copy_fingerprints
from polars_hidden_rate.link.verdict import (
    Evidence,
    Verdict,
    judge_link,
)
from polars_hidden_rate.measures.summary import CloakingSummary, summary_from_order_statistics
from polars_hidden_rate.tasks import (
    DaskTasks,
    gathered,
    require_client,
    worker_specs,
)

if TYPE_CHECKING:
    from distributed import Client, Future

    from polars_hidden_rate.plan import CountPlan

SAMPLE_PER_SPLIT = 64
"""Sampled first coordinates per split point, spread over the files by their rows."""
HISTOGRAM_BINS = 1024
"""Counts below this are summarised from the workers' histograms alone."""


def order_statistic(k: int, merged: CountArray, at_most: Callable[[int], int]) -> int:
    """The ``k``-th smallest count (from 0), from the histogram of every count (``merged``:
    how many equal ``0, 1, ..., bins - 1``, then how many are ``bins`` or more) and, when it
    lies at or above ``bins``, a bisection on ``at_most(value)``: how many counts are at most
    ``value``."""
    below = np.cumsum(merged[:-1])  # how many counts are at most 0, 1, ..., bins - 1
    if k < below[-1]:
        return int(np.searchsorted(below, k, side="right"))
    low = high = len(below)  # fewer than k + 1 counts lie below: it is at least this
    while at_most(high) <= k:  # a value at or above it, then bisect
        high *= 2
    while low < high:
        middle = (low + high) // 2
        if at_most(middle) > k:
            high = middle
        else:
            low = middle + 1
    return low


# --- the driver ---------------------------------------------------------------------------


def count_and_write(
    request: CountPlan,
    originals: Dataset,
    avatars: Dataset,
    staging: Path,
    min_rate: float | None,
    *,
    tasks: TaskPlan | None = None,
    verdict: Verdict | None = None,
    metadata: Callable[[Evidence | None], Mapping[str, str] | None] | None = None,
) -> CloakingSummary:
    """Count on the cluster of ``request`` and write one part per originals file into
    ``staging``; the summary of the counts. With ``verdict``, the link test runs on the
    records the local path tests (gathered from the link buckets, before any count), and
    own copies are counted where the coordinates are the given ones. Every part carries
    in its footer the ``metadata`` that ``metadata(evidence)`` gives before they are
    written."""
    pipeline = _Pipeline(require_client(request.cluster), request, originals, avatars)
    return pipeline.run(staging, min_rate, tasks, verdict, metadata)


class _Pipeline:
    """One run's stages, each a method that submits its tasks, keyed
    ``phr-<stage>-<index>-<run>``. `run` drops each stage's futures once the next
    stage's tasks are submitted, so Dask frees every stage's data as soon as the next stage
    has it; no future is kept on the pipeline itself."""

    def __init__(
        self, client: Client, request: CountPlan, originals: Dataset, avatars: Dataset
    ) -> None:
        self.client = client
        self.tasks = DaskTasks(client)
        self.request = request
        self.originals = originals
        self.avatars = avatars

    def submit(self, name: str, function: Any, *args: Any) -> Future[Any]:
        return self.tasks.run(name, function, *args)  # type: ignore[no-any-return]

    def gather(self, futures: Sequence[Future[Any]]) -> list[Any]:
        return self.tasks.gather(futures)

    def run(
        self,
        staging: Path,
        min_rate: float | None,
        plan: TaskPlan | None,
        verdict: Verdict | None,
        metadata: Callable[[Evidence | None], Mapping[str, str] | None] | None = None,
    ) -> CloakingSummary:
        """Every stage in order (``docs/scale.md``), then the summary of the counts."""
        request, originals = self.request, self.originals
        left, right = _sides(request, originals, self.avatars, self.client)
        dim = len(left.names)
        if plan is None:
            workers = worker_specs(self.client)
            plan = plan_tasks(originals.rows, self.avatars.rows, dim, workers)
        left_reads = self.read_side(self.originals, left, plan)
        right_reads = self.read_side(self.avatars, right, plan)
        # Each read's pieces go to the link buckets as it finishes, while the driver checks
        # the reads' scalars: no link task is submitted before they pass.
        pieces = self.tasks.exchange(
            "link-pieces", [*left_reads, *right_reads], plan.buckets, read_pieces
        )
        left_stats, right_stats = self.check_reads(left, right, left_reads, right_reads)
        spec = self.link_spec(left, right, left_stats, right_stats, plan, verdict)
        links = self.link(spec, pieces)
        del left_reads, right_reads, pieces
        # Without a verdict, only the key problems stand between the link and the count:
        # each bucket's queries go to the shards as it finishes (a failed bucket sends
        # none), while the driver sums the problems; nothing is written before they pass.
        # With one, the link is judged first: a link that carries nothing must never start
        # its n^2 count on the workers.
        early = self.count(links, spec) if verdict is None else None
        evidence = self.check_links(links, left, right, right_stats, verdict, dim)
        partials = early if early is not None else self.count(links, spec)
        del links
        by_file = self.partials_by_file(partials)
        del partials
        counts = self.counts_by_file(by_file)
        if evidence is not None:
            evidence = replace(evidence, hidden_by_ties_only=self.ties_only(by_file))
        del by_file
        footer = None if metadata is None else metadata(evidence)
        written = self.write(staging, counts, footer)
        summary = self.summary(written, counts, min_rate)
        if evidence is None or verdict is None:
            return summary
        return replace(summary, evidence=evidence, max_own_copies=verdict.max_own_copies).judged()

    # --- 1. read ---------------------------------------------------------------------------

    def read_side(self, dataset: Dataset, side: Side, plan: TaskPlan) -> list[Future[Read]]:
        """A read task per file of one side."""
        n = max(dataset.rows, 1)
        sample = SAMPLE_PER_SPLIT * plan.shards
        return [
            self.submit(
                f"read-{side.role}-{p}",
                read_partition,
                part.path.absolute(),  # the workers may run elsewhere than here
                side,
                part.offset,
                plan.buckets,
                math.ceil(sample * part.rows / n),
            )
            for p, part in enumerate(dataset.partitions)
        ]

    def check_reads(
        self,
        left: Side,
        right: Side,
        left_reads: Sequence[Future[Read]],
        right_reads: Sequence[Future[Read]],
    ) -> tuple[list[ReadStats], list[ReadStats]]:
        """Each side's read scalars, checked as the local read checks them."""
        left_stats = self.gather(
            [self.submit(f"stats-originals-{p}", read_stats, f) for p, f in enumerate(left_reads)]
        )
        right_stats = self.gather(
            [self.submit(f"stats-avatars-{q}", read_stats, f) for q, f in enumerate(right_reads)]
        )
        _raise_read_errors(
            self.request,
            self.originals,
            self.avatars,
            left,
            right,
            left_stats,
            right_stats,
            self.client,
        )
        return left_stats, right_stats

    # --- 2. split points -------------------------------------------------------------------

    def link_spec(
        self,
        left: Side,
        right: Side,
        left_stats: Sequence[ReadStats],
        right_stats: Sequence[ReadStats],
        plan: TaskPlan,
        verdict: Verdict | None,
    ) -> LinkSpec:
        """The canonical exponent of the whole data and the split points, from the scalars."""
        request = self.request
        dim = len(left.names)
        largest = max(stats.largest for stats in [*left_stats, *right_stats])
        return LinkSpec(
            keys=max(len(left.keys), 1),
            left_names=left.key_names,
            right_names=right.key_names,
            dim=dim,
            exponent=exponent_for(largest, dim, request.tie_tol),
            tie_tol=request.tie_tol,
            avatar_splits=Splits.from_sample(right_stats, plan.shards),
            originals=len(left_stats),
            shards=plan.shards,
            sampled=sampled_rows(self.originals.rows),
            copies=verdict is not None,
        )

    # --- 3. link ---------------------------------------------------------------------------

    def link(self, spec: LinkSpec, pieces: Sequence[Future[Any]]) -> list[Future[Linked]]:
        """One link task per key bucket, from that bucket's piece of every file."""
        return [
            self.submit(f"link-bucket-{h}", gathered, link_bucket, column, spec)
            for h, column in enumerate(pieces)
        ]

    def check_links(
        self,
        links: Sequence[Future[Linked]],
        left: Side,
        right: Side,
        right_stats: Sequence[ReadStats],
        verdict: Verdict | None,
        dim: int,
    ) -> Evidence | None:
        """The key problems of the whole link, raised as locally; with ``verdict``, the link
        test on the records the local path tests."""
        found = self.gather(
            [self.submit(f"problems-{h}", link_problems, f) for h, f in enumerate(links)]
        )
        problems = [bucket for bucket, _ in found]
        _key_problems(left, right, [], right_stats, problems).raise_first()
        if verdict is None:
            return None
        shares = [e for _, e in found if e is not None]
        return _judge_link(self.request, verdict, shares, dim, self.originals.rows)

    # --- 4. count --------------------------------------------------------------------------

    def count(self, links: Sequence[Future[Linked]], spec: LinkSpec) -> list[Future[ShardCounts]]:
        """A count task per shard: its avatars and the queries that own them or whose ball
        may reach its slab, from every bucket."""
        slabs = spec.avatar_splits.slabs(spec.shards, spec.dim, spec.exponent)
        cut = partial(route_to_shards, slabs=slabs, dim=spec.dim)
        columns = self.tasks.exchange("shard-inputs", links, spec.shards, cut)
        return [
            self.submit(
                f"count-within-{s}", gathered, count_shard, column, spec.dim, self.request.threads
            )
            for s, column in enumerate(columns)
        ]

    # --- 5. write --------------------------------------------------------------------------

    def partials_by_file(self, partials: Sequence[Future[ShardCounts]]) -> list[Future[Any]]:
        """Each originals file's partial counts from every shard."""
        offsets = np.array([part.offset for part in self.originals.partitions], dtype=np.int64)
        cut = partial(route_counts, offsets=offsets)
        return self.tasks.exchange("file-counts", partials, len(offsets), cut)

    def counts_by_file(self, by_file: Sequence[Future[Any]]) -> list[Future[CountArray]]:
        """Each originals file's counts in its row order, summed over the shards."""
        return [
            self.submit(f"assemble-{p}", gathered, assemble, column, part.rows)
            for p, (part, column) in enumerate(zip(self.originals.partitions, by_file, strict=True))
        ]

    def ties_only(self, by_file: Sequence[Future[Any]]) -> int:
        """The records hidden by ties only, summed over the files."""
        found = [
            self.submit(f"ties-only-{p}", gathered, ties_in_file, column, part.rows)
            for p, (part, column) in enumerate(zip(self.originals.partitions, by_file, strict=True))
        ]
        return int(sum(self.gather(found)))

    def write(
        self,
        staging: Path,
        counts: Sequence[Future[CountArray]],
        metadata: Mapping[str, str] | None,
    ) -> list[Written]:
        """Each originals file written as its part with its counts (the dataset's columns in
        its order) and the footer ``metadata``; their histograms."""
        columns = tuple(self.originals.schema.names())
        footer = None if metadata is None else dict(metadata)
        return self.gather(
            [
                self.submit(
                    f"write-{p}",
                    write_partition,
                    part.path.absolute(),
                    part.rows,
                    counts[p],
                    staging.absolute(),
                    p,
                    HISTOGRAM_BINS,
                    columns,
                    footer,
                )
                for p, part in enumerate(self.originals.partitions)
            ]
        )

    def summary(
        self,
        written: Sequence[Written],
        counts: Sequence[Future[CountArray]],
        min_rate: float | None,
    ) -> CloakingSummary:
        """From the histograms; an order statistic at or above their last bin is found by
        bisection over the workers' counts."""
        merged = np.sum([w.histogram for w in written], axis=0)
        n = sum(w.rows for w in written)
        not_hidden = sum(w.not_hidden for w in written)
        return summary_from_order_statistics(
            n,
            not_hidden,
            lambda k: order_statistic(k, merged, lambda value: self._at_most(counts, value)),
            min_rate=min_rate,
        )

    def _at_most(self, counts: Sequence[Future[CountArray]], value: int) -> int:
        tasks = [
            self.submit(f"at-most-{value}-{uuid.uuid4().hex[:8]}", count_at_most, f, value)
            for f in counts
        ]
        return int(sum(self.gather(tasks)))


def _sides(
    request: CountPlan, originals: Dataset, avatars: Dataset, client: Client
) -> tuple[Side, Side]:
    """The read specification of each side: keys cast to their common type (categories as
    text, so that their hashes and joins do not depend on codes), coordinates."""
    link = request.link
    names, projection = list(request.coords), None
    if request.projection is not None:
        # Fitted by the workers, a task per file, partials merged here in file order (the
        # very fit of the local dataset path); the workers compute the coordinates.
        files = [part.path.absolute() for part in originals.partitions]
        projection = request.projection.fit_files(files, DaskTasks(client, "phr-fit"))
        names = request.projection.names(projection)
    sides = []
    fingerprints = (None, None) if compares_coordinates(request) else copy_fingerprints(request)
    for role, dataset, which, key_names, fingerprint in (
        ("originals", originals, "left", link.left, fingerprints[0]),
        ("avatars", avatars, "right", link.right, fingerprints[1]),
    ):
        keys = tuple(
            key.cast(pl.String) if _is_text(dtype, dataset.schema[name]) else key
            for key, name, dtype in zip(
                link.key_columns(which),  # type: ignore[arg-type]
                key_names,
                link.common_types,
                strict=True,
            )
        )
        if projection is None:
            coordinates = [pl.col(name) for name in names]
        else:
            projection.check_schema(dataset.schema)  # here, before any task runs
            coordinates = projection.coordinates(names)  # of the inputs read_partition adds
        sides.append(
            Side(
                role=role,
                keys=keys,
                key_names=tuple(key_names) or ("row",),
                coordinates=tuple(coordinates),
                names=tuple(names),
                rows=originals.rows,
                projection=projection,
                fingerprint=fingerprint,
            )
        )
    return sides[0], sides[1]


def _is_text(common: pl.DataType | None, own: pl.DataType) -> bool:
    dtype = common if common is not None else own
    return isinstance(dtype, pl.Categorical | pl.Enum)


def _raise_read_errors(
    request: CountPlan,
    originals: Dataset,
    avatars: Dataset,
    left: Side,
    right: Side,
    left_stats: Sequence[ReadStats],
    right_stats: Sequence[ReadStats],
    client: Client,
) -> None:
    """The errors of `read_aligned`, in its order, from the
    read tasks' scalars: empty sides, missing or inexact coordinates, heights, null keys."""
    for side, stats, dataset in ((left, left_stats, originals), (right, right_stats, avatars)):
        files = [part.path.absolute() for part in dataset.partitions]

        def explain_missing(side: Side = side, files: list[Path] = files) -> None:
            """As locally: the features whose gaps (or values) made a coordinate missing."""
            if side.projection is not None:
                client.gather(
                    client.submit(
                        raise_missing_features, files, side.projection, side.role, pure=False
                    )
                )

        CoordinateProblems.combine([s.problems for s in stats]).raise_first(explain_missing)
    if request.link.by_row_order:
        check_equal_heights(originals.rows, avatars.rows)
    _key_problems(left, right, left_stats, [], []).raise_first()


def _key_problems(
    left: Side,
    right: Side,
    left_stats: Sequence[ReadStats],
    right_stats: Sequence[ReadStats],
    buckets: Sequence[KeyProblems],
) -> KeyProblems:
    """The key problems of the whole link: null keys from the read tasks (files in row
    order), the rest from the link buckets."""
    names = (left.key_names, right.key_names)
    nulls = KeyProblems(
        names,
        nulls=(sum(s.null_keys for s in left_stats), sum(s.null_keys for s in right_stats)),
        null_examples=(
            next((s.null_key_example for s in left_stats if s.null_keys), None),
            next((s.null_key_example for s in right_stats if s.null_keys), None),
        ),
    )
    found = (replace(b, nulls=(0, 0), null_examples=(None, None)) for b in buckets)
    return KeyProblems.combine([nulls, *found])


def _judge_link(
    request: CountPlan,
    verdict: Verdict,
    pieces: Sequence[BucketEvidence],
    dim: int,
    population: int,
) -> Evidence:
    """The link test on the records gathered from the buckets (in record order, the rows the
    local path takes); refuses a random link, or a sorted one, as the local path does."""
    ids = np.concatenate([p.ids for p in pieces])
    order = np.argsort(ids, kind="stable")
    x = np.concatenate([p.originals for p in pieces]).reshape(-1, dim)[order]
    y = np.concatenate([p.avatars for p in pieces]).reshape(-1, dim)[order]
    test, sort = judge_link(request, verdict, x, y, population)
    copies = sum(p.own_copies for p in pieces)
    return Evidence(population, test, copies, tuple(copy_features(request)), sorted_link=sort)
