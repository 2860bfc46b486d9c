"""`local_cloaking_to_parquet` on a Dask cluster: the workers read, link, count and write;
the parts are bit for bit those of the local engine, the errors those of the local link,
and a worker killed mid-run changes nothing."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.exceptions import (
    ComputeError,
    DuplicateError,
    NoDataError,
    SchemaError,
    ShapeError,
)
from polars.testing import assert_frame_equal

import polars_hidden_rate as phr
from polars_hidden_rate.cluster import pipeline
from polars_hidden_rate.cluster.shards import TaskPlan
from polars_hidden_rate.frames import open_dataset
from polars_hidden_rate.measures.summary import summarize
from polars_hidden_rate.outputs import staged_directory
from polars_hidden_rate.plan import plan
from polars_hidden_rate.tasks import DaskTasks, p2p_disk_setting, received, tasks_run
from tests.helpers import (
    COORDS,
    adversarial,
    brute_force_counts,
    changed,
    linked_case,
    local_cluster,
    reverse_columns,
    siblings,
    slow_down,
    tasks_done,
    write_files,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def threads_client() -> Iterator[Any]:
    with local_cluster(processes=False) as client:
        yield client


def frames(
    kind: str, n: int, seed: int
) -> tuple[pl.DataFrame, pl.DataFrame, np.ndarray, np.ndarray]:
    """Adversarial linked data as frames with an `id` (avatars shuffled) and a text column."""
    originals, avatars = adversarial(kind, n, seed)
    ids = np.random.default_rng(seed).permutation(n) * 7 + 3
    left = pl.DataFrame(
        {"id": ids, **dict(zip(COORDS, originals.T, strict=True)), "note": ids.astype(str)}
    )
    right = pl.DataFrame({"id": ids, **dict(zip(COORDS, avatars.T, strict=True))})
    return left, right.sample(fraction=1.0, shuffle=True, seed=seed), originals, avatars


def run_with_tasks(
    client: Any, originals: Path, avatars: Path, output: Path, tasks: Any, **options: Any
) -> phr.measures.summary.CloakingSummary:
    """The cluster path with a chosen number of buckets, blocks and shards."""
    left, right = open_dataset(originals, "originals"), open_dataset(avatars, "avatars")
    request = plan(left.scan(), right.scan(), {**options, "cluster": client})  # type: ignore[typeddict-item]
    with staged_directory(output) as staging:
        return pipeline.count_and_write(request, left, right, staging, None, tasks=tasks)


@pytest.mark.parametrize("kind", ["gaussian", "grid", "duplicates", "offset", "dyadic"])
def test_parts_are_bit_identical_to_the_local_engine(
    threads_client: Any, tmp_path: Path, kind: str
) -> None:
    left, right, originals, avatars = frames(kind, 400, seed=1)
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 4)
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")

    summary = phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "out", coords=COORDS, on="id",
        cluster=threads_client,
    )  # fmt: skip

    assert siblings(tmp_path / "out") == [f"part-0000{k}.parquet" for k in range(3)]
    assert_frame_equal(pl.read_parquet(tmp_path / "out"), expected)
    assert summary == summarize(expected)
    order = np.argsort(left["id"].to_numpy())
    by_id = pl.read_parquet(tmp_path / "out").sort("id")["local_cloaking"].to_numpy()
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(len(order))
    assert by_id[ranks].tolist() == brute_force_counts(originals, avatars, 1e-9).tolist()
    assert siblings(tmp_path) == ["a", "o", "out"]


@pytest.mark.parametrize(
    "tasks",
    [
        TaskPlan(buckets=1, shards=1),
        TaskPlan(buckets=5, shards=3),
        TaskPlan(buckets=3, shards=60),  # pieces and shards left empty
    ],
)
@pytest.mark.parametrize("kind", ["grid", "offset"])
def test_any_cut_gives_the_local_counts(
    threads_client: Any, tmp_path: Path, tasks: Any, kind: str
) -> None:
    left, right, _, _ = frames(kind, 150, seed=2)
    write_files(left, tmp_path / "o", 4)  # one file is empty
    write_files(right.head(0), tmp_path / "e", 1)
    write_files(right, tmp_path / "a", 2)
    files = [*sorted((tmp_path / "a").iterdir()), tmp_path / "e" / "part000.parquet"]
    for tie_tol in (0.0, 1e-9):
        expected = phr.local_cloaking(left, right, coords=COORDS, on="id", tie_tol=tie_tol)
        out = tmp_path / f"out{tie_tol}"
        left_set, right_set = open_dataset(tmp_path / "o", "o"), open_dataset(files, "a")
        request = plan(
            left_set.scan(),
            right_set.scan(),
            {"coords": COORDS, "on": "id", "tie_tol": tie_tol, "cluster": threads_client},
        )
        with staged_directory(out) as staging:
            summary = pipeline.count_and_write(
                request, left_set, right_set, staging, None, tasks=tasks
            )
        assert_frame_equal(pl.read_parquet(out), expected)
        assert summary == summarize(expected)


def test_row_order_and_keys_of_other_names_and_types(threads_client: Any, tmp_path: Path) -> None:
    left, right, _, _ = frames("grid", 200, seed=3)
    right = right.sort("id")
    left = left.sort("id")
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    expected = phr.local_cloaking(left, right, coords=COORDS)
    phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "rows", coords=COORDS, cluster=threads_client
    )
    assert_frame_equal(pl.read_parquet(tmp_path / "rows"), expected)

    renamed = right.select(pl.col("id").cast(pl.Int32).alias("key"), *COORDS)
    write_files(renamed, tmp_path / "k", 2)
    phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "k", tmp_path / "keys", coords=COORDS, left_on="id",
        right_on="key", cluster=threads_client,
    )  # fmt: skip
    expected = phr.local_cloaking(left, renamed, coords=COORDS, left_on="id", right_on="key")
    assert_frame_equal(pl.read_parquet(tmp_path / "keys"), expected)

    texts = left.with_columns(pl.col("note").cast(pl.Categorical))
    avatars = right.with_columns(note=pl.col("id").cast(pl.String))
    write_files(texts, tmp_path / "t", 2)
    write_files(avatars, tmp_path / "ta", 3)
    phr.local_cloaking_to_parquet(
        tmp_path / "t", tmp_path / "ta", tmp_path / "text", coords=COORDS, on="note",
        cluster=threads_client,
    )  # fmt: skip
    expected = phr.local_cloaking(texts, avatars, coords=COORDS, on="note")
    assert_frame_equal(pl.read_parquet(tmp_path / "text"), expected)


def test_quartiles_above_the_histogram_come_from_bisection(
    threads_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right, _, _ = frames("duplicates", 300, seed=4)
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    expected = summarize(phr.local_cloaking(left, right, coords=COORDS, on="id"))
    assert expected.local_cloaking_q3 > 2
    for bins in (1, 2, 1024):
        monkeypatch.setattr(pipeline, "HISTOGRAM_BINS", bins)
        summary = phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / f"out{bins}", coords=COORDS, on="id",
            cluster=threads_client,
        )  # fmt: skip
        assert summary == expected


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ("duplicate avatar", DuplicateError, r"not unique in avatars: 2 rows share a key"),
        ("missing avatar", ComputeError, r"1 originals have no avatar with the same key 'id', "),
        ("extra avatar", ComputeError, r"1 avatars have no original with the same key 'id', "),
        ("null avatar key", ComputeError, r"key \['id'\] of avatars is null in 1 rows"),
        ("nan coordinate", ComputeError, r"coords of avatars have missing values: 'Dim2' \(1 NaN"),
        (
            "wide integer coordinate",
            ComputeError,
            r"coords column 'Dim1' of avatars has 1 integer value\(s\) beyond 2\^53",
        ),
        ("empty", NoDataError, "avatars is empty"),
    ],
)
def test_bad_data_is_reported_as_locally_with_an_example_key(
    threads_client: Any, tmp_path: Path, change: str, error: type[Exception], match: str
) -> None:
    left, right, _, _ = frames("gaussian", 120, seed=5)
    right = changed(right, change)
    write_files(left, tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 3)
    with pytest.raises(error, match=match):
        phr.local_cloaking(left, right, coords=COORDS, on="id")
    with pytest.raises(error, match=match) as raised:
        phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / "out", coords=COORDS, on="id",
            cluster=threads_client,
        )  # fmt: skip
    if change == "missing avatar":  # an original's key: a real record's value, never quoted
        assert "'id': " not in str(raised.value)
        assert "its values not shown" in str(raised.value)
    elif "key" in match and "null" not in match:
        example = int(str(raised.value).rsplit("'id': ", 1)[1].rstrip("}"))
        shared = right.filter(pl.col("id").is_duplicated())["id"].to_list()
        lonely = set(left["id"]) ^ set(right["id"])
        assert example in (shared if change == "duplicate avatar" else lonely)
    assert siblings(tmp_path) == ["a", "o"]


@pytest.mark.parametrize("problem", ["duplicates", "orphans", "extras", "nulls"])
def test_many_key_problems_give_the_local_message_word_for_word(
    threads_client: Any, tmp_path: Path, problem: str
) -> None:
    """Several bad keys spread over files and buckets: the count and the example (the
    smallest key, or the first null in row order) are the local ones, whatever the cut."""
    left, right, _, _ = frames("gaussian", 150, seed=9)
    row = pl.int_range(pl.len())
    bad = row.is_in([7, 40, 41, 90, 133])
    if problem == "duplicates":
        right = right.with_columns(pl.when(bad).then(pl.col("id").shift(1)).otherwise("id"))
    elif problem == "nulls":
        right = right.with_columns(pl.when(bad).then(None).otherwise("id").alias("id"))
    elif problem == "orphans":
        right = right.with_columns(pl.when(bad).then(-pl.col("id")).otherwise("id").alias("id"))
    else:
        right = pl.concat([right, right.filter(bad).with_columns(-pl.col("id"))])
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 4)
    with pytest.raises((ComputeError, DuplicateError)) as local:
        phr.local_cloaking(left, right, coords=COORDS, on="id")
    for buckets in (1, 2, 5):
        tasks = TaskPlan(buckets=buckets, shards=2)
        with pytest.raises(type(local.value)) as cluster:
            run_with_tasks(
                threads_client, tmp_path / "o", tmp_path / "a", tmp_path / f"out{buckets}", tasks,
                coords=COORDS, on="id",
            )  # fmt: skip
        assert str(cluster.value) == str(local.value)


@pytest.mark.parametrize("side", ["originals", "avatars"])
def test_a_composite_key_partly_null_in_several_files_is_reported_as_locally(
    threads_client: Any, tmp_path: Path, side: str
) -> None:
    """The null key's example is the first in row order, so from the first file holding one:
    each file's first differs here (a null ``part`` in files 0 and 1, a null ``id`` in 2, 3)."""
    left, right, _, _ = frames("gaussian", 120, seed=11)
    left, right = (frame.with_columns(part=pl.col("id") % 4) for frame in (left, right))
    row = pl.int_range(pl.len())
    holed = (left if side == "originals" else right).with_columns(
        id=pl.when(row.is_in([70, 100])).then(None).otherwise("id"),
        part=pl.when(row.is_in([10, 40])).then(None).otherwise("part"),
    )
    left, right = (holed, right) if side == "originals" else (left, holed)
    write_files(left, tmp_path / "o", 4)
    write_files(right, tmp_path / "a", 4)
    keys = ["id", "part"]
    with pytest.raises(ComputeError, match=rf"of {side} is null in 4 rows") as local:
        phr.local_cloaking(left, right, coords=COORDS, on=keys)
    example = (  # the originals' values are never quoted; the avatars', released, are
        "its values not shown (they are the originals')"
        if side == "originals"
        else f"e.g. {{'id': {holed['id'][10]}, 'part': None}}"
    )
    assert str(local.value).endswith(f"{example}; every record needs a key")
    with pytest.raises(ComputeError) as on_files:
        phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / "local", coords=COORDS, on=keys
        )
    assert str(on_files.value) == str(local.value)
    for buckets in (1, 3):
        tasks = TaskPlan(buckets=buckets, shards=2)
        with pytest.raises(ComputeError) as cluster:
            run_with_tasks(
                threads_client, tmp_path / "o", tmp_path / "a", tmp_path / f"out{buckets}", tasks,
                coords=COORDS, on=keys,
            )  # fmt: skip
        assert str(cluster.value) == str(local.value)


