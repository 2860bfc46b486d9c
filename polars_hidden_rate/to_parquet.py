"""Local cloaking from parquet datasets to a parquet dataset, on one machine or a Dask cluster.

[`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet] reads the originals and
the avatars as parquet files (a file, a directory of files, or a list), and writes one
``part-NNNNN.parquet`` per originals file into an output directory: the originals' columns plus
``local_cloaking`` and ``hidden``. It returns the gate's
[`CloakingSummary`][polars_hidden_rate.measures.summary.CloakingSummary] without bringing the
records back.

Without ``cluster``, the local engine counts every linked coordinate (as
[`polars_hidden_rate.local_cloaking`][polars_hidden_rate.local_cloaking] does), then each originals
file is read again, given its counts and written as its own part. With ``cluster``, the workers do
all of that (`polars_hidden_rate.cluster.pipeline`) and the driver only plans.

The parts are written into a private temporary directory beside ``output``, renamed to
``output`` when every part is complete: nothing half-written is ever visible, a failure
leaves nothing behind, and an existing ``output`` is replaced only with ``overwrite=True``,
only after success, keeping its permissions. The rename is exclusive
(`polars_hidden_rate.outputs.publish`): a run never replaces an output that another
created or replaced while it counted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, Unpack

import polars as pl

from polars_hidden_rate.checks import check_flag
from polars_hidden_rate.frames import Dataset, Source, check_output_free, open_dataset
from polars_hidden_rate.link.verdict import (
    Evidence,
    Verdict,
    check_link,
)
from polars_hidden_rate.measures.summary import CloakingSummary, check_min_rate, summarize
from polars_hidden_rate.outputs import Identity, check_output, staged_directory, write_counted_part
from polars_hidden_rate.plan import CountOptions, CountPlan, GateOptions, plan, split_options
from polars_hidden_rate.provenance import parquet_metadata, stated

T = TypeVar("T")

Describe = Callable[[Evidence | None], Mapping[str, Any]]
"""The provenance block of a run, from the evidence of its verdict (None without one)."""
PartMetadata = Callable[[Evidence | None], Mapping[str, str] | None]
"""Every part's footer metadata, from the same evidence."""
DatasetInputs = Callable[["DatasetJob"], dict[str, dict[str, Any]]]
"""A dataset run's inputs as its provenance states them, from its planned job."""


def dataset_rows(job: DatasetJob) -> dict[str, dict[str, Any]]:
    """The inputs as the Python API states them: their rows, from the files' metadata (the
    command line adds their paths, sizes and hashes)."""
    return {
        "originals": {"rows": job.originals.rows},
        "avatars": {"rows": job.avatars.rows},
    }


def _here(work: Callable[[], T]) -> T:
    return work()


