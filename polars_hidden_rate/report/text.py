"""The report in the terminal (``hidden-rate report``): each section's rows, a line each."""

from __future__ import annotations

from collections.abc import Iterable

from polars_hidden_rate.checks import InvariantError
from polars_hidden_rate.measures.digits import decisive, exact
from polars_hidden_rate.report.section import Row, Section


def section_lines(section: Section) -> list[str]:
    """The lines of ``section``'s rows the terminal shows, labels in a column of its width:
    a metric with the digits that decide its verdict, its target and PASS or FAIL (or why
    it is not computed), a fact as its text."""
    return [_line(row, section.width) for row in section.rows_in("text")]


def text_of(sections: Iterable[Section]) -> str:
    """Every section's lines, in order."""
    return "\n".join(line for section in sections for line in section_lines(section))


def _line(row: Row, width: int) -> str:
    # A column is at least one space wider than what it holds, however long that is.
    label = f"{row.label:<{width - 1}} "
    if row.target is None:
        return f"{label}{row.value}"
    bound = f"target {row.direction} {row.target_text or exact(row.target)}"
    if row.value is None:
        return f"{label}{row.reason} ({bound})"
    if isinstance(row.value, str):
        raise InvariantError("a metric's value is a number (a bug in polars_hidden_rate)")
    shown = decisive(row.value, row.target, 4)  # the digits that decide the verdict
    target = f"{bound:<{15 + len(row.direction)}} "
    if row.passed is None:  # measured, not judged
        return f"{label}{shown:<11} {target}{row.reason}"
    aside = f" ({row.reason})" if row.reason else ""  # what the verdict is read with
    return f"{label}{shown:<11} {target}{'PASS' if row.passed else 'FAIL'}{aside}"
