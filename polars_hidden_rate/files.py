"""Files as users have them, to lazy frames: formats by extension, literal paths, raw csv.

The command line reads through here; nothing else touches paths.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import polars as pl

FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".ipc": "ipc",
    ".arrow": "ipc",
    ".feather": "ipc",
}
"""File formats by extension."""
CSV_INFER_ROWS = 10_000
CSV_SEPARATORS = (",", ";", "\t")
"""The separators a csv header is sniffed for, in order of preference on a tie."""
CSV_NULL_VALUES = ("NA", "")
"""What a csv field holds for a missing value, by default."""
_READ_ERRORS = (pl.exceptions.PolarsError, ValueError, TypeError, OSError)


def file_format(path: Path, role: str) -> str:
    """``parquet``, ``csv`` or ``ipc`` from the extension of ``path``; ValueError otherwise."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(FORMATS)
        msg = f"{role} {str(path)!r} has an unknown extension {path.suffix!r}; use one of {known}"
        raise ValueError(msg)
    return kind


def scan(
    path: str | Path,
    role: str,
    *,
    separator: str | None = None,
    null_values: Sequence[str] = CSV_NULL_VALUES,
) -> pl.LazyFrame:
    """A lazy scan of ``path``, its format chosen by extension, its schema already read.

    A csv file is read with ``separator`` (default: sniffed from its header line,
    see :func:`sniff_separator`) and ``null_values`` as missing values.

    Raises
    ------
    FileNotFoundError
        When ``path`` is not a file.
    ValueError
        When it cannot be read; the message names ``role`` and ``path``.
    """
    path = Path(path)
    kind = file_format(path, role)
    if not path.is_file():
        msg = f"{role} file not found: {path}"
        raise FileNotFoundError(msg)
    try:
        if kind == "csv":
            frame = scan_literal(
                path,
                kind,
                separator=separator or sniff_separator(path),
                null_values=null_values,
            )
        else:
            frame = scan_literal(path, kind)
        frame.collect_schema()  # a damaged or unreadable file fails here, not mid-count
    except _READ_ERRORS as error:
        msg = f"cannot read {role} {str(path)!r}: {one_line(error)}"
        raise ValueError(msg) from error
    return frame


def scan_literal(
    path: Path,
    kind: str,
    *,
    separator: str = ",",
    null_values: Sequence[str] = CSV_NULL_VALUES,
) -> pl.LazyFrame:
    """A lazy scan of the one file ``path``: ``[``, ``*`` or ``?`` in it are no glob pattern."""
    if kind == "parquet":
        return pl.scan_parquet(path, glob=False)
    if kind == "csv":
        return pl.scan_csv(
            path,
            glob=False,
            separator=separator,
            null_values=list(null_values),
            infer_schema_length=CSV_INFER_ROWS,
        )
    return pl.scan_ipc(path, glob=False)


def sniff_separator(path: Path) -> str:
    """The separator of a csv file: whichever of :data:`CSV_SEPARATORS` its header line holds
    most often (a comma when it holds none)."""
    with path.open("rb") as handle:
        header = handle.readline().decode("utf-8", errors="replace")
    counts = [header.count(separator) for separator in CSV_SEPARATORS]
    return CSV_SEPARATORS[counts.index(max(counts))]


def same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: one path once symlinks are resolved, or one inode."""
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)  # hard links
    except OSError:  # one of them does not exist, so they are not one file
        return False


def one_line(error: BaseException) -> str:
    """The first non-empty line of an error's message (or its type's name)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
