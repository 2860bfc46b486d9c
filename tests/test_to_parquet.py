"""`local_cloaking_to_parquet` on the local engine: parquet datasets in, one part per
originals file out, the counts of `local_cloaking`, nothing half-written, no input lost."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.exceptions import ColumnNotFoundError, ComputeError, DuplicateError, SchemaError
from polars.testing import assert_frame_equal

import polars_hidden_rate as phr
from polars_hidden_rate import engine
from polars_hidden_rate.cluster import pipeline, shards
from polars_hidden_rate.cluster.pipeline_tasks import Splits, count_at_most
from polars_hidden_rate.cluster.shards import plan_tasks, records_per_task
from polars_hidden_rate.frames import KeyProblems, link_by_key, open_dataset
from polars_hidden_rate.gate import cloaking_summary
from polars_hidden_rate.measures.summary import histogram, summarize, summary_from_order_statistics
from polars_hidden_rate.outputs import part_name
from polars_hidden_rate.tasks import WorkerSpec
from tests.helpers import (
    COORDS,
    brute_force_counts,
    changed,
    counts_of,
    linked_case,
    reverse_columns,
    siblings,
    write_files,
)


@pytest.mark.parametrize(("left_files", "right_files"), [(1, 1), (4, 3), (5, 7)])
@pytest.mark.parametrize("kind", ["grid", "gaussian"])
def test_parts_hold_the_counts_of_local_cloaking(
    tmp_path: Path, left_files: int, right_files: int, kind: str
) -> None:
    left, right = linked_case(300, seed=left_files + right_files, kind=kind)
    originals = write_files(left, tmp_path / "o", left_files)
    avatars = write_files(right, tmp_path / "a", right_files)

    summary = phr.local_cloaking_to_parquet(
        originals, avatars, tmp_path / "out", coords=COORDS, on="id"
    )

    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    assert siblings(tmp_path / "out") == [part_name(k) for k in range(left_files)]
    written = pl.read_parquet(tmp_path / "out")
    assert_frame_equal(written, expected)
    for k, rows in enumerate(np.array_split(np.arange(left.height), left_files)):
        part = pl.read_parquet(tmp_path / "out" / part_name(k))
        assert_frame_equal(part.drop("local_cloaking", "hidden"), left[rows])
    assert summary == summarize(expected)
    found = cloaking_summary(left, right, coords=COORDS, on="id", allow_unlinked=True)
    assert counts_of(summary) == counts_of(found)  # grid links are too weak for the link test
    assert siblings(tmp_path) == ["a", "o", "out"]  # no temporary directory left


def test_row_order_a_list_of_files_and_tie_tol(tmp_path: Path) -> None:
    left, right = linked_case(200, seed=3)
    right = right.sort("id")
    left = left.sort("id")
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    files = sorted((tmp_path / "o").iterdir())
    for tie_tol in (0.0, 1e-9):
        out = tmp_path / f"out{tie_tol}"
        phr.local_cloaking_to_parquet(files, tmp_path / "a", out, coords=COORDS, tie_tol=tie_tol)
        counts = pl.read_parquet(out)["local_cloaking"].to_numpy()
        originals = left.select(COORDS).to_numpy()
        avatars = right.select(COORDS).to_numpy()
        assert counts.tolist() == brute_force_counts(originals, avatars, tie_tol).tolist()


def test_projected_features_and_min_rate(tmp_path: Path) -> None:
    left, right = linked_case(150, seed=4, kind="gaussian")
    write_files(left.drop("note"), tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 2)
    summary = phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "out", on="id", ncp=2, min_rate=99.5
    )
    expected = phr.local_cloaking(left.drop("note"), right, on="id", ncp=2)
    assert_frame_equal(pl.read_parquet(tmp_path / "out"), expected)
    # A gate judges the link as `check` does: the summary holds its evidence.
    assert summary.evidence is not None
    assert summary.evidence.link.linked
    assert replace(summary, evidence=None, max_own_copies=None) == summarize(
        expected, min_rate=99.5
    )
    assert summary.min_rate == 99.5
    assert not summary.passed


def test_existing_output_is_refused_then_replaced_only_after_success(tmp_path: Path) -> None:
    left, right = linked_case(100, seed=5)
    originals = write_files(left, tmp_path / "o", 2)
    avatars = write_files(right, tmp_path / "a", 1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("keep me")

    with pytest.raises(FileExistsError, match="overwrite=True"):
        phr.local_cloaking_to_parquet(originals, avatars, out, coords=COORDS, on="id")
    assert siblings(out) == ["old.txt"]

    broken = right.with_columns(pl.col("id").shift(1, fill_value=-1))
    (tmp_path / "b").mkdir()
    broken.write_parquet(tmp_path / "b" / "x.parquet")
    with pytest.raises(ComputeError, match="no avatar with the same key"):
        phr.local_cloaking_to_parquet(
            originals, tmp_path / "b", out, coords=COORDS, on="id", overwrite=True
        )
    assert siblings(out) == ["old.txt"]  # a failure leaves the old output as it was
    assert siblings(tmp_path) == ["a", "b", "o", "out"]

    phr.local_cloaking_to_parquet(originals, avatars, out, coords=COORDS, on="id", overwrite=True)
    assert siblings(out) == [part_name(0), part_name(1)]
    assert siblings(tmp_path) == ["a", "b", "o", "out"]


def test_output_mode_is_that_of_a_new_directory(tmp_path: Path) -> None:
    left, right = linked_case(50, seed=6)
    originals = write_files(left, tmp_path / "o", 1)
    avatars = write_files(right, tmp_path / "a", 1)
    (tmp_path / "plain").mkdir()
    phr.local_cloaking_to_parquet(originals, avatars, tmp_path / "out", coords=COORDS, on="id")
    assert (tmp_path / "out").stat().st_mode == (tmp_path / "plain").stat().st_mode


@pytest.mark.parametrize("where", ["originals", "avatars", "inside"])
def test_an_output_that_is_or_holds_an_input_is_refused(tmp_path: Path, where: str) -> None:
    left, right = linked_case(50, seed=7)
    originals = write_files(left, tmp_path / "o", 2)
    avatars = write_files(right, tmp_path / "a", 1)
    before = {path: path.read_bytes() for path in tmp_path.rglob("*.parquet")}
    output = {"originals": originals, "avatars": avatars, "inside": originals / "part000.parquet"}
    with pytest.raises(ValueError, match="is or holds the input"):
        phr.local_cloaking_to_parquet(
            originals, avatars, output[where], coords=COORDS, on="id", overwrite=True
        )
    assert {path: path.read_bytes() for path in tmp_path.rglob("*.parquet")} == before
    assert siblings(tmp_path) == ["a", "o"]


def test_an_output_that_is_a_file_or_has_no_folder_is_refused(tmp_path: Path) -> None:
    left, right = linked_case(20, seed=8)
    originals = write_files(left, tmp_path / "o", 1)
    avatars = write_files(right, tmp_path / "a", 1)
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"):
        phr.local_cloaking_to_parquet(
            originals, avatars, tmp_path / "file", coords=COORDS, on="id", overwrite=True
        )
    with pytest.raises(FileNotFoundError, match="output folder not found"):
        phr.local_cloaking_to_parquet(
            originals, avatars, tmp_path / "no" / "out", coords=COORDS, on="id"
        )


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (
            "duplicate avatar",
            DuplicateError,
            r"not unique in avatars: 2 rows share a key, e.g. \{'id': ",
        ),
        (
            "missing avatar",
            ComputeError,
            r"1 originals have no avatar with the same key 'id', its values not shown \(they",
        ),
        ("null avatar key", ComputeError, r"key \['id'\] of avatars is null in 1 rows"),
        (
            "nan coordinate",
            ComputeError,
            r"coords of avatars have missing values: 'Dim2' \(1 NaN\)",
        ),
        (
            "wide integer coordinate",
            ComputeError,
            r"coords column 'Dim1' of avatars has 1 integer value\(s\) beyond 2\^53",
        ),
    ],
)
def test_bad_data_is_reported_as_locally_and_nothing_is_written(
    tmp_path: Path, change: str, error: type[Exception], match: str
) -> None:
    left, right = linked_case(60, seed=9)
    right = changed(right, change)
    originals = write_files(left, tmp_path / "o", 2)
    avatars = write_files(right, tmp_path / "a", 3)
    with pytest.raises(error, match=match):
        phr.local_cloaking(left, right, coords=COORDS, on="id")
    with pytest.raises(error, match=match):
        phr.local_cloaking_to_parquet(originals, avatars, tmp_path / "out", coords=COORDS, on="id")
    assert siblings(tmp_path) == ["a", "o"]


def test_inputs_are_checked_before_anything_is_read(tmp_path: Path) -> None:
    left, right = linked_case(20, seed=10)
    originals = write_files(left, tmp_path / "o", 2)
    avatars = write_files(right, tmp_path / "a", 1)
    out = tmp_path / "out"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no parquet file"):
        phr.local_cloaking_to_parquet(tmp_path / "empty", avatars, out, coords=COORDS, on="id")
    (tmp_path / "x.csv").write_text("a\n1\n")
    with pytest.raises(ValueError, match="is not a parquet file"):
        phr.local_cloaking_to_parquet([tmp_path / "x.csv"], avatars, out, coords=COORDS)
    with pytest.raises(FileNotFoundError, match="file not found"):
        phr.local_cloaking_to_parquet(tmp_path / "nope.parquet", avatars, out, coords=COORDS)
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="cannot read originals"):
        phr.local_cloaking_to_parquet(tmp_path / "bad.parquet", avatars, out, coords=COORDS)
    with pytest.raises(TypeError, match="a parquet file, a directory or a list"):
        phr.local_cloaking_to_parquet([], avatars, out, coords=COORDS)
    with pytest.raises(ColumnNotFoundError, match="'Dim9'"):
        phr.local_cloaking_to_parquet(originals, avatars, out, coords=["Dim9"], on="id")
    with pytest.raises(TypeError, match="unexpected keyword argument 'coord'"):
        phr.local_cloaking_to_parquet(originals, avatars, out, coord=COORDS)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="`overwrite` must be True or False"):
        phr.local_cloaking_to_parquet(
            originals,
            avatars,
            out,
            coords=COORDS,
            overwrite=1,  # type: ignore[arg-type]
        )
    counted = phr.local_cloaking(left, right, coords=COORDS, on="id")
    write_files(counted, tmp_path / "counted", 1)
    with pytest.raises(DuplicateError, match="already have a column named 'local_cloaking'"):
        phr.local_cloaking_to_parquet(tmp_path / "counted", avatars, out, coords=COORDS, on="id")
    assert not out.exists()


def test_files_of_one_dataset_must_share_a_schema(tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    pl.DataFrame({"id": [1], "x": [1.0]}).write_parquet(tmp_path / "o" / "a.parquet")
    pl.DataFrame({"id": [2], "x": [1]}).write_parquet(tmp_path / "o" / "b.parquet")
    with pytest.raises(SchemaError, match=r"b\.parquet"):
        open_dataset(tmp_path / "o", "originals")


def test_files_with_their_columns_in_another_order_are_read_by_name(tmp_path: Path) -> None:
    """As `pl.scan_parquet` reads them: every part in the first file's column order."""
    left, right = linked_case(120, seed=21, kind="gaussian")
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    reverse_columns(tmp_path / "o", "part001.parquet")
    reverse_columns(tmp_path / "a", "part000.parquet")
    summary = phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "out", coords=COORDS, on="id"
    )
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    assert_frame_equal(pl.read_parquet(tmp_path / "out"), expected)
    for k in range(3):
        assert pl.read_parquet_schema(tmp_path / "out" / part_name(k)) == expected.schema
    assert summary == summarize(expected)


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ({"id": [2]}, r"b\.parquet' has no column 'x', which '.*a\.parquet' has"),
        (
            {"id": [2], "x": [1.0], "y z": [0]},
            r"b\.parquet' has a column 'y z' that '.*a\.parquet' ",
        ),
        ({"x": [1], "id": [2]}, r"b\.parquet' has column 'x' as Int64, but '.*a\.parquet' has it "),
    ],
    ids=["missing", "extra", "type"],
)
def test_files_with_other_columns_or_types_are_refused_naming_the_column(
    tmp_path: Path, other: dict[str, list[Any]], message: str
) -> None:
    (tmp_path / "o").mkdir()
    pl.DataFrame({"id": [1], "x": [1.0]}).write_parquet(tmp_path / "o" / "a.parquet")
    pl.DataFrame(other).write_parquet(tmp_path / "o" / "b.parquet")
    with pytest.raises(SchemaError, match=message + ".*the same columns and types"):
        open_dataset(tmp_path / "o", "originals")


