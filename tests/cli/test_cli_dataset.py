"""`hidden-rate check` from directories of parquet files, and on a Dask cluster
(`--cluster`, `--cluster-file`), into a directory of parts: exit codes 0/1/2 as ever."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import polars_hidden_rate as phr
from polars_hidden_rate import cli
from polars_hidden_rate.cluster import client as cluster_client
from polars_hidden_rate.measures.summary import summarize
from tests.helpers import COORDS, counts_of, linked_case, local_cluster, siblings, write_files
from tests.paused_run import PausedRun

SCRIPT = Path(sys.executable).with_name("hidden-rate")


def hidden_rate_cli(
    *args: str | Path, cwd: Path | None = None, umask: int = 0o022
) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    return subprocess.run(
        [str(SCRIPT), "check", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        umask=umask,
    )


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Any]:
    left, right = linked_case(200, seed=11, kind="gaussian")
    write_files(left, tmp_path / "o", 3)
    write_files(left, tmp_path / "o2", 2)  # the same records in 2 files: another run's output
    write_files(right, tmp_path / "a", 2)
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    assert 0 < summarize(expected).hidden_rate < 100  # the gate can pass and fail
    return {
        "root": tmp_path,
        "o": tmp_path / "o",
        "o2": tmp_path / "o2",
        "a": tmp_path / "a",
        "expected": expected,
    }


def options(*extra: str) -> list[str]:
    return ["--on", "id", "--coords", ",".join(COORDS), "--format", "json", *extra]


def test_directories_in_a_directory_of_parts_out(folders: dict[str, Any]) -> None:
    out = folders["root"] / "out"
    done = hidden_rate_cli(folders["o"], folders["a"], *options("--output", str(out)))
    assert done.returncode == 0, done.stderr
    assert_frame_equal(pl.read_parquet(out), folders["expected"])
    assert counts_of(json.loads(done.stdout)) == counts_of(summarize(folders["expected"]))
    assert siblings(out) == [f"part-0000{k}.parquet" for k in range(3)]

    below = hidden_rate_cli(
        folders["o"],
        folders["a"],
        *options("--output", str(out), "--overwrite", "--min-rate", "100"),
    )
    assert below.returncode == 1, below.stderr
    assert not json.loads(below.stdout)["passed"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--output", "{root}/o/part000.parquet"], "is or holds the input"),
        (["--output", "{root}/a", "--overwrite"], "is or holds the input"),
        ([], "give --output DIR"),
        (["--output", "{root}/exists"], "give --overwrite to replace it"),
        (["--output", "{root}/out", "--on", "nope"], "key column 'nope' not found"),
        (["--output", "{root}/out", "--cluster-file", "{root}/none.json"], "--cluster-file not"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    folders: dict[str, Any], arguments: list[str], message: str
) -> None:
    root = folders["root"]
    (root / "exists").mkdir()
    arguments = [a.format(root=root) for a in arguments]
    done = hidden_rate_cli(folders["o"], folders["a"], *options(*arguments))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert message in done.stderr
    assert siblings(root) == ["a", "exists", "o", "o2"]


def test_duplicated_keys_exit_2_with_an_example_key(tmp_path: Path) -> None:
    left, right = linked_case(60, seed=12)
    right = right.with_columns(
        pl.when(pl.int_range(pl.len()) == 2).then(pl.col("id").get(3)).otherwise("id")
    )
    write_files(left, tmp_path / "o", 2)
    write_files(right, tmp_path / "a", 2)
    done = hidden_rate_cli(tmp_path / "o", tmp_path / "a", *options("--output", "out"))
    assert done.returncode == 2
    assert "not unique in avatars: 2 rows share a key, e.g. {'id': " in done.stderr
    assert siblings(tmp_path) == ["a", "o"]


def test_overwrite_is_for_a_directory_of_parts(folders: dict[str, Any]) -> None:
    file_inputs = [folders["o"] / "part000.parquet", folders["a"] / "part000.parquet"]
    done = hidden_rate_cli(*file_inputs, *options("--output", "x.parquet", "--overwrite"))
    assert done.returncode == 2
    assert "--overwrite replaces an --output directory" in done.stderr


def test_an_unreachable_scheduler_exits_2(
    folders: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr(cluster_client, "CONNECT_TIMEOUT", "0.5s")
    out = folders["root"] / "out"
    arguments = ["check", str(folders["o"]), str(folders["a"]), *options("--output", str(out))]
    assert cli.main([*arguments, "--cluster", "tcp://127.0.0.1:9"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("hidden-rate: error: cannot reach the Dask scheduler")
    assert error.count("\n") == 1
    assert not out.exists()


@pytest.fixture(scope="module")
def tcp_cluster() -> Iterator[Any]:
    """Workers in this process, behind a scheduler the `hidden-rate` process can reach."""
    with local_cluster(processes=False, protocol="tcp", host="127.0.0.1") as client:
        yield client


@pytest.mark.slow
def test_check_on_a_cluster_by_address_and_by_file(
    tcp_cluster: Any, folders: dict[str, Any]
) -> None:
    root = folders["root"]
    address = tcp_cluster.scheduler.address
    done = hidden_rate_cli(
        folders["o"], folders["a"], *options("--output", str(root / "by-address")),
        "--cluster", address,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_frame_equal(pl.read_parquet(root / "by-address"), folders["expected"])
    assert counts_of(json.loads(done.stdout)) == counts_of(summarize(folders["expected"]))

    # What `dask scheduler --scheduler-file` writes, of which a client reads the address.
    (root / "scheduler.json").write_text(json.dumps({"type": "Scheduler", "address": address}))
    done = hidden_rate_cli(
        folders["o"], folders["a"], *options("--output", str(root / "by-file")),
        "--cluster-file", str(root / "scheduler.json"), "--min-rate", "100",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert not json.loads(done.stdout)["passed"]
    assert_frame_equal(pl.read_parquet(root / "by-file"), folders["expected"])

    # Paths relative to the command's folder, which is not the workers' (they run here).
    assert Path.cwd() != root
    done = hidden_rate_cli(
        "o", "a", *options("--output", "relative"), "--cluster", address, cwd=root
    )
    assert done.returncode == 0, done.stderr
    assert_frame_equal(pl.read_parquet(root / "relative"), folders["expected"])


def _provenance_of_parts(out: Path) -> dict[str, Any]:
    """The provenance block of the parts of ``out``: one, the same in every part."""
    blocks = [
        json.loads(pl.read_parquet_metadata(part)["polars_hidden_rate"])
        for part in sorted(out.iterdir())
    ]
    assert len(blocks) == 3
    assert all(block == blocks[0] for block in blocks)
    first: dict[str, Any] = blocks[0]
    return first


@pytest.mark.slow
def test_the_parts_carry_the_same_provenance_locally_and_on_a_cluster(
    tcp_cluster: Any, folders: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every part states what the summary states, on both paths; they differ only in the
    engine and the time. Dask's FutureWarnings as errors: a run raises none."""
    monkeypatch.setenv("PYTHONWARNINGS", "error::FutureWarning")
    root, blocks = folders["root"], {}
    for where, extra in (("local", []), ("cluster", ["--cluster", tcp_cluster.scheduler.address])):
        out = root / where
        done = hidden_rate_cli(folders["o"], folders["a"], *options("--output", str(out)), *extra)
        assert done.returncode == 0, done.stderr
        blocks[where] = _provenance_of_parts(out)
        assert blocks[where] == json.loads(done.stdout)["provenance"]
        assert blocks[where]["inputs"]["originals"]["rows"] == 200
    assert blocks["local"]["settings"]["engine"]["cluster"] is False
    assert blocks["cluster"]["settings"]["engine"] == {
        **blocks["local"]["settings"]["engine"],
        "strategy": "cluster",
        "cluster": True,
    }
    assert blocks["local"]["settings"]["link_test"]["tested"]
    for block in blocks.values():
        del block["settings"]["engine"], block["measured_at"]
    assert blocks["local"] == blocks["cluster"]


