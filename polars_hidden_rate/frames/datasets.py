"""Parquet datasets as this package reads them: the files of one side, in order, with their
row counts and their common schema, from the files' metadata alone."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from polars.exceptions import SchemaError

from polars_hidden_rate.checks import known
from polars_hidden_rate.frames.files import FORMATS, one_line

Source = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
"""A parquet dataset: one file, a directory of ``*.parquet`` files, or a list of files."""

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
        When a file's columns or types differ from the first file's, naming both files and
        the column. The order of the columns may differ: every read takes them by name,
        and the schema is the first file's.

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
        else:
            _check_same_columns(role, file, pl.Schema(found), files[0], schema)
        partitions.append(Partition(file, rows, offset))
        offset += rows
    schema = known(schema, "the schema of a dataset's first file")
    return Dataset(role, tuple(partitions), schema)


def _check_same_columns(
    role: str, file: Path, found: pl.Schema, first: Path, schema: pl.Schema
) -> None:
    """``found`` (of ``file``) has the columns and types of ``schema`` (of ``first``), in
    any order: a SchemaError naming the first column at fault otherwise."""
    where = f"{role} file {str(file)!r}"
    missing = [name for name in schema if name not in found]
    extra = [name for name in found if name not in schema]
    if missing:
        problem = f"{where} has no column {missing[0]!r}, which {str(first)!r} has"
    elif extra:
        problem = f"{where} has a column {extra[0]!r} that {str(first)!r} has not"
    else:
        differ = next((name for name in schema if found[name] != schema[name]), None)
        if differ is None:
            return
        problem = (
            f"{where} has column {differ!r} as {found[differ]}, but {str(first)!r} has it as "
            f"{schema[differ]}"
        )
    msg = f"{problem}; every file of a dataset needs the same columns and types (in any order)"
    raise SchemaError(msg)
