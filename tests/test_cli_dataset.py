"""`hidden-rate check` from directories of parquet files, and on a Dask cluster
(`--cluster`, `--cluster-file`), into a directory of parts: exit codes 0/1/2 as ever."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import polars_hidden_rate as phr
from polars_hidden_rate import cli
from polars_hidden_rate.gate import summarize
from tests.helpers import counts_of, local_cluster
from tests.test_dataset import COORDS, linked_case, siblings, write_files

SCRIPT = Path(sys.executable).with_name("hidden-rate")


def hidden_rate_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    return subprocess.run(
        [str(SCRIPT), "check", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Any]:
    left, right = linked_case(200, seed=11, kind="gaussian")
    write_files(left, tmp_path / "o", 3)
    write_files(right, tmp_path / "a", 2)
    expected = phr.local_cloaking(left, right, coords=COORDS, on="id")
    assert 0 < summarize(expected).hidden_rate < 100  # the gate can pass and fail
    return {"root": tmp_path, "o": tmp_path / "o", "a": tmp_path / "a", "expected": expected}


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
    assert siblings(root) == ["a", "exists", "o"]


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
    monkeypatch.setattr(cli, "CONNECT_TIMEOUT", "0.5s")
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