# Permissions: a replaced directory keeps its own and its parts'; a new one gets the umask's.


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _parts(out: Path) -> dict[str, bytes]:
    return {entry.name: entry.read_bytes() for entry in sorted(out.iterdir())}


@pytest.mark.parametrize(
    ("folder_mode", "part_modes"),
    [(0o700, (0o600, 0o600)), (0o750, (0o640, 0o640)), (0o755, (0o600, 0o640))],
    ids=["private", "group", "parts-private"],
)
def test_overwrite_keeps_the_modes_of_the_replaced_directory(
    folders: dict[str, Any], folder_mode: int, part_modes: tuple[int, int]
) -> None:
    out = folders["root"] / "out"
    first = hidden_rate_cli(folders["o2"], folders["a"], *options("--output", str(out)))
    assert first.returncode == 0, first.stderr
    for part, mode in zip(sorted(out.iterdir()), part_modes, strict=True):
        part.chmod(mode)
    out.chmod(folder_mode)

    done = hidden_rate_cli(
        folders["o"], folders["a"], *options("--output", str(out), "--overwrite"), umask=0o022
    )
    assert done.returncode == 0, done.stderr
    assert_frame_equal(pl.read_parquet(out), folders["expected"])
    assert _mode(out) == folder_mode
    # Each part keeps the mode of the part it replaces; the third, new, the narrowest of them.
    narrowest = part_modes[0] & part_modes[1]
    assert [_mode(part) for part in sorted(out.iterdir())] == [*part_modes, narrowest]
    assert siblings(folders["root"]) == ["a", "o", "o2", "out"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chgrp needs root")
def test_overwrite_keeps_the_group_of_the_replaced_directory(folders: dict[str, Any]) -> None:
    out = folders["root"] / "out"
    assert (
        hidden_rate_cli(folders["o"], folders["a"], *options("--output", str(out))).returncode == 0
    )
    group = os.stat(out).st_gid + 4321  # a group the parts would not get by themselves
    for path in [out, *out.iterdir()]:
        os.chown(path, -1, group)
    done = hidden_rate_cli(
        folders["o"], folders["a"], *options("--output", str(out), "--overwrite")
    )
    assert done.returncode == 0, done.stderr
    assert {os.stat(path).st_gid for path in [out, *out.iterdir()]} == {group}


@pytest.mark.parametrize(
    ("umask", "folder_mode", "part_mode"),
    [(0o000, 0o777, 0o666), (0o022, 0o755, 0o644), (0o077, 0o700, 0o600)],
    ids=oct,
)
def test_a_new_directory_is_private_while_staged_then_gets_the_umask(
    folders: dict[str, Any], umask: int, folder_mode: int, part_mode: int
) -> None:
    root, out = folders["root"], folders["root"] / "out"
    run = PausedRun(
        root / "signals",
        "check", folders["o"], folders["a"], *options("--output", str(out)),
        umask=umask,
    )  # fmt: skip
    (staged,) = root.glob(".out.tmp-*")
    assert _mode(staged) == 0o700  # no partial record readable by others
    assert not out.exists()
    done = run.finish()
    assert done.returncode == 0, done.stderr
    assert _mode(out) == folder_mode
    assert {_mode(part) for part in out.iterdir()} == {part_mode}
    assert siblings(root) == ["a", "o", "o2", "out", "signals"]


# Concurrent runs: the first to finish writes --output; the other fails and leaves it as it is.


def test_a_directory_created_by_another_run_meanwhile_is_left_intact(
    folders: dict[str, Any],
) -> None:
    root, out = folders["root"], folders["root"] / "out"
    first = PausedRun(
        root / "signals", "check", folders["o"], folders["a"], *options("--output", str(out))
    )
    second = hidden_rate_cli(folders["o2"], folders["a"], *options("--output", str(out)))
    assert second.returncode == 0, second.stderr
    written = _parts(out)
    assert len(written) == 2

    done = first.finish()
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert f"{str(out)!r} was created while this run was counting" in done.stderr
    assert _parts(out) == written
    assert siblings(root) == ["a", "o", "o2", "out", "signals"]


def test_an_empty_directory_created_meanwhile_is_not_replaced(folders: dict[str, Any]) -> None:
    # A plain rename would replace an empty directory silently.
    root, out = folders["root"], folders["root"] / "out"
    run = PausedRun(
        root / "signals", "check", folders["o"], folders["a"], *options("--output", str(out))
    )
    out.mkdir()
    done = run.finish()
    assert done.returncode == 2, done.stderr
    assert "was created while this run was counting" in done.stderr
    assert list(out.iterdir()) == []
    assert siblings(root) == ["a", "o", "o2", "out", "signals"]


def test_of_two_overwriting_runs_the_second_to_finish_fails(folders: dict[str, Any]) -> None:
    root, out = folders["root"], folders["root"] / "out"
    previous = hidden_rate_cli(folders["o"], folders["a"], *options("--output", str(out)))
    assert previous.returncode == 0, previous.stderr
    overwrite = options("--output", str(out), "--overwrite")
    first = PausedRun(root / "signals", "check", folders["o"], folders["a"], *overwrite)
    second = hidden_rate_cli(folders["o2"], folders["a"], *overwrite)
    assert second.returncode == 0, second.stderr
    written = _parts(out)
    assert len(written) == 2

    done = first.finish()
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert f"{str(out)!r} was replaced or changed while this run was counting" in done.stderr
    assert _parts(out) == written  # the second run's output, not lost
    assert siblings(root) == ["a", "o", "o2", "out", "signals"]


# Outputs that are no directory, or are an input by another name.


def test_a_fifo_as_output_directory_is_refused(folders: dict[str, Any]) -> None:
    root = folders["root"]
    os.mkfifo(root / "pipe")
    for extra in ([], ["--overwrite"]):
        done = hidden_rate_cli(
            folders["o"], folders["a"], *options("--output", str(root / "pipe"), *extra)
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1
        assert "is a FIFO (named pipe), not a directory" in done.stderr
        assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)
    assert siblings(root) == ["a", "o", "o2", "pipe"]


def test_a_hard_link_to_an_input_is_refused_as_an_input(folders: dict[str, Any]) -> None:
    # The rule of every output: the same file by another name is the input, not just any file.
    root = folders["root"]
    os.link(folders["o"] / "part001.parquet", root / "copy.parquet")
    done = hidden_rate_cli(
        folders["o"], folders["a"], *options("--output", str(root / "copy.parquet"), "--overwrite")
    )
    assert done.returncode == 2, done.stderr
    assert "is or holds the input" in done.stderr
    assert "part001.parquet" in done.stderr


# --cluster-file: a scheduler file still being written is waited for, a bounded time.

# The script's entry point, with a short wait and connection timeout, that says when it waits.
CLUSTER_FILE_CHECK = """
import pathlib, sys, time, types
import polars_hidden_rate.cli as cli
import polars_hidden_rate.cluster.client as client

client.CLUSTER_FILE_WAIT = float(sys.argv[1])
client.CONNECT_TIMEOUT = "0.5s"
waiting = pathlib.Path(sys.argv[2])

def sleep(seconds):
    waiting.touch()
    time.sleep(seconds)

client.time = types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep)
sys.argv = ["hidden-rate", *sys.argv[3:]]
cli.entry()
"""


def _waiting_check(
    folders: dict[str, Any], scheduler_file: Path, wait: float
) -> subprocess.Popen[str]:
    pytest.importorskip("distributed")
    arguments = [folders["o"], folders["a"], *options("--output", str(folders["root"] / "out"))]
    return subprocess.Popen(
        [
            sys.executable, "-c", CLUSTER_FILE_CHECK, str(wait), str(folders["root"] / "waiting"),
            "check", *map(str, arguments), "--cluster-file", str(scheduler_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def test_an_empty_cluster_file_exits_2_after_waiting(folders: dict[str, Any]) -> None:
    pytest.importorskip("distributed")
    scheduler_file = folders["root"] / "scheduler.json"
    scheduler_file.touch()
    done = hidden_rate_cli(
        folders["o"], folders["a"], *options("--output", str(folders["root"] / "out")),
        "--cluster-file", str(scheduler_file),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"hidden-rate: error: --cluster-file {str(scheduler_file)!r} is empty after "
        f"{cluster_client.CLUSTER_FILE_WAIT:g} s of waiting (a file of "
        "`dask scheduler --scheduler-file`: is the scheduler still starting?)\n"
    )
    assert not (folders["root"] / "out").exists()


@pytest.mark.parametrize("content", ["{}", '{"type": "Scheduler"}', "[]", '{"address": ""}', "{"])
def test_a_cluster_file_without_an_address_exits_2(folders: dict[str, Any], content: str) -> None:
    scheduler_file = folders["root"] / "scheduler.json"
    scheduler_file.write_text(content)
    process = _waiting_check(folders, scheduler_file, wait=0.3)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2, err
    assert out == ""
    assert err == (
        f"hidden-rate: error: --cluster-file {str(scheduler_file)!r} holds no scheduler address "
        "after 0.3 s of waiting (a file of `dask scheduler --scheduler-file`: is the scheduler "
        "still starting?)\n"
    )
    assert (folders["root"] / "waiting").exists()  # it read the file more than once


def test_a_cluster_file_written_while_waiting_is_read(folders: dict[str, Any]) -> None:
    scheduler_file = folders["root"] / "scheduler.json"
    scheduler_file.touch()  # as while `dask scheduler` starts
    process = _waiting_check(folders, scheduler_file, wait=60)
    try:
        deadline = time.monotonic() + 60
        while not (folders["root"] / "waiting").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the check never waited for the file"
            time.sleep(0.01)
        # Written as the scheduler writes it; nothing listens at that address.
        with scheduler_file.open("w") as handle:
            json.dump({"type": "Scheduler", "address": "tcp://127.0.0.1:9"}, handle)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert (process.returncode, out) == (2, ""), err
    assert err.startswith("hidden-rate: error: cannot reach the Dask scheduler 'tcp://127.0.0.1:9'")
    assert err.count("\n") == 1
    assert not (folders["root"] / "out").exists()
