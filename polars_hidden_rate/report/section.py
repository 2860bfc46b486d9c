"""What a report shows of one measure, as plain data: a `Section` holds its rows (label, value,
target and verdict), its JSON entry and its figures. The report's three formats (its JSON, its
HTML page, the terminal's text) loop over the sections and lay each out their way; no format
knows a measure, and no measure knows a format.

A row shows in every format unless ``only`` says otherwise: where the terminal and the page
word a row differently (the evidence, what was measured), the section holds one row for each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Direction = Literal[">", ">=", "<="]
"""How a metric's value meets its target: strictly above it, at least it, or at most it."""

Format = Literal["text", "page"]
"""The formats that show rows: the terminal's text and the HTML page (JSON shows the entry)."""


@dataclass(frozen=True)
class Row:
    """One line of a section.

    A row with a ``target`` is a metric against it: ``value`` the figure (None where not
    computed, ``reason`` saying why), ``passed`` its verdict (None without a value, or where
    the value is shown but not judged: ``reason`` says why); ``direction`` how it meets the
    target; the formats show the value with the digits that decide the verdict. A row
    without one states a fact: ``value`` is its text.
    """

    label: str
    value: float | str | None
    target: float | None = None
    passed: bool | None = None
    reason: str = ""
    # The label on the page, where it differs from the terminal's.
    page_label: str = ""
    # The one format that shows the row; None: both.
    only: Format | None = None
    direction: Direction = ">"
    # The target as the formats print it where not `exact`: a measured figure judged
    # against (the holdout's own), in the digits its own line shows.
    target_text: str = ""
    # The page folds a section's rows of one ``fold`` under that summary (a ``<details>`` the
    # reader opens): the settings, long lists; the terminal and the JSON show them whole.
    fold: str = ""
    # A page row that starts a part of its section: its label the part's heading, its value
    # the one sentence under it (an attack within the holdout's section).
    heading: bool = False

    def label_in(self, form: Format) -> str:
        return self.page_label if form == "page" and self.page_label else self.label


@dataclass(frozen=True)
class Histogram:
    """A histogram of per-record values, as `svg` draws it: the ranged bars over ``limits``
    (default from the data), a bar of its own for 0 with ``zero_bar``, whole units when
    ``discrete``, a dashed line at ``target``."""

    values: npt.NDArray[np.float64] | npt.NDArray[np.int64]
    title: str
    x_label: str
    y_label: str
    target: float | None = None
    limits: tuple[float, float] | None = None
    discrete: bool = False
    zero_bar: bool = False


@dataclass(frozen=True)
class Section:
    """What a report shows of one measure.

    Attributes
    ----------
    key
        Its name (unique among a report's sections).
    title
        Its heading on the page, where its rows without a target form a table of their own.
    rows
        Its lines, in order; those with a target join the page's table of metrics.
    entry
        Its keys of the report's JSON object and their values.
    figures
        Its histograms, drawn on the page below the table of metrics.
    width
        The width of the label column in the terminal.
    """

    key: str
    title: str
    rows: tuple[Row, ...] = ()
    entry: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    figures: tuple[Histogram, ...] = ()
    width: int = 30

    def rows_in(self, form: Format) -> tuple[Row, ...]:
        """The rows ``form`` shows."""
        return tuple(row for row in self.rows if row.only in (None, form))
