"""Local cloaking from parquet datasets to a parquet dataset, on one machine or a Dask cluster.

:func:`local_cloaking_to_parquet` reads the originals and the avatars as parquet files
(a file, a directory of files, or a list), and writes one ``part-NNNNN.parquet`` per
originals file into an output directory: the originals' columns plus ``local_cloaking``
and ``hidden``. It returns the gate's :class:`~polars_hidden_rate.gate.CloakingSummary`
without bringing the records back.

Without ``cluster``, the local engine counts every linked coordinate (as
:func:`polars_hidden_rate.local_cloaking` does), then each originals file is read again,
given its counts and written as its own part. With ``cluster``, the workers do all of
that (:mod:`polars_hidden_rate.cluster.dataset`) and the driver only plans.

The parts are written into a private temporary directory beside ``output``, renamed to
``output`` when every part is complete: nothing half-written is ever visible, a failure
leaves nothing behind, and an existing ``output`` is replaced only with ``overwrite=True``,
only after success, keeping its permissions. The rename is exclusive
(:func:`polars_hidden_rate.outputs.publish`): a run never replaces an output that another
created or replaced while it counted.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Unpack

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, NoDataError, SchemaError

from polars_hidden_rate._types import CountArray
from polars_hidden_rate.api import CountOptions, CountPlan, plan
from polars_hidden_rate.files import FORMATS, one_line
from polars_hidden_rate.frames import check_output_free
from polars_hidden_rate.gate import CloakingSummary, check_min_rate, summarize
from polars_hidden_rate.outputs import (
    Access,
    Identity,
    access_of,
    grant,
    identity,
    narrowest,
    ordinary_directory_access,
    ordinary_file_access,
    publish,
)
from polars_hidden_rate.outputs import check_output as check_output_path
from polars_hidden_rate.verdict import Inspector, Verdict, check_row_order_link, copy_features

Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""A parquet dataset: one file, a directory of ``*.parquet`` files, or a list of files."""

PART_PREFIX = "part-"
_PARQUET = tuple(suffix for suffix, kind in FORMATS.items() if kind == "parquet")


@dataclass(frozen=True)
class Partition:
    """One parquet file of a dataset: its rows are global rows ``offset:offset + rows``."""

    path: Path
    rows: int
    offset: int


@dataclass(frozen=True)
class Dataset:
    """The files of one side, in order, with their row counts and their common schema."""

    role: str
    partitions: tuple[Partition, ...]
    schema: pl.Schema

    @property
    def rows(self) -> int:
        return sum(partition.rows for partition in self.partitions)

    @property
    def paths(self) -> list[Path]:
        return [partition.path for partition in self.partitions]

    def scan(self) -> pl.LazyFrame:
        """Every file, in order, as one lazy frame (paths taken literally, never as globs)."""
        return pl.scan_parquet(self.paths, glob=False)