def test_float_keys_match_as_locally_signed_zeros_and_nan(
    threads_client: Any, tmp_path: Path
) -> None:
    """-0.0 and 0.0 are one key, and NaN is one key, locally: so on the cluster too, whatever
    bucket their hashes send them to."""
    left, right, _, _ = frames("grid", 60, seed=10)
    for side, zero in ((0, 0.0), (1, -0.0)):  # the avatars hold the other sign of zero
        frame = (left, right)[side].with_columns(
            pl.col("id")
            .cast(pl.Float64)
            .replace_strict({3: zero, 10: float("nan")}, default=pl.col("id"))
        )
        left, right = (frame, right) if side == 0 else (left, frame)
    write_files(left, tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 3)
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    for buckets in (1, 4):
        tasks = TaskPlan(buckets=buckets, shards=2)
        out = tmp_path / f"out{buckets}"
        run_with_tasks(threads_client, tmp_path / "o", tmp_path / "a", out, tasks,
                       coords=COORDS, on="id")  # fmt: skip
        assert_frame_equal(pl.read_parquet(out), expected)


def test_duplicated_originals_come_before_avatar_problems(
    threads_client: Any, tmp_path: Path
) -> None:
    left, right, _, _ = frames("grid", 80, seed=6)
    left = left.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(pl.col("id").get(4)).otherwise("id")
    )
    right = changed(right, "null avatar key")
    write_files(left, tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 2)
    match = "not unique in originals: 2 rows share a key"
    with pytest.raises(DuplicateError, match=match):
        phr.local_cloaking(left, right, coords=COORDS, on="id")
    with pytest.raises(DuplicateError, match=match):
        phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / "out", coords=COORDS, on="id",
            cluster=threads_client,
        )  # fmt: skip


