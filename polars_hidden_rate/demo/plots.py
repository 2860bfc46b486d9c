"""PNG plots of local cloaking, with matplotlib (the optional ``plot`` extra).

Install it with ``pip install 'polars-hidden-rate[plot]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _figure() -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        msg = "plots need matplotlib: pip install 'polars-hidden-rate[plot]'"
        raise ModuleNotFoundError(msg) from error
    return Figure(figsize=(7, 4.5), layout="constrained")


def cloaking_histogram(per_record: pl.DataFrame, path: str | Path) -> Path:
    """Write a histogram of local cloaking as a PNG.

    Parameters
    ----------
    per_record
        A frame with a ``local_cloaking`` column, such as the output of
        [`polars_hidden_rate.local_cloaking`][polars_hidden_rate.local_cloaking]. With a ``k``
        column too (the output of
        [`sweep_k`][polars_hidden_rate.demo.cohort.sweep_k]), one outline per ``k``.
    path
        The PNG file to write.

    Returns
    -------
    Path
        ``path``.
    """
    figure = _figure()
    axes = figure.add_subplot()
    groups = (
        [(f"k = {k}", group) for (k,), group in per_record.group_by("k", maintain_order=True)]
        if "k" in per_record.columns
        else [("", per_record)]
    )
    largest = int(per_record.get_column("local_cloaking").to_numpy().max(initial=0))
    # Integer bin edges: one bin per value up to 10 (0 alone: the records not hidden), then
    # widths growing geometrically; heights are records per value, so wide bins do not spike.
    edges = np.unique(np.geomspace(1, largest + 2, 60).round().astype(np.int64))
    edges = np.unique(np.concatenate([np.arange(min(11, largest + 2)), edges]))
    for label, group in groups:
        counts, _ = np.histogram(group.get_column("local_cloaking").to_numpy(), bins=edges)
        axes.stairs(counts / np.diff(edges), edges, linewidth=1.5, label=label or None)
    axes.set_xscale("symlog", linthresh=1)
    axes.set_xlabel("local cloaking $c_i$ (0: own avatar strictly closest, not hidden)")
    axes.set_ylabel("records per value of $c_i$")
    axes.set_title("Local cloaking")
    if len(groups) > 1:
        axes.legend()
    return _save(figure, path)


def k_curve(table: pl.DataFrame, path: str | Path) -> Path:
    """Write the hidden rate and median local cloaking against ``k`` as a PNG.

    Parameters
    ----------
    table
        Columns ``k``, ``hidden_rate`` and ``local_cloaking_median``, as
        [`polars_hidden_rate.demo.cohort.k_table`][polars_hidden_rate.demo.cohort.k_table] returns.
    path
        The PNG file to write.

    Returns
    -------
    Path
        ``path``.
    """
    figure = _figure()
    rate_axes = figure.add_subplot()
    ks = table.get_column("k").to_numpy()
    rate_axes.plot(ks, table.get_column("hidden_rate").to_numpy(), "o-", color="tab:blue")
    rate_axes.set_xscale("log")
    rate_axes.minorticks_off()
    rate_axes.set_xticks(ks, [str(k) for k in ks])
    rate_axes.set_xlabel("k (neighbours per avatar)")
    rate_axes.set_ylabel("hidden rate (%)", color="tab:blue")
    median_axes = rate_axes.twinx()
    median = table.get_column("local_cloaking_median").to_numpy()
    median_axes.plot(ks, median, "s--", color="tab:orange")
    median_axes.set_ylabel("median local cloaking", color="tab:orange")
    rate_axes.set_title("Hidden rate and local cloaking against k")
    return _save(figure, path)


def _save(figure: Figure, path: str | Path) -> Path:
    target = Path(path)
    figure.savefig(target, format="png", dpi=120)
    return target
