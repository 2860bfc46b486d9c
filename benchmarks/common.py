"""Helpers shared by the benchmark scripts: the machine, sizes, exact counts, output files."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from polars_hidden_rate.provenance import versions

Float64Array = npt.NDArray[np.float64]
CountArray = npt.NDArray[np.int64]

RESULTS = Path(__file__).resolve().parent / "results"
# Distances one brute-force block holds: bounds its memory to a few tens of MB.
BLOCK_ELEMENTS = 1 << 22


def parse_sizes(values: Sequence[str]) -> list[int]:
    """``["1e4,1e5", "300"]`` -> ``[10000, 100000, 300]``; each a positive integer."""
    sizes = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            number = float(part)
            if number < 1 or number != int(number):
                msg = f"a size must be a positive integer, got {part!r}"
                raise ValueError(msg)
            sizes.append(int(number))
    return sizes


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def limit_threads(threads: int) -> None:
    """Ask every library for ``threads`` threads; Polars reads this only when first imported."""
    for name in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[name] = str(threads)


def thresholds(originals: Float64Array, avatars: Float64Array, tie_tol: float) -> Float64Array:
    """``T_i = d2(x_i, y_i) * (1 + tie_tol)``, squared differences summed in column order."""
    total = np.zeros(len(originals))
    for k in range(originals.shape[1]):
        diff = originals[:, k] - avatars[:, k]
        total += diff * diff
    result: Float64Array = total * (1.0 + tie_tol)
    return result


def exact_counts(
    originals: Float64Array,
    avatars: Float64Array,
    limits: Float64Array,
    rows: npt.NDArray[np.int64] | None = None,
    *,
    threads: int = 1,
) -> CountArray:
    """The float64 brute force: ``#{j != i : d2(x_i, y_j) <= T_i}`` for each selected row.

    ``d2`` is computed as the definition says (direct differences, squared and
    summed in column order), so it is the arbiter of every other engine.
    """
    rows = np.arange(len(originals)) if rows is None else rows
    counts = np.zeros(len(rows), dtype=np.int64)
    block = max(1, BLOCK_ELEMENTS // max(1, len(avatars)))

    def run(start: int) -> None:
        part = rows[start : start + block]
        total = np.zeros((len(part), len(avatars)))
        for k in range(originals.shape[1]):
            diff = originals[part, k][:, None] - avatars[None, :, k]
            total += diff * diff
        # The own avatar always lies within T_i (tie_tol >= 0): subtract it.
        counts[start : start + block] = np.count_nonzero(total <= limits[part, None], axis=1) - 1

    with ThreadPoolExecutor(max(1, threads)) as pool:
        list(pool.map(run, range(0, len(rows), block)))
    return counts


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": default_threads(),
        "cpu_model": model or platform.processor(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def header(command: Sequence[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv if command is None else command)
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(arg) for arg in argv),
        "machine": machine(),
        "versions": versions(
            [
                "polars-hidden-rate",
                "polars",
                "numpy",
                "faiss-cpu",
                "scipy",
                "scikit-learn",
                "polars-ds",
            ]
        ),
    }


def write_results(out: Path, name: str, payload: dict[str, Any], markdown: str) -> list[Path]:
    """Write ``name.json`` and ``name.md`` into ``out``; return their paths.

    Into benchmarks/results/ (the committed results), the plots of docs/performance.md are
    then drawn again from every result there (``benchmarks.plots``; skipped, with a note,
    without matplotlib).
    """
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{name}.json"
    md_path = out / f"{name}.md"
    json_path.write_text(json.dumps(payload, indent=2, default=_jsonable) + "\n")
    md_path.write_text(markdown)
    if out.resolve() == RESULTS:
        from benchmarks import plots

        plots.refresh(RESULTS)
    return [json_path, md_path]


def _jsonable(value: object) -> object:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    msg = f"cannot write {type(value).__name__} as JSON"
    raise TypeError(msg)


def seconds(value: float | None) -> str:
    """A duration with three significant digits."""
    if value is None:
        return ""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"