def test_a_directory_skips_hidden_and_other_files(tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    for name in ("b.parquet", "a.pq", ".hidden.parquet", "_marker.parquet"):
        pl.DataFrame({"x": [1.0]}).write_parquet(tmp_path / "o" / name)
    (tmp_path / "o" / "notes.txt").write_text("x")
    found = open_dataset(tmp_path / "o", "originals")
    assert [p.path.name for p in found.partitions] == ["a.pq", "b.parquet"]
    assert [p.offset for p in found.partitions] == [0, 1]


@pytest.mark.parametrize("seed", range(40))
def test_the_summary_from_order_statistics_is_summarize(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    counts = rng.integers(0, [2, 5, 3000][seed % 3], size=n)
    ordered = np.sort(counts)
    found = summary_from_order_statistics(
        n, int(np.count_nonzero(counts == 0)), lambda k: int(ordered[k]), min_rate=50.0
    )
    assert found == summarize(pl.DataFrame({"local_cloaking": counts}), min_rate=50.0)


def test_histogram_has_exact_bins_then_the_rest() -> None:
    assert histogram(np.array([0, 0, 2, 7, 9]), 3).tolist() == [2, 0, 1, 2]


@pytest.mark.parametrize("seed", range(30))
def test_split_points_cut_pairs_in_lexicographic_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=200).astype(np.float64)  # many ties on the first coordinate
    row = rng.permutation(200).astype(np.int64)
    chosen = np.lexsort((row[:9], x[:9]))  # split points are sorted pairs
    splits = Splits(x[:9][chosen], row[:9][chosen])
    found = splits.assign(x, row)
    expected = [
        sum((sx, sr) <= (xi, ri) for sx, sr in zip(splits.x, splits.row, strict=True))
        for xi, ri in zip(x, row, strict=True)
    ]
    assert found.tolist() == expected


@pytest.mark.parametrize("exponent", [0, -400, 400])
@pytest.mark.parametrize("seed", range(20))
def test_a_shard_whose_slab_a_ball_misses_holds_no_avatar_within_it(
    seed: int, exponent: int
) -> None:
    # The count sends each query to the shards whose slab of the first coordinate its ball
    # may reach (`Splits.slabs`, at the canonical scale ``2^exponent`` of the coordinates,
    # where the split points are values as read): a shard a query is not sent to holds no
    # avatar within its threshold, avatars tied with a split point's value on either side
    # of it and dyadic thresholds that tie a gap exactly included.
    rng = np.random.default_rng(seed)
    n, dim = 120, 2
    raw = rng.integers(0, 5, size=(2 * n, dim)).astype(np.float64) / 4
    row = rng.permutation(n).astype(np.int64)
    parts = int(rng.integers(1, 8))
    picked = rng.choice(n, parts - 1)
    chosen = np.lexsort((row[picked], raw[n:][picked, 0]))
    splits = Splits(raw[n:][picked, 0][chosen], row[picked][chosen])
    shard = splits.assign(raw[n:, 0], row)
    queries, avatars = np.ldexp(raw[:n], exponent), np.ldexp(raw[n:], exponent)
    thresholds = engine.own_thresholds(queries, avatars, 0.0)
    routed = shards.queries_in_reach(queries, thresholds, splits.slabs(parts, dim, exponent))
    for s in range(parts):
        missed = np.setdiff1d(np.arange(n), routed[s])
        held = np.flatnonzero(shard == s)
        rows, cols = np.repeat(missed, len(held)), np.tile(held, len(missed))
        d2 = engine.squared_distances(queries, avatars, rows, cols)
        assert not (d2 <= thresholds[rows]).any()


@pytest.mark.parametrize(
    ("records", "files", "workers", "threads", "memory", "most_tasks"),
    [
        (2 * 10**7, 8, 2, 1, 10 << 30, 250),
        (10**9, 1000, 16, 32, 128 << 30, 100_000),  # the cost model of docs/scale.md
        (10**9, 1000, 4, 2, 4 << 30, 100_000),  # few threads: the memory sets the sizes
        (10**6, 4, 1, 1, 0, 80),  # no memory limit reported
        (10, 2, 4, 2, 1 << 30, 120),  # fewer records than tasks wanted
    ],
)
def test_the_task_graph_grows_with_files_and_threads_not_records(
    records: int, files: int, workers: int, threads: int, memory: int, most_tasks: int
) -> None:
    """Every bucket and shard fits a task's memory share, there are enough to keep every
    thread busy, and a run's tasks, known before it runs, are linear in files, buckets and
    shards (each exchange on Dask's P2P shuffle): 25,059 at 1e9 records in 1,000 files per
    side on 16 workers of 32 threads, where the task-based exchanges alone held 5.1 million."""
    specs = [WorkerSpec(nthreads=threads, memory_limit=memory)] * workers
    tasks = plan_tasks(records, records, 5, specs)
    most = records_per_task(5, specs)
    for parts in (tasks.buckets, tasks.shards):
        assert math.ceil(records / parts) <= most
        assert min(workers * threads, records) <= parts <= records
    assert math.ceil(records / tasks.shards) <= shards.SHARD_ROWS
    stages = tasks.tasks(files, files, verdict=True)
    assert stages.total <= most_tasks
    linear = 4 * (2 * files + tasks.buckets + tasks.shards) + 1
    for stage in (stages.read, stages.link, stages.count, stages.write):
        assert 0 < stage <= linear


def test_the_modelled_tasks_at_1e9_records() -> None:
    """docs/scale.md's figure, stage by stage."""
    specs = [WorkerSpec(nthreads=32, memory_limit=128 << 30)] * 16
    tasks = plan_tasks(10**9, 10**9, 5, specs)
    assert tasks == shards.TaskPlan(buckets=2048, shards=954)
    assert tasks.tasks(1000, 1000) == shards.StageTasks(
        read=4000, link=10145, count=6005, write=4909
    )
    assert tasks.tasks(1000, 1000).total == 25_059


@pytest.mark.parametrize("bins", [1, 2, 3, 8, 1024])
@pytest.mark.parametrize("seed", range(6))
def test_an_order_statistic_from_the_histogram_is_the_sorted_count(bins: int, seed: int) -> None:
    """Below the histogram's last bin from the histogram, at or above it by bisection: the
    ``k``-th smallest count either way, and at the first count at or above the bins too."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, [3, 12, 200][seed % 3], size=int(rng.integers(1, 40)))
    merged = histogram(counts, bins)
    ordered = np.sort(counts)
    found = [
        pipeline.order_statistic(k, merged, lambda v: count_at_most(counts, v))
        for k in range(len(counts))
    ]
    assert found == ordered.tolist()


def test_a_quartile_at_the_first_count_past_the_bins_is_not_taken_from_them() -> None:
    """Counts [0, 5, 7, 9] with one bin: Q1 interpolates between 0 and 5, so 3.75."""
    counts = np.array([0, 5, 7, 9])
    merged = histogram(counts, 1)
    assert merged.tolist() == [1, 3]

    def statistic(k: int) -> int:
        return pipeline.order_statistic(k, merged, lambda v: count_at_most(counts, v))

    assert statistic(1) == 5
    summary = summary_from_order_statistics(4, 1, statistic, min_rate=None)
    assert summary.local_cloaking_q1 == 3.75
    assert summary == summarize(pl.DataFrame({"local_cloaking": counts}))


@pytest.mark.parametrize(("counts", "rate"), [([0, 3, 5, 10], 75.0), ([0, 1], 50.0)])
def test_a_cluster_rate_equal_to_min_rate_passes_as_locally(counts: list[int], rate: float) -> None:
    ordered = sorted(counts)
    found = summary_from_order_statistics(
        len(counts), counts.count(0), ordered.__getitem__, min_rate=rate
    )
    assert found.hidden_rate == rate
    assert found.passed
    assert found == summarize(pl.DataFrame({"local_cloaking": counts}), min_rate=rate)


def test_the_local_dataset_path_fits_the_projection_file_by_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the cluster does, so both give the same counts: the fit of the concatenated frame
    differs by rounding, which splits exact ties otherwise (tie_tol=0 on a grid)."""
    rng = np.random.default_rng(0)
    n, features = 120, ["a", "b", "c"]
    left = pl.DataFrame(rng.integers(0, 3, (n, 3)).astype(float), schema=features)
    right = pl.DataFrame(rng.integers(0, 3, (n, 3)).astype(float), schema=features)
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    files = sorted((tmp_path / "o").iterdir())

    def reference(projection: phr.Projection) -> np.ndarray:
        names = projection.coordinate_columns()
        x = projection.transform(left).select(names).to_numpy()
        y = projection.transform(right).select(names).to_numpy()
        return brute_force_counts(x, y, 0.0)

    by_file = reference(phr.Projection.fit_partitioned(files, features=features, ncp=2))
    by_frame = reference(phr.Projection.fit(left, features=features, ncp=2))
    assert (by_file != by_frame).any()  # the case tells the two fits apart
    fitted: list[list[Path]] = []
    fit_files = phr.projection.ProjectedCoordinates.fit_files

    def spy(self: Any, paths: Any, tasks: Any = None) -> phr.Projection:
        fitted.append(list(paths))
        return fit_files(self, paths, tasks)

    monkeypatch.setattr(phr.projection.ProjectedCoordinates, "fit_files", spy)
    phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "out", features=features, ncp=2, tie_tol=0.0
    )
    assert fitted == [files]
    written = pl.read_parquet(tmp_path / "out")["local_cloaking"].to_numpy()
    assert written.tolist() == by_file.tolist()