def test_row_order_needs_equal_heights(threads_client: Any, tmp_path: Path) -> None:
    left, right, _, _ = frames("grid", 50, seed=7)
    write_files(left, tmp_path / "o", 2)
    write_files(right.head(49), tmp_path / "a", 2)
    with pytest.raises(ShapeError, match="originals have 50 rows but avatars have 49"):
        phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / "out", coords=COORDS, cluster=threads_client
        )
    assert siblings(tmp_path) == ["a", "o"]


def test_projected_features_give_the_local_counts(threads_client: Any, tmp_path: Path) -> None:
    left, right, _, _ = frames("gaussian", 240, seed=8)
    left = left.with_columns(stage=(pl.col("id") % 3).cast(pl.String))
    right = right.with_columns(stage=(pl.col("id") % 4).cast(pl.String))
    write_files(left.drop("note"), tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    for ncp in (2, 4):
        # The dataset paths fit file by file, a frame's fit differs by rounding: the local
        # dataset run is the exact reference, the frame's counts a check of the contract.
        local = phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / f"local{ncp}", on="id", ncp=ncp
        )
        out = tmp_path / f"out{ncp}"
        summary = phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", out, on="id", ncp=ncp, cluster=threads_client
        )
        assert_frame_equal(pl.read_parquet(out), pl.read_parquet(tmp_path / f"local{ncp}"))
        assert summary == local
        expected = phr.local_cloaking(left.drop("note"), right, on="id", ncp=ncp)
        assert_frame_equal(pl.read_parquet(out), expected)


