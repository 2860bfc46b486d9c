"""The plots of docs/performance.md, drawn from the committed results in benchmarks/results/.

    python -m benchmarks.plots [--results DIR] [--out DIR] [--format svg|png]

Reads every ``*.json`` the harness wrote and draws, log-log against the number of records:

- ``count_time.svg``: seconds from arrays to counts, this project and its peers, one panel per
  data profile (avatar-like, full-rank high-dimensional, dense discrete), from the results of
  ``bench_counts``;
- ``scale_time_memory.svg``: seconds and peak memory of the whole run from parquet to parquet
  (the counts, the gate, the report, and numpy + cKDTree), from the results of
  ``bench_parquet`` on avatars made from exact neighbours.

Each point is the newest measurement of its engine at that size. Our engine's points come only
from runs since ``ENGINE_SINCE`` (older runs measured an earlier, slower engine); a peer's come
from any run, since its code does not change with ours. Matplotlib only (the ``plot`` extra).
Every harness script that writes into benchmarks/results/ calls it after its run
(``common.write_results``), so the plots follow the results.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"

ENGINE_SINCE = "2026-12-01"
"""The first day whose runs measured the current engine (ISO date, compared as text)."""

# (label, colour, marker) of each engine, in the order of the legends.
STYLE: dict[str, tuple[str, str, str]] = {
    "ours": ("polars-hidden-rate", "#d62728", "o"),
    "gate": ("polars-hidden-rate, check (the gate)", "#ff7f0e", "s"),
    "report": ("polars-hidden-rate, report", "#9467bd", "D"),
    "ckdtree": ("scipy cKDTree", "#1f77b4", "^"),
    "sklearn": ("scikit-learn KDTree", "#2ca02c", "v"),
    "polars-ds": ("polars-ds", "#8c564b", "P"),
    "faiss-flat": ("FAISS flat (float32, not exact)", "#7f7f7f", "x"),
}
# Strategy runs time ours under several names: auto is what a user gets.
ALIASES = {"ours-auto": "ours"}
OURS = {"ours", "gate", "report"}

# (profile, d, title) of each panel of count_time.
PANELS = (
    ("gaussian", 5, "avatar-like, d = 5"),
    ("isotropic", 32, "full rank, d = 32"),
    ("discrete", 5, "dense discrete, d = 5"),
)


# Matplotlib's SVG metadata left out: a date, and namespaces of other hosts.
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}


@dataclass(frozen=True)
class Point:
    engine: str
    n: int
    value: float
    date: str


def load(results: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every result file of ``results``, as ``(stem, payload)``, in name order."""
    return [(path.stem, json.loads(path.read_text())) for path in sorted(results.glob("*.json"))]


def _current(engine: str, date: str) -> bool:
    return engine not in OURS or date[:10] >= ENGINE_SINCE


def newest(points: Iterable[Point]) -> dict[str, list[tuple[int, float]]]:
    """For each engine, its newest value at each size, sorted by size."""
    kept: dict[tuple[str, int], Point] = {}
    for point in points:
        if not _current(point.engine, point.date):
            continue
        key = (point.engine, point.n)
        if key not in kept or point.date > kept[key].date:
            kept[key] = point
    series: dict[str, list[tuple[int, float]]] = {}
    for (engine, n), point in sorted(kept.items()):
        series.setdefault(engine, []).append((n, point.value))
    return series


def count_points(
    payloads: Sequence[tuple[str, dict[str, Any]]], profile: str, d: int
) -> list[Point]:
    """The count's seconds of every engine of ``bench_counts`` runs on ``profile`` at ``d``."""
    points = []
    for _, payload in payloads:
        options = payload.get("options")
        if not isinstance(options, dict) or options.get("profile", "gaussian") != profile:
            continue
        for cell in payload.get("cells", []):
            if cell.get("d") != d or not isinstance(cell.get("engines"), dict):
                continue
            for name, entry in cell["engines"].items():
                engine = ALIASES.get(name, name)
                if engine in STYLE and entry.get("status") == "ok":
                    points.append(Point(engine, cell["n"], entry["seconds"], payload["date"]))
    return points


def parquet_points(payloads: Sequence[tuple[str, dict[str, Any]]], field: str) -> list[Point]:
    """``field`` (``seconds`` or ``peak_rss_mib``) of every ``bench_parquet`` run on avatars
    made from exact neighbours (``--neighbours tree``, or inputs reused from such a run)."""
    points = []
    for stem, payload in payloads:
        command = payload.get("command", "")
        if "bench_parquet" not in command or not stem.startswith(("parquet_tree", "parquet_1e8")):
            continue
        for name, run in payload.get("runs", {}).items():
            if name in STYLE and run.get("status") == "ok":
                points.append(Point(name, payload["n"], run[field], payload["date"]))
    return points


