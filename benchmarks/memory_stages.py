"""Memory per stage of the keyed parquet run: bytes per record held and peaked in each stage.

Run ``python -m benchmarks.memory_stages --n 1e6`` (the budget in docs/performance.md, "Memory
budget for 1e8 records"). It writes the ``bench_parquet`` inputs (or reuses ``--dir``), warms
up on a small frame (imports, numba's kernels, thread pools), then runs
``scan_parquet(o).avatar.local_cloaking(scan_parquet(a), on="id").sink_parquet(out)`` once,
marking the start and end of each stage and sampling RSS every 2 ms. Set
``MALLOC_MMAP_THRESHOLD_=65536`` and ``_RJEM_MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0``
so that freed memory is returned at once and RSS is what is live.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_parquet import COORDS, write_inputs
from benchmarks.common import limit_threads, parse_sizes

PAGE = 4096


def rss() -> int:
    """This process's resident bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE


class Recorder:
    """Stage marks and RSS samples taken by a background thread."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float, int]] = []
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._wrapped: list[tuple[Any, str, Any]] = []

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), rss()))
            time.sleep(0.002)

    def mark(self, name: str) -> None:
        self.marks.append((name, time.perf_counter(), rss()))

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        """Mark ``name>`` and ``name<`` around every call of ``owner.attribute``."""
        function: Callable[..., Any] = getattr(owner, attribute)
        self._wrapped.append((owner, attribute, vars(owner)[attribute]))

        @functools.wraps(function)
        def marked(*args: Any, **kwargs: Any) -> Any:
            self.mark(f"{name}>")
            try:
                return function(*args, **kwargs)
            finally:
                self.mark(f"{name}<")

        setattr(owner, attribute, marked)

    def __enter__(self) -> Recorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.05)
        self._stop.set()
        self._thread.join()
        for owner, attribute, original in reversed(self._wrapped):
            setattr(owner, attribute, original)

    def table(self, records: int) -> list[str]:
        """Per stage: seconds, bytes per record held at its end and at its peak."""
        base = self.marks[0][2]
        lines = ["| from | to | seconds | end B/rec | peak B/rec |"]
        lines.append("| --- | --- | ---: | ---: | ---: |")
        for (start, t0, r0), (stop, t1, r1) in zip(self.marks, self.marks[1:], strict=False):
            inside = [r for t, r in self.samples if t0 <= t <= t1]
            peak = max([*inside, r0, r1])
            lines.append(
                f"| {start} | {stop} | {t1 - t0:.2f} | {(r1 - base) / records:.1f} "
                f"| {(peak - base) / records:.1f} |"
            )
        overall = max(r for _, r in self.samples) - base
        lines.append(f"\npeak above the warmed-up process: {overall / records:.1f} B/rec")
        return lines


def run(directory: Path, out: Path, threads: int) -> None:
    import polars as pl

    import polars_hidden_rate  # noqa: F401  (registers `avatar`)

    originals: Any = pl.scan_parquet(directory / "originals.parquet")
    originals.avatar.local_cloaking(
        pl.scan_parquet(directory / "avatars.parquet"), coords=COORDS, on="id", threads=threads
    ).sink_parquet(out)


def warm_up(directory: Path, threads: int) -> None:
    """The whole path once on 30,000 rows: what stays loaded is left out of the budget."""
    import polars as pl

    import polars_hidden_rate  # noqa: F401

    rng = np.random.default_rng(0)
    frame: Any = pl.DataFrame(
        {"id": np.arange(30_000), **{c: rng.standard_normal(30_000) for c in COORDS}}
    ).lazy()
    frame.avatar.local_cloaking(
        frame.with_columns(pl.col(COORDS[0]) + 0.1), coords=COORDS, on="id", threads=threads
    ).sink_parquet(directory / "warm.parquet")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="1e6", help="records (default 1e6)")
    parser.add_argument("--dir", type=Path, help="reuse the inputs there (else written)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    (n,) = parse_sizes([args.n])
    from polars_hidden_rate import engine, plan
    from polars_hidden_rate.engine import arrays, kdtree
    from polars_hidden_rate.frames import read

    with tempfile.TemporaryDirectory() as scratch:
        directory = args.dir or write_inputs(
            Path(scratch), n, profile="gaussian", seed=0, threads=args.threads
        )
        warm_up(Path(scratch), args.threads)
        with Recorder() as recorder:
            for owner, attribute, name in (
                (plan, "read_aligned", "read"),
                (read, "_avatar_order", "link"),
                (read, "float64_rows", "to_float64"),
                (arrays, "scaled_by", "scale"),
                (arrays, "own_thresholds", "thresholds"),
                (engine, "choose_strategy", "probe"),
                (kdtree.KdTree, "walk_counts", "walk"),
                (plan.CountPlan, "result", "counts"),
            ):
                recorder.wrap(owner, attribute, name)
            recorder.wrap(kdtree.KdTree, "build", "tree")
            recorder.mark("start")
            run(directory, Path(scratch) / "out.parquet", args.threads)
            recorder.mark("end")
    print("\n".join(recorder.table(n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