def test_files_with_their_columns_in_another_order_give_the_local_parts(
    threads_client: Any, tmp_path: Path
) -> None:
    """Read by name on both paths, the parts in the first file's column order; a file with
    another type is refused with the local message."""
    left, right, _, _ = frames("gaussian", 200, seed=9)
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    reverse_columns(tmp_path / "o", "part002.parquet")
    reverse_columns(tmp_path / "a", "part001.parquet")
    summaries = {
        where: phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / where, coords=COORDS, on="id", **extra
        )
        for where, extra in (("local", {}), ("cluster", {"cluster": threads_client}))
    }
    assert summaries["cluster"] == summaries["local"]
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    for where in summaries:
        assert_frame_equal(pl.read_parquet(tmp_path / where), expected)
        for part in sorted((tmp_path / where).iterdir()):
            assert pl.read_parquet_schema(part) == expected.schema
    retyped = pl.read_parquet(tmp_path / "o" / "part001.parquet").with_columns(pl.col("id") * 1.0)
    retyped.write_parquet(tmp_path / "o" / "part001.parquet")
    refusals = []
    for where, extra in (("local", {}), ("cluster", {"cluster": threads_client})):
        with pytest.raises(SchemaError, match=r"has column 'id' as Float64") as raised:
            phr.local_cloaking_to_parquet(
                tmp_path / "o", tmp_path / "a", tmp_path / f"x{where}", coords=COORDS, on="id",
                **extra,
            )  # fmt: skip
        refusals.append(str(raised.value))
    assert refusals[0] == refusals[1]


