"""Smoke tests of the benchmark harness: it runs, its arbiter is right, and it catches errors."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import bench_counts
from benchmarks.common import exact_counts, parse_sizes, thresholds
from tests.helpers import brute_force_counts, without_provenance

TINY = ["--sizes", "300", "--dims", "2", "--engines", "ours,brute,ckdtree", "--threads", "1"]


def test_harness_agrees_and_writes_results(tmp_path: Path) -> None:
    assert bench_counts.main([*TINY, "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "counts.json").read_text())
    (cell,) = payload["cells"]
    assert (cell["n"], cell["d"]) == (300, 2)
    assert cell["agree"]
    assert cell["checked_records"] == 300
    assert {name: entry["status"] for name, entry in cell["engines"].items()} == {
        "ours": "ok",
        "brute": "ok",
        "ckdtree": "ok",
    }
    assert cell["mismatches"] == {"ours": 0, "brute": 0, "ckdtree": 0}
    assert cell["ratio"] > 0
    assert "| 300 | 2 |" in (tmp_path / "counts.md").read_text()


def test_the_report_benchmark_times_the_runs_in_turn(tmp_path: Path) -> None:
    from benchmarks import bench_report

    bench_report.main(["--sizes", "2000", "--dims", "3", "--repeat", "2", "--out", str(tmp_path)])
    payload = json.loads((tmp_path / "report.json").read_text())
    (cell,) = payload["cells"]
    assert (cell["n"], cell["dims"]) == (2000, 3)
    assert [len(cell["all_seconds"][name]) for name in bench_report.RUNS] == [2, 2, 2, 2]
    assert cell["ratio"]["with_attack"] == (
        cell["seconds"]["with_attack"] / cell["seconds"]["local_cloaking"]
    )
    assert cell["ratio"]["with_holdout"] == (
        cell["seconds"]["with_holdout"] / cell["seconds"]["local_cloaking"]
    )
    assert "| 2,000 | 3 |" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize(
    ("engine", "status", "engines"),
    [
        ("ckdtree", 0, "ours,brute,ckdtree"),
        ("ours", 1, "ours,brute,ckdtree"),
        ("ours-flat", 1, "ours-flat,brute"),
        # Without the brute force, the disputed records are settled by one.
        ("ckdtree", 0, "ours,ckdtree"),
    ],
)
def test_harness_reports_an_engine_that_miscounts(
    engine: str, status: int, engines: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    right = bench_counts.ENGINES[engine].run

    def off_by_one(case: bench_counts.Case) -> np.ndarray:
        counts = right(case)
        counts[:7] += 1
        return counts

    wrong = dataclasses.replace(bench_counts.ENGINES[engine], run=off_by_one)
    monkeypatch.setitem(bench_counts.ENGINES, engine, wrong)
    # A wrong peer is reported; wrong counts of ours also fail the run.
    arguments = [*TINY, "--engines", engines, "--out", str(tmp_path)]
    assert bench_counts.main(arguments) == status
    (cell,) = json.loads((tmp_path / "counts.json").read_text())["cells"]
    assert not cell["agree"]
    assert cell["disagreeing"] == [engine]
    assert cell["mismatches"][engine] == 7
    assert f"no: {engine}" in (tmp_path / "counts.md").read_text()


def test_strategies_run_side_by_side_with_the_probe(tmp_path: Path) -> None:
    arguments = ["--sizes", "400", "--dims", "16", "--engines", "brute", "--threads", "1"]
    arguments += ["--profile", "isotropic", "--strategies", "--out", str(tmp_path)]
    assert bench_counts.main(arguments) == 0
    (cell,) = json.loads((tmp_path / "counts.json").read_text())["cells"]
    assert cell["agree"]
    assert list(cell["engines"]) == ["ours-tree", "ours-flat", "ours-auto", "brute"]
    assert {entry["status"] for entry in cell["engines"].values()} == {"ok"}
    assert cell["probe"]["chose"] in ("tree", "flat")
    assert "| auto chose |" in (tmp_path / "counts.md").read_text()


def test_the_arbiter_is_the_reference_brute_force() -> None:
    rng = np.random.default_rng(3)
    originals = rng.integers(-2, 3, (200, 3)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape).astype(np.float64)
    limits = thresholds(originals, avatars, 1e-9)
    expected = brute_force_counts(originals, avatars, 1e-9)
    np.testing.assert_array_equal(exact_counts(originals, avatars, limits, threads=2), expected)
    rows = np.array([5, 0, 199], dtype=np.int64)
    np.testing.assert_array_equal(exact_counts(originals, avatars, limits, rows), expected[rows])


def test_sizes_parse_like_the_command_line() -> None:
    assert parse_sizes(["1e4,1e5", "300"]) == [10_000, 100_000, 300]
    with pytest.raises(ValueError, match="positive integer"):
        parse_sizes(["2.5"])


def test_flat_profile_splits_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import profile_flat

    cases = ["isotropic,300,4", "dense,300,3"]
    assert profile_flat.main(["--cases", *cases, "--threads", "1", "--repeat", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "n=3e+02" in line]
    assert len(rows) == 2


def test_memory_stages_mark_every_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_parquet, memory_stages
    from polars_hidden_rate import plan
    from polars_hidden_rate.engine import kdtree

    build, read = vars(kdtree.KdTree)["build"], vars(plan)["read_aligned"]
    bench_parquet.write_inputs(tmp_path, 2000, profile="gaussian", seed=0, threads=1)
    assert memory_stages.main(["--n", "2000", "--dir", str(tmp_path), "--threads", "1"]) == 0
    out = capsys.readouterr().out
    for stage in ("read", "link", "to_float64", "scale", "thresholds", "tree", "walk"):
        assert f"| {stage}>" in out
    assert vars(kdtree.KdTree)["build"] is build  # restored
    assert vars(plan)["read_aligned"] is read


@pytest.mark.parametrize("profile", ["gaussian", "discrete"])
def test_tree_neighbours_are_the_exact_nearest(profile: str) -> None:
    """The kd-tree search behind ``neighbours="tree"`` finds the k smallest d2 of each
    record (ties may pick other rows, never other distances), and the avatars it makes
    are means of the originals."""
    from benchmarks import data

    originals = data.make_originals(3_000, 4, profile=profile, seed=1)  # type: ignore[arg-type]
    search = data._tree_search(originals, 7, threads=2)
    squared, rows, targets = search(500, 1_700, 7)
    d2 = ((originals[targets][:, None, :] - originals[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(squared, np.sort(d2, axis=1)[:, :7], rtol=1e-12, atol=0)
    np.testing.assert_allclose(np.take_along_axis(d2, rows, axis=1), squared, rtol=1e-12, atol=0)
    assert sorted(targets.tolist()) == sorted(set(targets.tolist()))
    avatars = data.make_avatars(originals, k=7, neighbours="tree", threads=2)
    assert avatars.shape == originals.shape
    assert (avatars.min(axis=0) >= originals.min(axis=0) - 1e-12).all()
    assert (avatars.max(axis=0) <= originals.max(axis=0) + 1e-12).all()


def test_stage_seconds_read_a_commands_progress_log() -> None:
    from benchmarks import bench_parquet

    log = "\n".join(
        [
            "hidden-rate: reading: started",
            "hidden-rate: reading: done in 12.5 s",
            "hidden-rate: counting: 10% done, 4.2 s, ~1 s left",
            "hidden-rate: counting: done in 4.9 s",
            "hidden-rate: counting: done in 5.6 s",  # counted again in full: summed
            "hidden-rate: nearest originals: done in 1.4 s",
        ]
    )
    assert bench_parquet.stage_seconds(log) == {
        "reading": 12.5,
        "counting": 10.5,
        "nearest originals": 1.4,
    }


def test_the_sampled_check_catches_a_wrong_count(tmp_path: Path) -> None:
    import polars as pl

    from benchmarks import bench_parquet

    bench_parquet.write_inputs(tmp_path, 600, profile="discrete", seed=0, threads=1)
    result = tmp_path / "result-ours.parquet"
    bench_parquet.work(
        "ours", tmp_path / "originals.parquet", tmp_path / "avatars.parquet", result, 1
    )
    check = bench_parquet.verify_sample(tmp_path, 600, result, sample=600)
    assert (check["mismatches"], check["all_rows"], check["columns_kept"]) == (0, True, True)
    wrong = pl.read_parquet(result).with_columns(
        local_cloaking=pl.when(pl.int_range(pl.len()) == 7)
        .then(pl.col("local_cloaking") + 1)
        .otherwise(pl.col("local_cloaking"))
    )
    wrong.write_parquet(result)
    assert bench_parquet.verify_sample(tmp_path, 600, result, sample=600)["mismatches"] == 1


@pytest.mark.slow
def test_dataset_harness_runs_a_command_line_cluster_and_compares(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from benchmarks import bench_dataset

    arguments = ["--n", "3000", "--files", "2,3", "--dir", str(tmp_path / "data"), "--stages"]
    arguments += ["--repeat", "2"]
    assert bench_dataset.main([*arguments, "--out", str(tmp_path / "results")]) == 0
    # One case, split into 2 and then 3 files per side, each run written on its own.
    assert [len(list((tmp_path / "data" / f"files{f}" / "avatars").iterdir())) for f in (2, 3)] == [
        2,
        3,
    ]
    assert json.loads((tmp_path / "results" / "dataset_files2.json").read_text())["files"] == 2
    payload = json.loads((tmp_path / "results" / "dataset_files3.json").read_text())
    assert {name: run["status"] for name, run in payload["runs"].items()} == {
        "local": "ok",
        "cluster": "ok",
    }
    assert payload["check"] == {
        "same_parts": True,
        "rows": 3000,
        "frames_equal": True,
        "mismatches": 0,
    }
    assert len(payload["runs"]["cluster"]["worker_peak_rss_mib"]) == 2
    stages = payload["runs"]["cluster"]["stages"]
    assert {"read-originals", "link-bucket", "shard-inputs", "count-within", "write"} <= set(stages)
    assert stages["write"]["tasks"] == 3  # one per originals file
    cluster = payload["runs"]["cluster"]
    assert sum(cluster["tasks_run"].values()) == cluster["tasks_modelled"]["total"]
    assert cluster["tasks_run"]["rechunk-transfer"] > 0  # the exchanges on Dask's P2P
    processes = {"scheduler", "worker 0", "worker 1"}
    assert set(cluster["cpu_s"]) == set(cluster["system_s"]) == processes
    assert all(0 <= cluster["system_s"][name] <= cluster["cpu_s"][name] for name in processes)
    local = payload["runs"]["local"]
    assert 0 <= local["system_s"]["local"] <= local["cpu_s"]["local"]
    assert stages["read-originals"]["first_s"] <= stages["write"]["first_s"]
    assert "| count-within |" in (tmp_path / "results" / "dataset_files3.md").read_text()
    summaries = [payload["runs"][run]["summary"] for run in ("cluster", "local")]
    assert without_provenance(summaries[0]) == without_provenance(summaries[1])
    assert "summaries equal: **True**" in (tmp_path / "results" / "dataset_files3.md").read_text()
    # The workers ran on glibc's allocator defaults, as the header says: Dask's nanny did
    # not set its trim threshold (which turns off glibc's dynamic mmap threshold).
    assert (payload["worker_malloc"], payload["worker_trim_threshold"]) == ("glibc", [None, None])
    header = (tmp_path / "results" / "dataset_files3.md").read_text().splitlines()[0]
    assert "`MALLOC_TRIM_THRESHOLD_` unset (the workers': None, None)" in header
    # Two pairs in alternation, each compared; the median of their ratios in the results.
    pairs = payload["pairs"]
    assert [pair["outputs_equal"] for pair in pairs] == [True, True]
    assert pairs[-1]["cluster_s"] == cluster["seconds"]
    assert all(pair["ratio"] == round(pair["cluster_s"] / pair["local_s"], 3) for pair in pairs)
    written = (tmp_path / "results" / "dataset_files3.md").read_text()
    assert f"**Median over 2 pairs: {bench_dataset.median_ratio(pairs)}**" in written


def test_dataset_harness_refuses_no_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_dataset

    with pytest.raises(SystemExit) as raised:
        bench_dataset.parse_args(["--repeat", "0"])
    assert raised.value.code == 2
    assert "--repeat must be at least 1, got 0" in capsys.readouterr().err


def test_dataset_pair_agrees_only_when_every_count_does() -> None:
    from benchmarks import bench_dataset

    runs = {"local": {"seconds": 40.0}, "cluster": {"seconds": 46.0}}
    equal = {"same_parts": True, "rows": 9, "frames_equal": True, "mismatches": 0}
    assert bench_dataset.pair_entry(runs, equal) == {
        "local_s": 40.0,
        "cluster_s": 46.0,
        "ratio": 1.15,
        "outputs_equal": True,
    }
    for wrong in ({**equal, "mismatches": 1}, {**equal, "frames_equal": False}, {}):
        assert bench_dataset.pair_entry(runs, wrong)["outputs_equal"] is False
    failed: dict[str, dict[str, Any]] = {"local": {"seconds": 40.0}, "cluster": {"status": "x"}}
    assert bench_dataset.pair_entry(failed, {})["ratio"] is None


@pytest.mark.slow
def test_dataset_harness_starts_workers_with_dasks_allocator_when_asked(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    from benchmarks import bench_dataset

    processes, scheduler_file = bench_dataset.start_cluster(tmp_path, 1, "1GiB", malloc="dask")
    try:
        assert bench_dataset.ready_workers(scheduler_file, 1) == ["65536"]
        # Before the clock starts, the worker has imported the pipeline's tasks.
        imported = bench_dataset.on_workers(
            scheduler_file, 1, lambda: "polars_hidden_rate.cluster.pipeline_tasks" in sys.modules
        )
        assert list(imported.values()) == [True]
    finally:
        bench_dataset.stop_cluster(processes)


def paper_layout(root: Path, n: int = 60) -> Path:
    """A checkout of the paper's layout (WBCD, one round), its results computed as the paper's
    notebook does: every component, the nearest two in float32 (FAISS's arithmetic)."""
    import polars as pl

    import polars_hidden_rate as phr

    rng = np.random.default_rng(4)
    folder = root / "datasets" / "WBCD" / "privacy"
    folder.mkdir(parents=True)
    (root / "datasets" / "results_df").mkdir()

    def records(size: int) -> pl.DataFrame:
        values = {f"v{j}": rng.integers(1, 11, size).astype(float) for j in range(4)}
        return pl.DataFrame({**values, "Class": rng.choice([2.0, 4.0], size)})

    train = records(n)
    train.write_csv(folder / "holdout_0.csv")
    every = phr.Projection.fit(train, categorical=["Class"], ncp="all")
    x = every.transform(train).select(every.coordinate_columns()).to_numpy().astype(np.float32)
    rows = []
    for kind, stem in (("Reference", "remaining"), ("Avatar", "avatar")):
        synthetic = pl.concat([records(25), train.head(3)])  # exact copies too: DCR 0
        synthetic.write_csv(folder / f"{stem}_0.csv")
        y = every.transform(synthetic).select(every.coordinate_columns()).to_numpy()
        d2 = ((y.astype(np.float32)[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
        first, second = np.sqrt(np.sort(d2, axis=1)[:, :2]).T.astype(float)
        ratio = np.divide(first, second, out=np.ones_like(first), where=second > 0)
        rows += [(a, b, kind, "round_0") for a, b in zip(first, ratio, strict=True)]
    for kind, stem in (("Synthpop", "synthpop"), ("CT-GAN", "ctgan")):
        synthetic = records(5)
        # synthpop's files carry R's written-out row names: an unnamed first column.
        written = synthetic.with_row_index("").with_columns(pl.col("").cast(pl.String))
        (written if stem == "synthpop" else synthetic).write_csv(folder / f"{stem}_0.csv")
        y = every.transform(synthetic).select(every.coordinate_columns()).to_numpy()
        d2 = ((y[:, None, :] - x.astype(float)[None, :, :]) ** 2).sum(axis=2)
        first, second = np.sqrt(np.sort(d2, axis=1)[:, :2]).T
        rows += [(a, a / b, kind, "round_0") for a, b in zip(first, second, strict=True)]
    pl.DataFrame(
        rows, schema=["dcr_values", "nndr_values", "type", "round"], orient="row"
    ).write_csv(root / "datasets" / "results_df" / "WBCD_DCR_NNDR_comparison_results.csv")
    return root


def test_the_paper_benchmark_agrees_within_float32_and_catches_a_wrong_value(
    tmp_path: Path,
) -> None:
    import polars as pl

    from benchmarks import bench_paper_dcr

    root = paper_layout(tmp_path / "paper")
    arguments = [str(root), "--datasets", "WBCD", "--rounds", "1", "--out", str(tmp_path)]
    assert bench_paper_dcr.main(arguments) == 0
    summary = json.loads((tmp_path / "paper_dcr.json").read_text())["summary"]
    assert (summary["records"], summary["agree"]) == (66, 66)
    # One DCR off by more than float32 explains: that record disagrees, and the target fails.
    results = root / "datasets" / "results_df" / "WBCD_DCR_NNDR_comparison_results.csv"
    paper = pl.read_csv(results)
    paper = paper.with_columns(
        pl.when(pl.int_range(pl.len()) == 7)
        .then(pl.col("dcr_values") * 1.001)
        .otherwise(pl.col("dcr_values"))
    )
    paper.write_csv(results)
    assert bench_paper_dcr.main(arguments) == 1
    summary = json.loads((tmp_path / "paper_dcr.json").read_text())["summary"]
    assert summary["agree"] == 65
    assert summary["cells"]["WBCD Reference"]["agree"] == 27


def test_dense_harness_times_ours_and_ckdtree_and_checks_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import bench_dense

    arguments = ["--sizes", "500", "--repeat", "2", "--threads", "1", "--out", str(tmp_path)]
    arguments += ["--cache", str(tmp_path / "cases")]
    assert bench_dense.main(arguments) == 0
    (cached,) = (tmp_path / "cases").iterdir()
    monkeypatch.setattr(bench_dense, "make_case", None)  # the second run reads the case kept
    assert bench_dense.main(arguments) == 0
    (cell,) = json.loads((tmp_path / "dense.json").read_text())["cells"]
    assert cached.name == "discrete_n500_d3_seed0_ivf.npz"
    assert cell["n"] == 500
    assert set(cell["seconds"]) == {"ours", "ours-flags", "ckdtree"}
    assert all(len(runs) == 2 for runs in cell["runs"].values())
    assert cell["differ_from_ours"] == {"ours": 0, "ours-flags": 0, "ckdtree": 0}
    assert cell["brute_force_mismatches"] == {"ours": 0, "ours-flags": 0, "ckdtree": 0}
    assert cell["ratio"]["ours"] > 0
    assert "| 500 |" in (tmp_path / "dense.md").read_text()


@pytest.mark.parametrize("engine", ["ours-flags", "ckdtree"])
def test_dense_harness_fails_on_a_count_that_differs(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import bench_dense

    right = bench_dense.RUNNERS[engine]

    def off_by_one(*args: object) -> np.ndarray:
        counts = right(*args)  # type: ignore[arg-type]
        counts[:3] += 1
        return counts

    monkeypatch.setitem(bench_dense.RUNNERS, engine, off_by_one)
    arguments = ["--sizes", "300", "--repeat", "1", "--threads", "1", "--out", str(tmp_path)]
    assert bench_dense.main(arguments) == 1
    (cell,) = json.loads((tmp_path / "dense.json").read_text())["cells"]
    assert cell["differ_from_ours"][engine] == 3
    assert "| no |" in (tmp_path / "dense.md").read_text()


def test_the_parquet_bench_runs_the_gate_and_the_report(tmp_path: Path) -> None:
    # Issue 22 item 3 measures `check` without `--output` and `report` where the counts run;
    # a run that exits 2 (bad input) fails, a verdict (exit 1) does not.
    from benchmarks import bench_parquet

    bench_parquet.write_inputs(tmp_path, 600, profile="gaussian", seed=0, threads=1)
    inputs = (tmp_path / "originals.parquet", tmp_path / "avatars.parquet")
    for runner in ("gate", "report"):
        spent, stages = bench_parquet.work(
            runner, *inputs, tmp_path / f"result-{runner}.parquet", 1
        )
        assert spent > 0
        # The stages the command's --progress log timed, each within the whole run.
        assert "counting" in stages
        assert all(0 <= seconds <= spent + 0.05 for seconds in stages.values())  # to 0.1 s
    with pytest.raises(RuntimeError, match="exited 2"):
        bench_parquet.work("gate", inputs[0], tmp_path / "missing.parquet", tmp_path / "x", 1)


def test_the_plots_are_drawn_from_the_results(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from benchmarks import plots

    results = tmp_path / "results"
    arguments = ["--sizes", "300,600", "--dims", "5", "--engines", "ours,ckdtree"]
    assert bench_counts.main([*arguments, "--threads", "1", "--out", str(results)]) == 0
    paths = plots.write(results, tmp_path / "images")
    assert [path.name for path in paths] == ["count_time.svg", "scale_time_memory.svg"]
    drawn = paths[0].read_text()
    assert "scipy cKDTree" in drawn  # the text stays text
    assert 'href="http' not in drawn  # nothing from another host
    assert "<metadata" not in drawn  # no date either
    assert plots.write(results, tmp_path / "images")[0].read_text() == drawn  # no date in it


def test_the_plots_keep_the_newest_and_our_current_engine_only() -> None:
    from benchmarks.plots import ENGINE_SINCE, Point, newest

    before = "2026-11-29T18:42:13+00:00"
    assert before[:10] < ENGINE_SINCE
    series = newest(
        [
            Point("ours", 10, 1.0, before),  # an earlier engine: left out
            Point("ours", 100, 3.0, "2026-12-01T22:11:21+00:00"),
            Point("ours", 100, 2.0, "2026-12-02T03:06:39+00:00"),  # the newest at n = 100
            Point("ckdtree", 10, 5.0, before),  # a peer's code does not change with ours
        ]
    )
    assert series == {"ckdtree": [(10, 5.0)], "ours": [(100, 2.0)]}


def test_a_run_into_the_results_draws_the_plots_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import common, plots

    drawn: list[Path] = []
    monkeypatch.setattr(common, "RESULTS", tmp_path.resolve())
    monkeypatch.setattr(plots, "refresh", drawn.append)
    common.write_results(tmp_path, "into_the_results", {}, "")
    common.write_results(tmp_path / "elsewhere", "not_there", {}, "")
    assert drawn == [tmp_path.resolve()]


# --- bench_peers: ours against SDMetrics and anonymeter


def _peers_bench(tmp_path: Path, *extra: str) -> dict[str, Any]:
    from benchmarks import bench_peers

    argv = ["--sizes", "200,400", "--threads", "1", "--out", str(tmp_path), *extra]
    assert bench_peers.main(argv) == 0
    assert "| 400 |" in (tmp_path / "peers.md").read_text()
    payload: dict[str, Any] = json.loads((tmp_path / "peers.json").read_text())
    return payload


def test_the_peers_bench_times_ours_as_the_standalone_functions_measure(tmp_path: Path) -> None:
    import polars_hidden_rate as phr
    from benchmarks import bench_peers

    # Without the peers: ours alone, and every peer absent.
    payload = _peers_bench(tmp_path, "--no-peers")
    assert payload["peers_python"] is None
    assert [cell["n"] for cell in payload["cells"]] == [200, 400]
    cell = payload["cells"][1]
    assert set(cell["ours"]) == set(bench_peers.OURS)
    assert all(entry["seconds"] > 0 for entry in cell["ours"].values())
    assert {peer: entry["status"] for peer, entry in cell["peers"].items()} == {
        pair.peer: "absent" for pair in bench_peers.PAIRS
    }
    assert cell["peers_total_over_report"] is None
    # Ours' figures are the standalone functions' on the same sets, and the report's sections.
    sets = bench_peers.make_sets(400)
    o, s, h = sets["originals"], sets["synthetic"], sets["holdout"]
    inference = phr.inference_risk(
        o, s, h, known=bench_peers.KNOWN, secret=bench_peers.SECRET, space="gower",
        secret_kind="categorical",
    )  # fmt: skip
    linkability = phr.linkability_risk(o, s, h, aux_cols=bench_peers.AUX_COLS, space="gower")
    expected = {
        "overfitting": phr.dcr_overfitting_protection(o, s, h).score,
        "baseline": phr.dcr_baseline_protection(o, s, seed=bench_peers.BASELINE_SEED).score,
        "inference": inference.risk,
        "linkability": linkability.risk,
    }
    report = cell["ours"]["report"]["figures"]
    for name, value in expected.items():
        key = "score" if name in ("overfitting", "baseline") else "risk"
        assert cell["ours"][name]["figures"][key] == value, name
        assert report[name] == cell["ours"][name]["figures"], name
    assert cell["ours"]["inference"]["figures"]["n_success"] == inference.members.successes


@pytest.mark.slow  # a process of the peers' venv per peer
def test_the_peers_bench_runs_the_peers_and_skips_past_the_limit(tmp_path: Path) -> None:
    from benchmarks import bench_peers
    from tests.helpers import PEERS_PYTHON

    if not PEERS_PYTHON.exists():
        pytest.skip(f"no peers' venv at {PEERS_PYTHON}: `make peers` creates it")
    # Any peer's n^2 prediction from 200 records to 400 passes a limit of 1 ms.
    payload = _peers_bench(tmp_path, "--peers-python", str(PEERS_PYTHON), "--limit", "0.001")
    assert set(payload["peers_versions"]) >= {"anonymeter", "sdmetrics"}
    first, second = payload["cells"]
    for pair in bench_peers.PAIRS:
        ran, skipped = first["peers"][pair.peer], second["peers"][pair.peer]
        assert ran["status"] == "ok", ran.get("error")
        assert ran["ratio"] == ran["seconds"] / first["ours"][pair.ours]["seconds"]
        assert skipped["status"] == "skipped"
        assert skipped["predicted_seconds"] == ran["seconds"] * 4
        # Where the spaces meet (anonymeter's Gower distance), the figures agree.
        assert ran["agree"] is (True if pair.same_space else None)
    assert first["peers_total_over_report"] > 0
    # Ours, whose exact Gower attacks are n^2 too, are skipped by the same rule.
    assert {entry["status"] for entry in second["ours"].values()} == {"skipped"}
    assert second["peers_total_over_report"] is None


# --- bench_attacks: the attacks at scale against anonymeter


def test_the_attacks_bench_runs_singling_out_alone_in_both_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import polars_hidden_rate as phr
    from benchmarks import bench_attacks

    monkeypatch.setattr(bench_attacks, "peers_python", lambda given: None)
    out = tmp_path / "attacks.json"
    argv = ["--attacks", "singling_out", "--sizes", "300,600", "--threads", "1"]
    assert bench_attacks.main([*argv, "--warm-up", "100", "--out", str(out)]) == 0
    page = capsys.readouterr().out
    assert "| 600 | singling_out | multivariate |" in page
    rows = json.loads(out.read_text())["rows"]
    assert [(row["n"], row["attack"], row["space"]) for row in rows] == [
        (n, "singling_out", mode) for n in (300, 600) for mode in bench_attacks.MODES
    ]
    sets = bench_attacks.make_sets(600)
    for row in rows[2:]:
        found = phr.singling_out_risk(
            sets["originals"], sets["synthetic"], sets["holdout"], mode=row["space"]
        )
        assert row["ours"]["figures"] == {
            "risk": found.risk,
            "n_success": found.members.successes,
            "n_control": found.control.successes,
        }
        assert row["ours"]["queries"] == found.queries
        assert row["peer"]["status"] == "absent"
        assert row["agree"] is None
        assert row["growth"] > 0
    # anonymeter's multivariate queries are random: never compared.
    assert [row.get("agree_note") for row in rows[2:]] == [None, "random queries"]
    # anonymeter's next time by its growth as measured, at least linear.
    predict = bench_attacks.predicted_seconds
    assert predict([], 10, measured=True) is None
    assert predict([(10, 2.0)], 20, measured=True) == 8.0  # n^2 from one size
    assert predict([(10, 1.0), (20, 8.0)], 40, measured=True) == pytest.approx(64.0)
    assert predict([(10, 1.0), (20, 1.0)], 40, measured=True) == 2.0
    assert predict([(10, 1.0), (20, 8.0)], 40, measured=False) == 32.0
    with pytest.raises(SystemExit):
        bench_attacks.main(["--attacks", "singling", "--sizes", "300"])


def test_the_1e8_commands_result_reads_as_its_markdown_says() -> None:
    # docs/performance.md quotes this page; it must be what its JSON renders, goals included.
    from benchmarks import bench_parquet

    stem = (
        Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "parquet_1e8_gate_report"
    )
    payload = json.loads(stem.with_suffix(".json").read_text())
    page = bench_parquet.markdown(payload)
    assert page == stem.with_suffix(".md").read_text()
    assert "peak RSS under 16 GiB: ours did not run, gate's **True**" in page
    assert "gate under 600 s: **True**; report under 900 s: **True**" in page
    assert payload["runs"]["gate"]["stages"]["counting"] > 0


def test_glibc_workers_inherit_no_trim_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Nanny started in this process (a `LocalCluster` of another test) leaves its
    ``MALLOC_TRIM_THRESHOLD_`` in this process's environment: glibc's workers must not
    inherit it, Dask's keep it."""
    from benchmarks import bench_dataset

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    assert "MALLOC_TRIM_THRESHOLD_" not in bench_dataset.worker_environment(tmp_path, "glibc")
    kept = bench_dataset.worker_environment(tmp_path, "dask")
    assert kept["MALLOC_TRIM_THRESHOLD_"] == "65536"
