"""Files as users have them, to lazy frames: formats by extension, literal paths, raw csv.

The command line reads through here; nothing else touches paths. A csv is read as people
write it: its separator sniffed from its header (quoted cells aside), numbers with a decimal
comma or spaces around them read as numbers, text stripped, blank lines at its end no records;
a header-only file and duplicated header names are refused.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl
from polars.exceptions import DuplicateError, NoDataError

from polars_hidden_rate.frames.text_numbers import DECIMAL_COMMA_NUMBER, INTEGER, PLAIN_NUMBER
from polars_hidden_rate.outputs import describe

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
"""The rows a csv column's type is decided from (Polars' inference, then the numbers as text)."""
CSV_SEPARATORS = (",", ";", "\t")
"""The separators a csv header is sniffed for, in order of preference on a tie."""
CSV_NULL_VALUES = ("NA", "")
"""What a csv field holds for a missing value, by default."""
_HEADER_LIMIT = 1 << 20
"""The most characters read for a csv header: a quote left open does not read the whole file."""
_TAIL_CHUNK = 1 << 16
_HASH_CHUNK = 1 << 20
_QUOTED = re.compile(r'"(?:[^"]|"")*"?')
_READ_ERRORS = (pl.exceptions.PolarsError, ValueError, TypeError, OSError)


def file_format(path: Path, role: str) -> str:
    """``parquet``, ``csv`` or ``ipc`` from the extension of ``path``; ValueError otherwise."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        known = ", ".join(FORMATS)
        msg = f"{role} {str(path)!r} has an unknown extension {path.suffix!r}; use one of {known}"
        raise ValueError(msg)
    return kind