@pytest.mark.filterwarnings("error::FutureWarning")
def test_a_run_raises_no_future_warning(threads_client: Any, tmp_path: Path) -> None:
    """The P2P setting by the name the installed Dask reads (it renamed it), so that a run
    with warnings as errors goes through: a name that Dask knows, not a deprecated one."""
    import dask

    setting = p2p_disk_setting()
    assert setting not in dask.config.deprecations
    assert dask.config.get(setting) is True  # P2P's default, which the exchanges turn off
    left, right, _, _ = frames("gaussian", 120, seed=10)
    write_files(left, tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 2)
    summary = phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "out", coords=COORDS, on="id",
        cluster=threads_client,
    )  # fmt: skip
    assert summary == summarize(phr.local_cloaking(left, right, coords=COORDS, on="id"))


def test_missing_avatar_features_are_named_as_locally(threads_client: Any, tmp_path: Path) -> None:
    left, right, _, _ = frames("gaussian", 90, seed=10)
    right = changed(right, "nan coordinate")
    write_files(left.drop("note"), tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 2)
    match = r"features of avatars have missing values: 'Dim2' \(1 NaN\)"
    with pytest.raises(ComputeError, match=match):
        phr.local_cloaking(left.drop("note"), right, on="id", ncp=2)
    with pytest.raises(ComputeError, match=match):
        phr.local_cloaking_to_parquet(
            tmp_path / "o", tmp_path / "a", tmp_path / "out", on="id", ncp=2,
            cluster=threads_client,
        )  # fmt: skip
    assert siblings(tmp_path) == ["a", "o"]


@pytest.fixture
def process_client() -> Iterator[Any]:
    with local_cluster(processes=True) as client:
        yield client