def test_a_key_without_a_match_names_the_key_columns_never_the_originals_values(
    tmp_path: Path,
) -> None:
    """Each side's key columns in their quotes, and the other side's where they are named
    otherwise; an original's key values never, an avatar's as an example. The local read and
    the dataset's say it alike."""
    left, right = linked_case(60, seed=21)
    left = left.with_columns(site=pl.lit("a")).rename({"id": "pid"})
    right = right.with_columns(site=pl.lit("a")).rename({"id": "avatar id"})
    keys: dict[str, Any] = {"left_on": ["site", "pid"], "right_on": ["site", "avatar id"]}
    missing = right.filter(pl.col("avatar id") != 3)
    extra = pl.concat([right, right.head(1).with_columns(pl.col("avatar id") * 0 - 5)])
    cases = (
        (
            left,
            missing,
            "1 originals have no avatar with the same key 'site', 'pid' (the avatars' 'site', "
            "'avatar id'), its values not shown (they are the originals')",
        ),
        (
            left,
            extra,
            "1 avatars have no original with the same key 'site', 'avatar id' (the originals' "
            "'site', 'pid'), e.g. {'site': 'a', 'avatar id': -5}",
        ),
    )
    for k, (originals, avatars, message) in enumerate(cases):
        pattern = f"^{re.escape(message)}$"
        with pytest.raises(ComputeError, match=pattern) as raised:
            phr.local_cloaking(originals, avatars, coords=COORDS, **keys)
        assert "3" not in str(raised.value)
        folders = (
            write_files(originals, tmp_path / f"o{k}", 2),
            write_files(avatars, tmp_path / f"a{k}", 3),
        )
        with pytest.raises(ComputeError, match=pattern):
            phr.local_cloaking_to_parquet(*folders, tmp_path / "x", coords=COORDS, **keys)