def local_cloaking_to_parquet(
    originals: Source,
    avatars: Source,
    output: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    min_rate: float | None = None,
    **options: Unpack[GateOptions],
) -> CloakingSummary:
    """Write each original's local cloaking into a parquet dataset; return the gate's summary.

    Parameters
    ----------
    originals, avatars
        Parquet files: one file, a directory of ``*.parquet`` files (sorted by name), or
        a list of files, each with the same columns and types, in any order (read by name).
        With ``cluster``, every worker must be able to read them.
    output
        A directory, written as ``part-00000.parquet``, ``part-00001.parquet``, ...: one
        file per originals file, in their order, holding that file's rows in their order,
        every column (in the first file's order), plus ``local_cloaking`` and ``hidden``.
        With ``cluster``, every worker must be able to write beside it.
    overwrite
        Replace an existing ``output`` directory (only once the new one is complete).
    min_rate
        The minimum hidden rate the summary's ``passed`` compares against; None for no gate.
        A gate (``min_rate``, or any verdict option) judges the link and the own copies as
        ``hidden-rate check`` does; without one, the summary has no evidence and ``passed``
        is True (nothing judged).
    **options
        The keyword options of
        [`polars_hidden_rate.local_cloaking`][polars_hidden_rate.local_cloaking]
        ([`CountOptions`][polars_hidden_rate.CountOptions]), and the verdict options
        ``allow_unlinked``, ``allow_sorted_link``, ``by_row_order`` and ``max_own_copies``
        of `polars_hidden_rate.gate.cloaking_summary`. ``cluster`` runs every stage on the workers
        (`polars_hidden_rate.cluster.pipeline`); without it, the local engine.

    Returns
    -------
    CloakingSummary
        What [`summarize`][polars_hidden_rate.measures.summary.summarize] gives on the written
        records.

    Raises
    ------
    FileExistsError
        When ``output`` exists and ``overwrite`` is False, or is not a directory.
    ValueError
        When ``output`` is, or holds, an input file; and on bad options.
    polars.exceptions.PolarsError
        On bad data, as [`polars_hidden_rate.local_cloaking`][polars_hidden_rate.local_cloaking]
        raises it (missing or duplicated keys with an example key, missing coordinates, ...),
        and, under a gate, on a link the verdict refuses, as
        `polars_hidden_rate.gate.cloaking_summary` does
        (`UnlinkedAvatarsError`, ...). Nothing is written then.

    Examples
    --------
    >>> import tempfile, polars as pl
    >>> import polars_hidden_rate as phr
    >>> folder = Path(tempfile.mkdtemp())
    >>> pl.DataFrame({"id": [1, 2, 3], "x": [0.0, 1.0, 3.0]}).write_parquet(folder / "o.parquet")
    >>> pl.DataFrame({"id": [3, 2, 1], "x": [3.0, 1.5, 0.5]}).write_parquet(folder / "a.parquet")
    >>> summary = phr.local_cloaking_to_parquet(
    ...     folder / "o.parquet", folder / "a.parquet", folder / "out", coords="x", on="id"
    ... )
    >>> summary.n, summary.hidden_rate
    (3, 33.333333333333336)
    >>> pl.read_parquet(folder / "out")["local_cloaking"].to_list()
    [0, 1, 0]
    """
    counting, verdict = split_options(options)
    # A gate (a minimum rate, or a verdict option) judges the link as `check` does.
    gated = min_rate is not None or len(counting) < len(options)
    return dataset_run(
        originals,
        avatars,
        output,
        counting,
        verdict if gated else None,
        overwrite=overwrite,
        min_rate=min_rate,
        caller="local_cloaking_to_parquet",
    )


def dataset_run(
    originals: Source,
    avatars: Source,
    output: str | os.PathLike[str],
    options: CountOptions,
    verdict: Verdict | None,
    *,
    overwrite: bool,
    min_rate: float | None,
    caller: str,
    inputs: DatasetInputs = dataset_rows,
    background: Callable[[Callable[[], CloakingSummary]], CloakingSummary] = _here,
) -> CloakingSummary:
    """The dataset's run, under `local_cloaking_to_parquet` and ``hidden-rate check`` of
    directories alike: planned and checked once (`plan_dataset`), its ``inputs`` described
    before anything is written, then counted and written part by part (`DatasetJob.write`),
    every part and the summary stating the same provenance (the settings once the link test
    has run). ``background`` runs the count (the command line's, where a stop signal can
    still be handled); the parts are staged in this thread, so that a stop removes them."""
    job = plan_dataset(
        originals,
        avatars,
        output,
        overwrite=overwrite,
        min_rate=min_rate,
        caller=caller,
        verdict=verdict,
        **options,
    )
    described = inputs(job)

    def block(evidence: Evidence | None) -> dict[str, Any]:
        return stated(
            job.request,
            described,
            strategy="cluster" if job.request.cluster is not None else None,
            verdict=verdict,
            evidence=evidence,
            min_rate=job.min_rate,
        )

    with staged_directory(job.output, job.replaces) as staging:
        return background(lambda: job.write(staging, block))