def test_a_worker_killed_mid_run_changes_nothing(process_client: Any, tmp_path: Path) -> None:
    client = process_client
    left, right, _, _ = frames("gaussian", 600, seed=9)
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 3)
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    client.run(slow_down("polars_hidden_rate.engine", "within_result", 0.25))
    tasks = TaskPlan(buckets=3, shards=4)
    outcome: dict[str, Any] = {}

    def measure() -> None:
        try:
            outcome["summary"] = run_with_tasks(
                client, tmp_path / "o", tmp_path / "a", tmp_path / "out", tasks,
                coords=COORDS, on="id",
            )  # fmt: skip
        except BaseException as exc:
            outcome["error"] = exc

    runner = threading.Thread(target=measure)
    runner.start()
    deadline = time.monotonic() + 180  # generous: a loaded machine starts tasks late
    while client.run_on_scheduler(tasks_done, prefix="phr-count-within") == 0:
        assert runner.is_alive(), f"the run ended early: {outcome.get('error')!r}"
        assert time.monotonic() < deadline, "no count finished within 180 s"
        time.sleep(0.02)
    # Kill a worker that holds or is counting a shard: its partial counts, its tree and the
    # shard's inputs (avatars and queries) are lost with it.
    held, processing = client.has_what(), client.processing()
    victim = next(
        address
        for address, keys in held.items()
        if any(
            str(key).startswith("phr-count-within-")
            for key in [*keys, *processing.get(address, ())]
        )
    )
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    assert runner.is_alive(), "the run ended before the worker was killed"
    runner.join(timeout=180)
    assert not runner.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert_frame_equal(pl.read_parquet(tmp_path / "out"), expected)
    assert outcome["summary"] == summarize(expected)
    assert siblings(tmp_path / "out") == [f"part-0000{k}.parquet" for k in range(3)]