def check_regular_file(path: Path, role: str) -> None:
    """``path`` is a regular file (or a link to one).

    Raises
    ------
    FileNotFoundError
        When nothing is there.
    ValueError
        When it is a directory, a FIFO, a socket or a device, saying which.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        msg = f"{role} file not found: {str(path)!r}"
        raise FileNotFoundError(msg) from None
    if stat.S_ISREG(mode):
        return
    msg = f"{role} {str(path)!r} is {describe(mode)}, not a regular file"
    raise ValueError(msg)


def scan(
    path: str | Path,
    role: str,
    *,
    separator: str | None = None,
    null_values: Sequence[str] = CSV_NULL_VALUES,
    decimal_comma: bool = False,
) -> pl.LazyFrame:
    """A lazy scan of ``path``, its format chosen by extension, its schema already read.

    A csv file is read by `scan_csv`, with ``separator`` (default: sniffed from its
    header, see `sniff_separator`), ``null_values`` as missing values, and decimal
    commas throughout with ``decimal_comma``.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        When it is not a regular file, or cannot be read; the message names ``role`` and
        ``path``.
    NoDataError
        When it holds no records.
    DuplicateError
        When a csv header names a column twice.
    """
    path = Path(path)
    kind = file_format(path, role)
    check_regular_file(path, role)
    if kind == "csv":
        return scan_csv(
            path, role, separator=separator, null_values=null_values, decimal_comma=decimal_comma
        )
    with _reading(path, role):
        frame = scan_literal(path, kind)
        frame.collect_schema()  # a damaged or unreadable file fails here, not mid-count
        empty = frame.select(pl.len()).collect().item() == 0  # from the metadata
    if empty:
        _refuse_no_records(path, role)
    return frame


def scan_csv(
    path: Path,
    role: str,
    *,
    separator: str | None = None,
    null_values: Sequence[str] = CSV_NULL_VALUES,
    decimal_comma: bool = False,
) -> pl.LazyFrame:
    """A lazy scan of the csv file ``path``, read as people write one.

    - The separator is ``separator``, or sniffed from the header (`sniff_separator`),
      each file on its own. An explicit one that leaves the file one column, where the
      sniffer finds several, is refused.
    - Header names are stripped of spaces; one given twice is refused (Polars would rename one).
    - Blank lines at the end of the file are no records; a file without records is refused.
    - A column of ISO dates or times (``2020-01-31``, ``2020-01-31T10:00:00``) is read as
      Date or Datetime, the types parquet holds them in, never as text.
    - A text column whose first `CSV_INFER_ROWS` values are all numbers once stripped of
      spaces (``1.5, 2.0``), or all numbers with a decimal comma when the separator is not a
      comma (``-0,801931``), is read as numbers (integers when all are, else Float64);
      ``decimal_comma`` reads every number of the file with a decimal comma. Other text is
      stripped, and a stripped field in ``null_values`` is missing.
    """
    with _reading(path, role):
        header = csv_header(path)
    chosen = separator or sniff_separator(header)
    names = [name.strip() for name in header_cells(header, chosen)]
    if separator is not None and len(names) == 1:
        _refuse_one_column(path, role, header, separator)
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        msg = (
            f"{role} {str(path)!r} names columns {duplicated} more than once in its header; "
            "give each column its own name"
        )
        raise DuplicateError(msg)
    with _reading(path, role):
        frame = scan_literal(
            path,
            "csv",
            separator=chosen,
            null_values=null_values,
            decimal_comma=decimal_comma,
            strip_names=True,
        )
        schema = frame.collect_schema()  # a damaged or unreadable file fails here, not mid-count
        blank = trailing_blank_lines(path, chosen)
        if blank:  # Polars reads each as a record of nulls
            frame = frame.head(frame.select(pl.len()).collect().item() - blank)
        empty = frame.head(1).collect().height == 0
    if empty:
        _refuse_no_records(path, role)
    # The notations of numbers held as text: with a comma separator, "1,5" is quoted and may
    # be thousands, so a decimal comma is only read when asked for.
    if decimal_comma:
        notations = [DECIMAL_COMMA_NUMBER]
    else:
        notations = [PLAIN_NUMBER, *([DECIMAL_COMMA_NUMBER] if chosen != "," else [])]
    with _reading(path, role):
        columns = _text_columns(frame, schema, null_values, notations)
    return frame.with_columns(columns) if columns else frame


def scan_literal(
    path: Path,
    kind: str,
    *,
    separator: str = ",",
    null_values: Sequence[str] = CSV_NULL_VALUES,
    decimal_comma: bool = False,
    strip_names: bool = False,
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
            decimal_comma=decimal_comma,
            with_column_names=_stripped_names if strip_names else None,
            # ISO dates and times as parquet holds them (Date, Datetime): one dataset, one
            # verdict, whatever the format.
            try_parse_dates=True,
        )
    return pl.scan_ipc(path, glob=False)


def csv_header(path: Path) -> str:
    """The header record of a csv file: its first line, and the next ones while a quoted cell
    is open; without the line ending."""
    read: list[str] = []
    size = quotes = 0
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        for line in handle:
            read.append(line)
            size += len(line)
            quotes += line.count('"')
            if quotes % 2 == 0 or size > _HEADER_LIMIT:
                break
    return "".join(read).rstrip("\r\n")


def sniff_separator(header: str) -> str:
    """The separator of a csv file: whichever of `CSV_SEPARATORS` its ``header`` holds
    most often outside quoted cells (a comma when it holds none)."""
    bare = _QUOTED.sub("", header)
    counts = [bare.count(separator) for separator in CSV_SEPARATORS]
    return CSV_SEPARATORS[counts.index(max(counts))]


def header_cells(header: str, separator: str) -> list[str]:
    """The cells of a csv ``header`` record, as a csv reader splits them."""
    return next(csv.reader(io.StringIO(header, newline=""), delimiter=separator), [""])


def trailing_blank_lines(path: Path, separator: str) -> int:
    """How many blank lines (nothing but spaces and line endings) end the file ``path``."""
    blank = b" \r\n" if separator == "\t" else b" \t\r\n"
    with path.open("rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        tail = b""
        while position > 0:
            step = min(_TAIL_CHUNK, position)
            position -= step
            handle.seek(position)
            tail = handle.read(step) + tail
            content = len(tail.rstrip(blank))
            if content:
                tail = tail[content:]
                break
    newlines = tail.count(b"\n")
    if newlines == 0:  # the spaces end the last record's line
        return 0
    # The first line ending ends the last record; a last line without one is a line too.
    return newlines - 1 + (not tail.endswith(b"\n"))


def sha256(path: Path) -> str:
    """The sha256 of a file's bytes, every one of them, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def same_input(path: Path, other: Path) -> str | None:
    """How ``path`` is the input ``other``: ``"the same file"`` (one path once links are
    resolved, or one inode: a hard link), ``"the same bytes"`` (a copy: equal sizes and
    sha256); None when they differ."""
    if path.resolve() == other.resolve():
        return "the same file"
    try:
        first, second = os.stat(path), os.stat(other)
    except OSError:
        return None
    if (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino):
        return "the same file"
    regular = stat.S_ISREG(first.st_mode) and stat.S_ISREG(second.st_mode)
    if regular and first.st_size == second.st_size and sha256(path) == sha256(other):
        return "the same bytes"
    return None