def test_the_example_of_extra_and_orphan_keys_is_the_smallest(tmp_path: Path) -> None:
    """Locally, as on a cluster: the count of keys without a match, and the smallest of them
    (not the first in the files), whatever the cut of the link into pieces."""
    left, right = linked_case(90, seed=14)
    strays = [-3, -50, -7, -11, -23, -31, -2, -90, -64]
    extra = right.head(len(strays)).with_columns(id=pl.Series(strays))
    right = pl.concat([right, extra])
    write_files(left, tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 3)
    message = r"^9 avatars have no original with the same key 'id', e\.g\. \{'id': -90\}$"
    with pytest.raises(ComputeError, match=message):
        phr.local_cloaking(left, right, coords=COORDS, on="id")
    with pytest.raises(ComputeError, match=message):
        phr.local_cloaking_to_parquet(tmp_path / "o", tmp_path / "a", tmp_path / "x", on="id",
                                      coords=COORDS)  # fmt: skip
    lost = left["id"].head(9).to_list()
    orphans = left.with_columns(
        id=pl.when(pl.col("id").is_in(lost)).then(-pl.col("id") - 1000).otherwise("id")
    )
    with pytest.raises(ComputeError, match=r"^9 originals have no avatar .*values not shown"):
        phr.local_cloaking(orphans, right.head(90), coords=COORDS, on="id")  # not quoted
    # The pieces of a cluster's link, combined, report as the whole link does, though the
    # first piece with a problem does not always hold the smallest key.
    firsts = []
    for problem_left, problem_right in ((left, right), (orphans, right.head(90))):
        _, whole = link_by_key(problem_left, problem_right, ["id"], ["id"])
        for buckets in range(2, 8):
            pieces = [
                link_by_key(
                    problem_left.filter(pl.col("id").hash(seed=0) % buckets == h),
                    problem_right.filter(pl.col("id").hash(seed=0) % buckets == h),
                    ["id"],
                    ["id"],
                )[1]
                for h in range(buckets)
            ]
            assert KeyProblems.combine(pieces) == whole
            first = next(p for p in pieces if p)
            firsts.append(
                (first.extra_example or first.orphan_example)
                != (whole.extra_example or whole.orphan_example)
            )
    assert sum(firsts) >= 4