@pytest.mark.parametrize("sample", [None, 100])
def test_the_cluster_judges_the_link_as_locally(
    threads_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample: int | None
) -> None:
    # Issue 19 on a cluster: the link test on the very records the local path tests (all of
    # them, or its seeded sample), own copies on the coordinates, a random link refused.
    from polars_hidden_rate.link import link_test as linkage
    from polars_hidden_rate.link.errors import UnlinkedAvatarsError
    from polars_hidden_rate.link.verdict import Verdict
    from polars_hidden_rate.to_parquet import plan_dataset

    if sample is not None:
        monkeypatch.setattr(linkage, "SAMPLE", sample)
    left, right = linked_case(300, seed=31, kind="gaussian")
    copied = left.select("id", *COORDS).head(40)  # forty avatars copy their original
    right = pl.concat([right.filter(~pl.col("id").is_in(copied["id"].implode())), copied])
    originals = write_files(left, tmp_path / "o", 3)
    avatars = write_files(right.sample(fraction=1.0, shuffle=True, seed=2), tmp_path / "a", 2)

    def judged(name: str, **options: Any) -> phr.measures.summary.CloakingSummary:
        job = plan_dataset(
            originals,
            avatars,
            tmp_path / name,
            coords=COORDS,
            on="id",
            verdict=Verdict(max_own_copies=10.0),
            **options,
        )
        with staged_directory(job.output) as staging:
            return job.write(staging)

    local = judged("local")
    remote = judged("remote", cluster=threads_client)
    assert local.evidence is not None
    assert remote.evidence is not None
    assert remote.evidence.link == local.evidence.link
    assert remote.evidence.link.n == (300 if sample is None else sample)
    assert remote.evidence.own_copies == local.evidence.own_copies == 40
    assert remote.evidence.hidden_by_ties_only == local.evidence.hidden_by_ties_only
    assert local.evidence.hidden_by_ties_only is not None
    assert not remote.passed  # 13.3 % own copies > 10 %
    assert remote.failures == local.failures
    grid_left, grid_right = linked_case(300, seed=32)  # independent avatars: no link at all
    unlinked_o = write_files(grid_left, tmp_path / "go", 2)
    unlinked_a = write_files(grid_right, tmp_path / "ga", 2)
    job = plan_dataset(
        unlinked_o,
        unlinked_a,
        tmp_path / "g",
        coords=COORDS,
        on="id",
        cluster=threads_client,
        verdict=Verdict(),
    )
    with pytest.raises(UnlinkedAvatarsError), staged_directory(job.output) as staging:
        job.write(staging)
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("space", ["features", "fewer coords"])
def test_the_cluster_counts_copies_and_ties_only_beyond_the_coordinates(
    threads_client: Any, tmp_path: Path, space: str
) -> None:
    """Issue 19 on a cluster, where the raw features never meet in a link bucket: own copies
    on the projected features, or on every coordinate given when ``ncp`` counts on fewer, as
    the local path finds them; and the records hidden by ties only. Grid data: exact ties
    everywhere; 30 avatars copy their original; 20 more equal it on the first two coordinates
    only, which a comparison of the coordinates read would take for copies."""
    from polars_hidden_rate.link.verdict import Verdict
    from polars_hidden_rate.to_parquet import plan_dataset

    left, right = linked_case(300, seed=41)
    right = right.sort("id")
    ordered = left.sort("id")
    copied = ordered.head(30).select("id", *COORDS)
    near = ordered.slice(30, 20).select("id", *COORDS).with_columns(pl.col("Dim3") + 7.0)
    keep = ~pl.col("id").is_in(pl.concat([copied, near])["id"].implode())
    right = pl.concat([right.filter(keep), copied, near])
    originals = write_files(left, tmp_path / "o", 3)
    avatars = write_files(right.sample(fraction=1.0, shuffle=True, seed=3), tmp_path / "a", 2)
    options: dict[str, Any] = (
        {"features": COORDS, "ncp": 2} if space == "features" else {"coords": COORDS, "ncp": 2}
    )

    def judged(name: str, **extra: Any) -> phr.measures.summary.CloakingSummary:
        job = plan_dataset(
            originals,
            avatars,
            tmp_path / name,
            on="id",
            verdict=Verdict(max_own_copies=100.0, allow_unlinked=True),
            **options,
            **extra,
        )
        with staged_directory(job.output) as staging:
            return job.write(staging)

    local = judged("local")
    remote = judged("remote", cluster=threads_client)
    assert local.evidence is not None
    assert remote.evidence is not None
    assert remote.evidence.own_copies == local.evidence.own_copies
    assert local.evidence.own_copies is not None
    assert local.evidence.own_copies >= 30  # the copies (a grid may add its own)
    assert local.evidence.own_copies < 50  # not the near copies
    assert remote.evidence.copy_features == local.evidence.copy_features == tuple(COORDS)
    assert remote.evidence.hidden_by_ties_only == local.evidence.hidden_by_ties_only
    assert local.evidence.hidden_by_ties_only is not None
    assert local.evidence.hidden_by_ties_only > 0  # a grid ties


@pytest.mark.parametrize(
    ("files", "tasks"),
    [
        ((3, 2), TaskPlan(buckets=3, shards=4)),
        ((2, 3), TaskPlan(buckets=1, shards=2)),  # the link's exchange to one consumer
        ((1, 1), TaskPlan(buckets=2, shards=1)),
    ],
)
def test_a_run_submits_the_tasks_its_plan_says(
    threads_client: Any, tmp_path: Path, files: tuple[int, int], tasks: TaskPlan
) -> None:
    """The scheduler runs, stage by stage summed, the tasks `TaskPlan.tasks` models, and
    each exchange in the tasks of Dask's P2P shuffle: none per pair."""
    left, right, _, _ = frames("gaussian", 300, seed=4)
    write_files(left, tmp_path / "o", files[0])
    write_files(right, tmp_path / "a", files[1])
    with tasks_run(threads_client) as ran:
        run_with_tasks(
            threads_client, tmp_path / "o", tmp_path / "a", tmp_path / "out", tasks,
            coords=COORDS, on="id",
        )  # fmt: skip
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    assert_frame_equal(pl.read_parquet(tmp_path / "out"), expected)
    assert sum(ran.values()) == tasks.tasks(*files).total, ran
    assert ran.get("rechunk-transfer", 0) <= 2 * sum(files) + tasks.buckets + tasks.shards
    assert not any("piece-" in prefix or prefix == "getitem" for prefix in ran), ran