def refuse_same_inputs(inputs: dict[str, Path], role: str) -> None:
    """Refuse the input ``role`` of ``inputs`` when it is another of them (`same_input`):
    a holdout that is the originals file, or the avatars file, measures nothing.

    Raises
    ------
    ValueError
        Naming both roles and how they are one.
    """
    path = inputs[role]
    for other, given in inputs.items():
        if other == role:
            continue
        how = same_input(path, given)
        if how is not None:
            msg = (
                f"{role} {str(path)!r} is {how} as {other} {str(given)!r}: it must be records "
                "the generator never saw, in a file of their own"
            )
            raise ValueError(msg)


def one_line(error: BaseException) -> str:
    """The first non-empty line of an error's message (or its type's name)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


@contextlib.contextmanager
def _reading(path: Path, role: str) -> Iterator[None]:
    """Errors of reading ``path`` as one ValueError naming it."""
    try:
        yield
    except _READ_ERRORS as error:
        msg = f"cannot read {role} {str(path)!r}: {one_line(error)}"
        raise ValueError(msg) from error


def _stripped_names(names: list[str]) -> list[str]:
    return [name.strip() for name in names]


def _refuse_no_records(path: Path, role: str) -> None:
    msg = f"{role} {str(path)!r} holds no records: there is nothing to measure"
    raise NoDataError(msg)


def _refuse_one_column(path: Path, role: str, header: str, separator: str) -> None:
    """An explicit ``separator`` leaves ``path`` one column: refused where the sniffer finds
    several."""
    sniffed = sniff_separator(header)
    if sniffed == separator or len(header_cells(header, sniffed)) < 2:
        return  # a file of one column
    msg = (
        f"{role} {str(path)!r} is one column with --separator {separator!r}; its header is "
        f"separated by {sniffed!r}: give --separator {sniffed!r}, or leave it out to have each "
        "file's separator sniffed"
    )
    raise ValueError(msg)


def _text_columns(
    frame: pl.LazyFrame, schema: pl.Schema, null_values: Sequence[str], notations: Sequence[str]
) -> list[pl.Expr]:
    """Each text column of a csv, stripped, or as numbers when its first values all are, in
    one of ``notations`` (`text_numbers` patterns).

    Decided from the first `CSV_INFER_ROWS` rows, as Polars infers a type: a later
    value that is no number fails the read, naming it."""
    text = [name for name, dtype in schema.items() if dtype == pl.String]
    if not text:
        return []
    missing = [*null_values, ""]
    stripped = {}
    for name in text:
        value = pl.col(name).str.strip_chars()
        stripped[name] = pl.when(value.is_in(missing)).then(None).otherwise(value).alias(name)
    sample = frame.select(stripped.values()).head(CSV_INFER_ROWS).collect()
    return [
        _as_numbers(stripped[name], sample.get_column(name).drop_nulls(), notations)
        for name in text
    ]


def _as_numbers(column: pl.Expr, values: pl.Series, notations: Sequence[str]) -> pl.Expr:
    """``column`` as integers when its sample ``values`` are all integers (Int64, or Int128
    beyond it, as Polars infers them), as Float64 when all are numbers in one of ``notations``;
    else as it is."""
    if values.is_empty():
        return column
    if values.str.contains(INTEGER).all():
        for dtype in (pl.Int64, pl.Int128):
            if not values.cast(dtype, strict=False).has_nulls():
                return column.cast(dtype)
        return column  # no integer type holds them: text, as Polars would not read them
    for notation in notations:
        if values.str.contains(notation).all():
            if notation == DECIMAL_COMMA_NUMBER:
                column = column.str.replace(",", ".", literal=True)
            return column.cast(pl.Float64)
    return column