@dataclass(frozen=True)
class DatasetJob:
    """A checked [`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet]
    request: nothing is read until it runs."""

    request: CountPlan
    originals: Dataset
    avatars: Dataset
    output: Path
    min_rate: float | None
    verdict: Verdict | None = None
    replaces: Identity | None = None
    """The directory found at ``output`` when planned: the only one the job may replace."""

    def write(self, staging: Path, describe: Describe | None = None) -> CloakingSummary:
        """Count, and write every part into ``staging`` (see `staged_directory`).

        The verdict's evidence (link test, own copies) comes from the records counted:
        locally from the read the counts come from, on a cluster from the link buckets
        (docs/guarantees.md). ``describe(evidence)``, once the link test has run and before
        any part is written, gives the provenance block that every part carries in its
        footer (`parquet_metadata`) and the summary states."""
        block: dict[str, Any] = {}

        def metadata(evidence: Evidence | None) -> dict[str, str] | None:
            if describe is None:
                return None
            block.update(describe(evidence))
            return parquet_metadata(block)

        if self.request.cluster is not None:
            from polars_hidden_rate.cluster import pipeline

            summary = pipeline.count_and_write(
                self.request,
                self.originals,
                self.avatars,
                staging,
                self.min_rate,
                verdict=self.verdict,
                metadata=metadata,
            )
        else:
            summary = _count_and_write_locally(
                self.request, self.originals, staging, self.min_rate, self.verdict, metadata
            )
        return summary.with_provenance(block) if describe is not None else summary


def plan_dataset(
    originals: Source,
    avatars: Source,
    output: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    min_rate: float | None = None,
    caller: str = "plan_dataset",
    verdict: Verdict | None = None,
    **options: Unpack[CountOptions],
) -> DatasetJob:
    """Check the request of
    [`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet] from metadata and
    schemas only: the options, the files, and an ``output`` that may be written without losing an
    input."""
    threshold = check_min_rate(min_rate)
    overwrite = check_flag(overwrite, "overwrite")
    left, right = open_dataset(originals, "originals"), open_dataset(avatars, "avatars")
    target = Path(output)
    inputs = {left.role: left.paths, right.role: right.paths}
    # A directory, replaced only with ``overwrite``: the rule of every output.
    replaces = check_output(target, inputs, kind="directory", name="output", overwrite=overwrite)
    request = plan(left.scan(), right.scan(), options, caller=caller)
    check_output_free(left.schema)
    if verdict is not None:
        check_link(request, verdict)
    return DatasetJob(request, left, right, target, threshold, verdict, replaces)


def _count_and_write_locally(
    request: CountPlan,
    originals: Dataset,
    staging: Path,
    min_rate: float | None,
    verdict: Verdict | None = None,
    metadata: PartMetadata | None = None,
) -> CloakingSummary:
    """The local engine counts every linked record (in the originals' row order, the files
    one after the other); then each file is read again and written with its counts and the
    footer ``metadata(evidence)`` gives.

    A projection is fitted file by file, as on a cluster, so both give the same counts.
    """
    if request.projection is not None:
        fitted = request.projection.fit_files(originals.paths)
        request = replace(request, projection=request.projection.with_fit(fitted))
    evidence = None
    if verdict is None:
        counts = request.counts()
    else:
        read = request.read_judged(verdict)
        result = request.result(read.aligned, overwrite_input=True, closer=True)
        counts, evidence = result.counts, read.evidence.counted(result)
        del read
    footer = None if metadata is None else metadata(evidence)
    columns = originals.schema.names()
    for index, partition in enumerate(originals.partitions):
        part = counts[partition.offset : partition.offset + partition.rows]
        write_counted_part(
            partition.path, partition.rows, part, staging, index, columns=columns, metadata=footer
        )
    return summarize(
        pl.DataFrame({"local_cloaking": counts}),
        min_rate=min_rate,
        evidence=evidence,
        max_own_copies=None if verdict is None else verdict.max_own_copies,
    )