def test_the_exchanges_keep_their_pieces_in_memory(
    threads_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # P2P's disk buffer is its default: the exchanges ask for memory (docs/scale.md: the disk
    # round trip cost 11 of 77 s at 2e7), and still move every piece to its consumer in order.
    # What P2P reads of the setting when it builds the rechunk (by the name this Dask reads:
    # its layer takes it as `disk` today, its transfer tasks did in 2024.1).
    import dask

    asked: list[object] = []
    real = dask.config.get

    def recording(key: str, *args: Any, **kwargs: Any) -> Any:
        value = real(key, *args, **kwargs)
        if key == p2p_disk_setting():
            asked.append(value)
        return value

    monkeypatch.setattr(dask.config, "get", recording)
    tasks = DaskTasks(threads_client, "phr-test")
    producers = [threads_client.submit(lambda p=p: [(p, c) for c in range(3)]) for p in range(4)]
    columns = tasks.exchange("pieces", producers, 3, lambda result: result)
    assert [received(column) for column in threads_client.gather(columns)] == [
        [(p, c) for p in range(4)] for c in range(3)
    ]
    assert asked
    assert all(value is False for value in asked)


def test_a_bucket_that_failed_to_link_sends_every_shard_nothing() -> None:
    """Without a verdict the count's exchange starts before the driver has summed the key
    problems: a bucket whose link failed sends each shard an empty input of the right
    width (and the driver raises its problems before any count is used)."""
    from polars_hidden_rate.cluster.pipeline_tasks import Linked, route_to_shards
    from polars_hidden_rate.frames import KeyProblems

    failed = Linked(KeyProblems((("id",), ("id",)), duplicated=(2, 0)))
    inputs = route_to_shards(failed, [None] * 3, dim=4)
    assert len(inputs) == 3
    for piece in inputs:
        assert piece.avatars.shape == (0, 4)
        assert piece.owners.queries.shape == piece.others.queries.shape == (0, 4)
        assert len(piece.owners.original_id) == len(piece.others.thresholds) == 0


def test_an_exchanged_frame_comes_back_bit_for_bit() -> None:
    """A link piece's keys (a Polars frame) cross P2P pickled in one blob with the default
    protocol, as P2P sends the cells of an object array: every name, dtype, null and float
    bit (NaN, -0.0) comes back, from frames of several chunks too, and Dask's memory limits
    see the piece's size."""
    import pickle
    import sys

    from polars_hidden_rate.tasks import Piece

    n = 50_000
    part = pl.DataFrame(
        {
            "key": pl.Series(np.arange(n) * 7, dtype=pl.Int64),
            "small": pl.Series(np.arange(n) % 250, dtype=pl.UInt8),
            "x": np.where(np.arange(n) % 3 == 0, -0.0, np.arange(n) / 3.0),
            "nan": np.full(n, np.nan),
            "gaps": pl.Series([None if i % 5 == 0 else i for i in range(n)], dtype=pl.Int64),
            "text": [None if i % 7 == 0 else f"k{i}" for i in range(n)],
            "category": pl.Series([f"c{i % 3}" for i in range(n)], dtype=pl.Categorical),
        }
    )
    frame = pl.concat([part, part.reverse()], rechunk=False)  # two chunks
    back = pickle.loads(pickle.dumps([Piece(frame, 123)]))[0]
    assert back.nbytes == 123
    assert sys.getsizeof(back) >= 123
    assert back.value.schema == frame.schema
    assert_frame_equal(back.value, frame)
    for name in ("x", "nan"):
        bits = back.value.get_column(name).to_numpy().view(np.int64)
        assert np.array_equal(bits, frame.get_column(name).to_numpy().view(np.int64))