# The scale plot's runs are whole commands, named as such.
SCALE_LABELS = {
    "ours": "polars-hidden-rate: local_cloaking to parquet",
    "gate": "polars-hidden-rate: check --min-rate",
    "report": "polars-hidden-rate: report",
    "ckdtree": "numpy + scipy cKDTree",
}


def _axes(
    axes: Any,
    series: dict[str, list[tuple[int, float]]],
    ylabel: str,
    labels: dict[str, str] | None = None,
) -> None:
    for engine in STYLE:
        if engine not in series:
            continue
        label, colour, marker = STYLE[engine]
        label = (labels or {}).get(engine, label)
        xs, ys = zip(*series[engine], strict=True)
        style = "--" if engine == "faiss-flat" else "-"
        axes.plot(xs, ys, style, color=colour, marker=marker, label=label, lw=1.6, ms=5)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("records n (originals, and as many avatars)")
    axes.set_ylabel(ylabel)
    axes.grid(True, which="major", color="#dddddd", lw=0.6)
    axes.grid(True, which="minor", color="#f0f0f0", lw=0.4)
    axes.set_axisbelow(True)


def _setup() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "svg.fonttype": "none",  # text stays text: small files, crisp on the page
            "svg.hashsalt": "polars-hidden-rate",  # the same ids on every run
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return plt


def _save(plt: Any, figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # No metadata (no date): the same results give the same bytes.
    metadata = SVG_METADATA if path.suffix == ".svg" else {"Software": None}
    figure.savefig(path, bbox_inches="tight", metadata=metadata, dpi=150)
    plt.close(figure)
    return path


def count_time(payloads: Sequence[tuple[str, dict[str, Any]]], path: Path) -> Path:
    plt = _setup()
    figure, panels = plt.subplots(1, len(PANELS), figsize=(11, 3.8), layout="constrained")
    for axes, (profile, d, title) in zip(panels, PANELS, strict=True):
        _axes(axes, newest(count_points(payloads, profile, d)), "seconds, arrays to counts")
        axes.set_title(title)
    handles: dict[str, Any] = {}
    for axes in panels:
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    figure.legend(
        handles.values(), handles.keys(), loc="outside lower center", ncol=3, frameon=False
    )
    figure.suptitle("The count: time against n (2 threads, lower is faster)")
    return _save(plt, figure, path)


def scale_time_memory(payloads: Sequence[tuple[str, dict[str, Any]]], path: Path) -> Path:
    plt = _setup()
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(10, 3.9), layout="constrained")
    seconds = newest(parquet_points(payloads, "seconds"))
    _axes(time_axes, seconds, "seconds, parquet to parquet", SCALE_LABELS)
    time_axes.set_title("Time")
    memory = newest(parquet_points(payloads, "peak_rss_mib"))
    gib = {engine: [(n, mib / 1024) for n, mib in values] for engine, values in memory.items()}
    _axes(memory_axes, gib, "peak memory (RSS), GiB", SCALE_LABELS)
    memory_axes.set_title("Memory")
    memory_axes.axhline(16, color="#999999", lw=0.8, ls=":")
    memory_axes.annotate("16 GiB", (1e5, 16), xytext=(0, 3), textcoords="offset points", size=8)
    handles, labels = time_axes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False)
    figure.suptitle("A whole file, d = 5 (2 threads, one process)")
    return _save(plt, figure, path)


def write(results: Path = RESULTS, out: Path = IMAGES, suffix: str = "svg") -> list[Path]:
    """Draw every plot from ``results`` into ``out``; return their paths."""
    payloads = load(results)
    return [
        count_time(payloads, out / f"count_time.{suffix}"),
        scale_time_memory(payloads, out / f"scale_time_memory.{suffix}"),
    ]


def refresh(results: Path) -> None:
    """After a run into benchmarks/results/: draw the plots again, or say why not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("plots not drawn: install the `plot` extra (matplotlib)", file=sys.stderr)
        return
    for path in write(results):
        print(f"wrote {path}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=IMAGES)
    parser.add_argument("--format", choices=["svg", "png"], default="svg")
    args = parser.parse_args(argv)
    for path in write(args.results, args.out, args.format):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