def open_dataset(source: Source, role: str) -> Dataset:
    """The parquet files of ``source``, their row counts and schema, from their metadata only.

    A directory gives its ``*.parquet`` (and ``*.pq``) files, sorted by name; names starting
    with ``.`` or ``_`` are skipped, as other writers' markers and temporary files are.

    Raises
    ------
    FileNotFoundError
        When a file or directory is missing, or a directory holds no parquet file.
    ValueError
        When a file is not parquet (by extension) or cannot be read, naming it.
    SchemaError
        When two files have different schemas, naming both.

    Examples
    --------
    >>> import tempfile, polars as pl
    >>> folder = Path(tempfile.mkdtemp())
    >>> pl.DataFrame({"x": [1.0, 2.0]}).write_parquet(folder / "a.parquet")
    >>> pl.DataFrame({"x": [3.0]}).write_parquet(folder / "b.parquet")
    >>> [(p.path.name, p.rows, p.offset) for p in open_dataset(folder, "originals").partitions]
    [('a.parquet', 2, 0), ('b.parquet', 1, 2)]
    """
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if path.is_dir():
            files = sorted(
                entry
                for entry in path.iterdir()
                if entry.suffix.lower() in _PARQUET
                and not entry.name.startswith((".", "_"))
                and entry.is_file()
            )
            if not files:
                msg = f"{role} directory {str(path)!r} holds no parquet file"
                raise FileNotFoundError(msg)
        else:
            files = [path]
    elif isinstance(source, Sequence) and source:
        files = [Path(item) for item in source]
    else:
        msg = f"{role} must be a parquet file, a directory or a list of files, got {source!r}"
        raise TypeError(msg)
    partitions, offset, schema = [], 0, None
    for file in files:
        if file.suffix.lower() not in _PARQUET:
            msg = f"{role} {str(file)!r} is not a parquet file (expected {', '.join(_PARQUET)})"
            raise ValueError(msg)
        if not file.is_file():
            msg = f"{role} file not found: {file}"
            raise FileNotFoundError(msg)
        try:
            found = pl.read_parquet_schema(file)
            rows = int(pl.scan_parquet(file, glob=False).select(pl.len()).collect().item())
        except (pl.exceptions.PolarsError, OSError, ValueError) as error:
            msg = f"cannot read {role} {str(file)!r}: {one_line(error)}"
            raise ValueError(msg) from error
        if schema is None:
            schema = pl.Schema(found)
        elif pl.Schema(found) != schema:
            msg = (
                f"{role} file {str(file)!r} has schema {dict(found)}, but {str(files[0])!r} has "
                f"{dict(schema)}; every file of a dataset needs the same columns and types"
            )
            raise SchemaError(msg)
        partitions.append(Partition(file, rows, offset))
        offset += rows
    assert schema is not None  # at least one file
    return Dataset(role, tuple(partitions), schema)


def local_cloaking_to_parquet(
    originals: Source,
    avatars: Source,
    output: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    min_rate: float | None = None,
    **options: Unpack[CountOptions],
) -> CloakingSummary:
    """Write each original's local cloaking into a parquet dataset; return the gate's summary.

    Parameters
    ----------
    originals, avatars
        Parquet files: one file, a directory of ``*.parquet`` files (sorted by name), or
        a list of files. With ``cluster``, every worker must be able to read them.
    output
        A directory, written as ``part-00000.parquet``, ``part-00001.parquet``, ...: one
        file per originals file, in their order, holding that file's rows in their order,
        every column, plus ``local_cloaking`` and ``hidden``. With ``cluster``, every
        worker must be able to write beside it.
    overwrite
        Replace an existing ``output`` directory (only once the new one is complete).
    min_rate
        The minimum hidden rate the summary's ``passed`` compares against; None for no gate.
    **options
        The keyword options of :func:`polars_hidden_rate.local_cloaking`
        (:class:`~polars_hidden_rate.CountOptions`). ``cluster`` runs every stage on the
        workers (:mod:`polars_hidden_rate.cluster.dataset`); without it, the local engine.

    Returns
    -------
    CloakingSummary
        What :func:`polars_hidden_rate.gate.summarize` gives on the written records.

    Raises
    ------
    FileExistsError
        When ``output`` exists and ``overwrite`` is False, or is not a directory.
    ValueError
        When ``output`` is, or holds, an input file; and on bad options.
    polars.exceptions.PolarsError
        On bad data, as :func:`polars_hidden_rate.local_cloaking` raises it (missing or
        duplicated keys with an example key, missing coordinates, ...). Nothing is
        written then.

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
    job = plan_dataset(
        originals,
        avatars,
        output,
        overwrite=overwrite,
        min_rate=min_rate,
        caller="local_cloaking_to_parquet",
        **options,
    )
    with staged_directory(job.output, job.replaces) as staging:
        return job.write(staging)


@dataclass(frozen=True)
class DatasetJob:
    """A checked :func:`local_cloaking_to_parquet` request: nothing is read until it runs."""

    request: CountPlan
    originals: Dataset
    avatars: Dataset
    output: Path
    min_rate: float | None
    verdict: Verdict | None = None
    replaces: Identity | None = None
    """The directory found at ``output`` when planned: the only one the job may replace."""

    def write(self, staging: Path) -> CloakingSummary:
        """Count, and write every part into ``staging`` (see :func:`staged_directory`).

        Locally, the verdict's evidence (link test, own copies) comes from the read the
        counts come from; a cluster run does not gather it (docs/guarantees.md)."""
        if self.request.cluster is not None:
            from polars_hidden_rate.cluster import dataset as cluster_data

            return cluster_data.count_and_write(
                self.request,
                self.originals,
                self.avatars,
                staging,
                self.min_rate,
                verdict=self.verdict,
            )
        return _count_and_write_locally(
            self.request, self.originals, staging, self.min_rate, self.verdict
        )


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
    """Check the request of :func:`local_cloaking_to_parquet` from metadata and schemas only:
    the options, the files, and an ``output`` that may be written without losing an input."""
    threshold = check_min_rate(min_rate)
    if not isinstance(overwrite, bool):
        msg = f"`overwrite` must be True or False, got {overwrite!r}"
        raise TypeError(msg)
    left, right = open_dataset(originals, "originals"), open_dataset(avatars, "avatars")
    target = Path(output)
    replaces = check_output(
        target, {left.role: left.paths, right.role: right.paths}, overwrite=overwrite
    )
    request = plan(left.scan(), right.scan(), options, caller=caller)
    check_output_free(left.schema)
    if verdict is not None:
        check_row_order_link(request, verdict)
    return DatasetJob(request, left, right, target, threshold, verdict, replaces)


def _count_and_write_locally(
    request: CountPlan,
    originals: Dataset,
    staging: Path,
    min_rate: float | None,
    verdict: Verdict | None = None,
) -> CloakingSummary:
    """The local engine counts every linked record (in the originals' row order, the files
    one after the other); then each file is read again and written with its counts.

    A projection is fitted file by file, as on a cluster, so both give the same counts.
    """
    if request.projection is not None:
        fitted = request.projection.fit_files(originals.paths)
        request = replace(request, projection=request.projection.with_fit(fitted))
    inspector = None if verdict is None else Inspector(request, verdict, copy_features(request))
    if inspector is None:
        counts = request.counts()
    else:
        aligned = inspector.read()
        closer = np.zeros(len(aligned.originals), dtype=bool)
        counts = request.counts(aligned, consume=True, closer=closer)
        inspector.after(counts, closer)
        del aligned
    for index, partition in enumerate(originals.partitions):
        frame = pl.read_parquet(partition.path, glob=False)
        if frame.height != partition.rows:
            msg = f"originals file {str(partition.path)!r} changed while it was being counted"
            raise ComputeError(msg)
        part = counts[partition.offset : partition.offset + partition.rows]
        write_part(with_counts(frame, part), staging, index)
    return summarize(
        pl.DataFrame({"local_cloaking": counts}),
        min_rate=min_rate,
        evidence=None if inspector is None else inspector.evidence(),
        max_own_copies=None if verdict is None else verdict.max_own_copies,
    )


def with_counts(frame: pl.DataFrame, counts: CountArray) -> pl.DataFrame:
    """``frame`` with ``local_cloaking`` (the index type, as the API gives it) and ``hidden``."""
    cloaking = pl.Series("local_cloaking", counts, dtype=pl.get_index_type())
    return frame.with_columns(cloaking, hidden=cloaking > 0)


def part_name(index: int) -> str:
    """The output file of originals partition ``index``."""
    return f"{PART_PREFIX}{index:05d}.parquet"


def write_part(frame: pl.DataFrame, directory: Path, index: int) -> Path:
    """Write ``frame`` as part ``index`` of ``directory``: into a temporary file, then renamed,
    so a writer killed mid-file leaves no part behind, and a re-run replaces it whole."""
    path = directory / part_name(index)
    temporary = directory / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        frame.write_parquet(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def check_output(
    output: Path, inputs: Mapping[str, Sequence[Path]], *, overwrite: bool
) -> Identity | None:
    """``output`` may be created (or replaced, with ``overwrite``) without losing an input
    (:func:`polars_hidden_rate.outputs.check_output`, the rule of every output); return the
    identity of the directory to replace (None when there is none).

    Raises
    ------
    FileNotFoundError
        When the folder that would hold ``output`` does not exist.
    FileExistsError
        When ``output`` exists and is not a directory (saying what it is), or exists and
        ``overwrite`` is False.
    ValueError
        When ``output`` is an input file or a directory holding one.
    """
    found = check_output_path(output, inputs, kind="directory", name="output")
    if found is not None and not overwrite:
        msg = f"output {str(output)!r} exists; pass overwrite=True to replace it"
        raise FileExistsError(msg)
    return found


@contextlib.contextmanager
def staged_directory(output: Path, replaces: Identity | None = None) -> Iterator[Path]:
    """A private temporary directory beside ``output``, renamed to ``output`` on success.

    It is created readable by its owner only (0o700: no partial record is readable by
    others), and stays so until every part is complete. Then any file not a part (a
    writer's leftover) is removed, and the directory and its parts get their permissions:

    - replacing the directory ``replaces``, its mode and group, and each part those of the
      replaced part of the same name (a part with none, the narrowest of the replaced files:
      :func:`~polars_hidden_rate.outputs.narrowest`);
    - new, the mode an ordinary ``mkdir`` and ``open`` give here (umask, default ACLs).

    It then takes the name ``output`` (:func:`~polars_hidden_rate.outputs.publish`): it
    creates ``output``, or replaces ``replaces``, and fails with FileExistsError when someone
    created or replaced ``output`` meanwhile. On any error, or a stop, it is removed and
    ``output`` is left as it was.
    """
    staging = output.parent / f".{output.name}.tmp-{uuid.uuid4().hex}"
    os.mkdir(staging, 0o700)
    own = identity(staging)
    try:
        # Whatever the umask, the owner may write the parts; a set-group-ID bit inherited from
        # the folder stays, so the parts get the group an ordinary mkdir would give them.
        os.chmod(staging, 0o700 | stat.S_IMODE(os.stat(staging).st_mode) & stat.S_ISGID)
        folder, other = ordinary_directory_access(staging), ordinary_file_access(staging)
        yield staging
        for entry in staging.iterdir():
            if not (entry.name.startswith(PART_PREFIX) and entry.suffix == ".parquet"):
                entry.unlink()
        parts: dict[str, Access] = {}
        if replaces is not None and identity(output) == replaces:
            folder = access_of(output)
            parts = {
                entry.name: access_of(entry)
                for entry in output.iterdir()
                if entry.is_file() and not entry.is_symlink()
            }
            other = narrowest(list(parts.values()), other)
        for entry in staging.iterdir():
            grant(entry, parts.get(entry.name, other))
        grant(staging, folder)  # the parts first: the directory opens only once they are set
        publish(staging, output, replaces, name="output")
    except BaseException:
        if own is not None and own.same_entry(identity(staging)):
            shutil.rmtree(staging, ignore_errors=True)
        raise


def summary_from_order_statistics(
    n: int,
    not_hidden: int,
    order_statistic: Callable[[int], int],
    *,
    min_rate: float | None,
) -> CloakingSummary:
    """The summary of ``n`` counts, ``not_hidden`` of them zero, from their ``k``-th smallest.

    The quartiles interpolate linearly between the order statistics at ``floor`` and
    ``ceil`` of ``q (n - 1)``, as Polars' ``quantile(q, "linear")`` and ``median`` do, so
    the summary is :func:`~polars_hidden_rate.gate.summarize`'s, value for value, without
    the counts in one place.

    Examples
    --------
    >>> counts = sorted([0, 3, 5, 10])
    >>> summary = summary_from_order_statistics(4, 1, counts.__getitem__, min_rate=80)
    >>> summary.hidden_rate, summary.local_cloaking_median, summary.passed
    (75.0, 4.0, False)
    """
    if n == 0:
        msg = "there are no records to summarise"
        raise NoDataError(msg)

    def quantile(q: float) -> float:
        position = q * (n - 1)
        low = math.floor(position)
        below = float(order_statistic(low))
        above = float(order_statistic(min(low + 1, n - 1)))
        return below + (above - below) * (position - low)

    rate = 100.0 * (n - not_hidden) / n
    return CloakingSummary(
        n=n,
        hidden_rate=rate,
        not_hidden=not_hidden,
        local_cloaking_median=quantile(0.5),
        local_cloaking_q1=quantile(0.25),
        local_cloaking_q3=quantile(0.75),
        min_rate=min_rate,
        passed=min_rate is None or rate >= min_rate,
    )


def histogram(counts: CountArray, bins: int) -> CountArray:
    """How many counts equal ``0, 1, ..., bins - 1``, then how many are ``bins`` or more."""
    return np.bincount(np.minimum(counts, bins), minlength=bins + 1).astype(np.int64)
