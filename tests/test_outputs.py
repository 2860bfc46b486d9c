"""`outputs.publish`, the final step of every output: exclusive, and replacing only what a run
found, with renameat2 (Linux) and with the fallback other systems and file systems get; and
the part writer."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.exceptions import ComputeError

from polars_hidden_rate import outputs
from polars_hidden_rate.outputs import identity, publish
from tests.helpers import (
    NEVER_ENDING_CHECK,
    PAIR_COORDS,
    PAIR_SPACE,
    brute_force_counts,
    launch,
    one_error_line,
    read_one_file,
)
from tests.paused_run import PausedRun


@pytest.fixture(params=["renameat2", "fallback"])
def system(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "fallback":
        monkeypatch.setattr(outputs, "_renameat2", lambda: None)
    elif outputs._renameat2() is None:
        pytest.skip("no renameat2 here")
    return str(request.param)


def _staged(folder: Path, kind: str, text: str) -> Path:
    """A complete output of ``kind`` holding ``text``."""
    path = folder / f".staged-{text}"
    if kind == "file":
        path.write_text(text)
    else:
        path.mkdir()
        (path / "part-00000.parquet").write_text(text)
    return path


def _content(path: Path) -> str:
    if path.is_dir():
        return ",".join(entry.read_text() for entry in sorted(path.iterdir()))
    return path.read_text()


KINDS = ["file", "directory"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_new_output_is_created(tmp_path: Path, system: str, kind: str) -> None:
    staged = _staged(tmp_path, kind, "new")
    publish(staged, tmp_path / "out", None, name="output")
    assert _content(tmp_path / "out") == "new"
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("there", ["file", "empty directory", "directory", "dangling link"])
def test_an_output_created_meanwhile_is_left_as_it_is(
    tmp_path: Path, system: str, kind: str, there: str
) -> None:
    target = tmp_path / "out"
    if there == "file":
        target.write_text("theirs")
    elif there == "dangling link":
        target.symlink_to("nowhere")
    else:
        target.mkdir()
        if there == "directory":
            (target / "part-00000.parquet").write_text("theirs")
    before = identity(target)
    staged = _staged(tmp_path, kind, "new")
    with pytest.raises(FileExistsError, match="was created while this run was counting"):
        publish(staged, target, None, name="output")
    assert identity(target) == before
    assert _content(staged) == "new"  # still the caller's to remove
    if there in ("file", "directory"):
        assert _content(target) == "theirs"


@pytest.mark.parametrize("kind", KINDS)
def test_the_output_found_is_replaced(tmp_path: Path, system: str, kind: str) -> None:
    target = _staged(tmp_path, kind, "old").rename(tmp_path / "out")
    staged = _staged(tmp_path, kind, "new")
    publish(staged, target, identity(target), name="output")
    assert _content(target) == "new"
    assert sorted(os.listdir(tmp_path)) == ["out"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_output_replaced_meanwhile_is_left_as_it_is(
    tmp_path: Path, system: str, kind: str
) -> None:
    target = _staged(tmp_path, kind, "old").rename(tmp_path / "out")
    found = identity(target)
    theirs = _staged(tmp_path, kind, "theirs")  # made while the old one exists: another inode
    outputs.remove(target)
    theirs.rename(target)
    staged = _staged(tmp_path, kind, "new")
    with pytest.raises(
        FileExistsError, match="was replaced or changed while this run was counting"
    ):
        publish(staged, target, found, name="output")
    assert _content(target) == "theirs"
    assert _content(staged) == "new"


@pytest.mark.parametrize("kind", KINDS)
def test_an_output_changed_in_place_meanwhile_is_left_as_it_is(
    tmp_path: Path, system: str, kind: str
) -> None:
    target = _staged(tmp_path, kind, "old").rename(tmp_path / "out")
    found = identity(target)
    while identity(target) == found:  # a file system's clock may be coarse: change it until seen
        os.chmod(target, 0o700)
    staged = _staged(tmp_path, kind, "new")
    with pytest.raises(FileExistsError, match="was replaced or changed while"):
        publish(staged, target, found, name="output")
    assert _content(target) == "old"


@pytest.mark.parametrize("kind", KINDS)
def test_an_output_removed_meanwhile_is_created(tmp_path: Path, system: str, kind: str) -> None:
    target = _staged(tmp_path, kind, "old").rename(tmp_path / "out")
    found = identity(target)
    outputs.remove(target)
    publish(_staged(tmp_path, kind, "new"), target, found, name="output")
    assert _content(target) == "new"


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_replacing_it_between_the_check_and_the_swap_gets_its_output_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The other run comes in at the worst moment: after the identity check, before the swap.
    if outputs._renameat2() is None:
        pytest.skip("no renameat2 here")
    target = _staged(tmp_path, kind, "old").rename(tmp_path / "out")
    found = identity(target)
    rename: Callable[[Path, Path, int], bool] = outputs._rename_flagged
    calls: list[int] = []

    def another_run_first(source: Path, destination: Path, flag: int) -> bool:
        if not calls:
            theirs = _staged(tmp_path, kind, "theirs")
            outputs.remove(destination)
            theirs.rename(destination)
        calls.append(flag)
        return rename(source, destination, flag)

    monkeypatch.setattr(outputs, "_rename_flagged", another_run_first)
    staged = _staged(tmp_path, kind, "new")
    with pytest.raises(
        FileExistsError, match="was replaced or changed while this run was counting"
    ):
        publish(staged, target, found, name="output")
    assert calls == [outputs._RENAME_EXCHANGE, outputs._RENAME_EXCHANGE]  # swapped, swapped back
    assert _content(target) == "theirs"
    assert _content(staged) == "new"


def test_the_replaced_directory_never_leaves_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With renameat2 the old directory is swapped out in one step: no moment without `out`.
    if outputs._renameat2() is None:
        pytest.skip("no renameat2 here")
    target = _staged(tmp_path, "directory", "old").rename(tmp_path / "out")
    moves: list[tuple[str, str]] = []
    real_rename, real_replace = os.rename, os.replace

    def recorded(move: Callable[..., None]) -> Callable[..., None]:
        def wrapper(source: object, destination: object, *args: object) -> None:
            moves.append((str(source), str(destination)))
            move(source, destination, *args)

        return wrapper

    monkeypatch.setattr(os, "rename", recorded(real_rename))
    monkeypatch.setattr(os, "replace", recorded(real_replace))
    publish(_staged(tmp_path, "directory", "new"), target, identity(target), name="output")
    assert all(source != str(target) for source, _ in moves)
    assert _content(target) == "new"


def test_the_part_writer_adds_the_counts_and_refuses_a_changed_file(tmp_path: Path) -> None:
    """The one part writer of the local and the cluster paths: the file with its counts as
    the API gives them, written whole; a file that no longer holds the rows counted is
    refused, and no part is left."""
    source = tmp_path / "o.parquet"
    pl.DataFrame({"id": [3, 1, 2], "x": [0.5, 1.0, 2.0]}).write_parquet(source)
    staging = tmp_path / "staging"
    staging.mkdir()
    columns = ["id", "x"]
    written = outputs.write_counted_part(
        source, 3, np.array([0, 2, 5]), staging, 1, columns=columns
    )
    assert written == staging / outputs.part_name(1) == staging / "part-00001.parquet"
    part = pl.read_parquet(written)
    assert part.columns == ["id", "x", "local_cloaking", "hidden"]
    assert part.schema["local_cloaking"] == pl.get_index_type()
    assert part["local_cloaking"].to_list() == [0, 2, 5]
    assert part["hidden"].to_list() == [False, True, True]
    assert os.listdir(staging) == ["part-00001.parquet"]
    with pytest.raises(ComputeError, match=r"o\.parquet' changed while it was being counted"):
        outputs.write_counted_part(source, 4, np.array([0, 2, 5, 1]), staging, 2, columns=columns)
    assert os.listdir(staging) == ["part-00001.parquet"]


def test_the_part_writer_takes_the_columns_by_name_and_writes_the_metadata(
    tmp_path: Path,
) -> None:
    """Every part in the dataset's column order, whatever its file's, with the footer given."""
    source = tmp_path / "o.parquet"
    pl.DataFrame({"x": [0.5, 1.0], "id": [3, 1]}).write_parquet(source)
    written = outputs.write_counted_part(
        source, 2, np.array([1, 0]), tmp_path, 0, columns=["id", "x"], metadata={"k": "v"}
    )
    assert pl.read_parquet(written).columns == ["id", "x", "local_cloaking", "hidden"]
    assert pl.read_parquet_metadata(written)["k"] == "v"


class _Stopped(BaseException):
    """A stop signal, as `polars_hidden_rate.cli.signals` raises one, arriving mid-step."""


def _stop_after(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """``os.<name>`` does its work, then a stop arrives at once (the earliest instant a
    signal's handler can run after the call), the first time only: one signal."""
    real, calls = getattr(os, name), []

    def stopped(*args: object, **kwargs: object) -> object:
        done = real(*args, **kwargs)
        calls.append(args)
        if len(calls) > 1:  # the clean-up's own calls (rmtree opens the folders it walks)
            return done
        raise _Stopped

    monkeypatch.setattr(os, name, stopped)


@pytest.mark.parametrize(
    ("step", "call"),
    [
        ("open", outputs.ordinary_file_access),
        ("mkdir", outputs.ordinary_directory_access),
        ("mkdir", lambda folder: outputs.staged_directory(folder / "out").__enter__()),
        (
            "open",
            lambda folder: outputs.replace_atomically(
                folder / "out.csv", lambda path: None, name="--output"
            ),
        ),
        (
            "mkdir",
            lambda folder: outputs.replace_atomically(
                folder / "out.csv", lambda path: None, name="--output"
            ),
        ),
    ],
)
@pytest.mark.parametrize("anonymous", [True, False])
def test_a_stop_right_after_a_file_is_created_leaves_nothing_behind(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
    call: Callable[[Path], object],
    anonymous: bool,
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    if not anonymous:  # a system without O_TMPFILE: a named probe
        monkeypatch.setattr(outputs, "_anonymous_file_access", lambda folder: None)
    _stop_after(monkeypatch, step)
    with pytest.raises(_Stopped):
        call(folder)
    monkeypatch.undo()
    assert os.listdir(folder) == []


def _stopped_writer(written: list[Path]) -> Callable[[Path], None]:
    """A writer that starts a file, then is stopped: the file's path is kept in ``written``."""

    def write(path: Path) -> None:
        path.write_bytes(b"part of a record")
        written.append(path)
        raise _Stopped

    return write


def test_a_writer_left_at_work_cannot_put_a_stopped_file_back(tmp_path: Path) -> None:
    # A stop does not wait for Polars' writer thread, which may open its file again by path
    # after the stop removed it: that path must lead nowhere, in a file's folder and in a
    # dataset's staged directory alike.
    written: list[Path] = []
    with pytest.raises(_Stopped):
        outputs.replace_atomically(tmp_path / "out.csv", _stopped_writer(written), name="out")
    with pytest.raises(_Stopped), outputs.staged_directory(tmp_path / "out") as staging:
        _stopped_writer(written)(staging / outputs.part_name(0))
    for late in written:
        with pytest.raises(FileNotFoundError):
            late.write_bytes(b"the rest of it")
    assert os.listdir(tmp_path) == []


def test_a_probe_that_is_not_ours_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A probe name someone else holds (one chance in 2^48): it fails, and stays theirs.
    monkeypatch.setattr(os, "urandom", lambda size: b"\0" * size)
    monkeypatch.setattr(outputs, "_anonymous_file_access", lambda folder: None)
    theirs = tmp_path / f".{'00' * 6}.probe"
    theirs.write_text("theirs")
    with pytest.raises(FileExistsError):
        outputs.ordinary_file_access(tmp_path)
    with pytest.raises(FileExistsError):
        outputs.ordinary_directory_access(tmp_path)
    assert theirs.read_text() == "theirs"


def test_a_stop_during_the_removal_still_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The stop arrives as the removal in the ``finally`` starts: it is done all the same.
    monkeypatch.setattr(outputs, "_anonymous_file_access", lambda folder: None)
    real, calls = os.unlink, []

    def stopped_once(path: object, *args: object, **kwargs: object) -> None:
        calls.append(path)
        if len(calls) == 1:
            raise _Stopped
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", stopped_once)
    with pytest.raises(_Stopped):
        outputs.ordinary_file_access(tmp_path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []
    assert len(calls) == 2


def test_the_anonymous_probe_gives_the_umask_and_leaves_no_name(tmp_path: Path) -> None:
    if getattr(os, "O_TMPFILE", None) is None:
        pytest.skip("no O_TMPFILE here")
    old = os.umask(0o027)
    try:
        found = outputs.ordinary_file_access(tmp_path)
    finally:
        os.umask(old)
    assert found == outputs.Access(0o640, None)
    assert os.listdir(tmp_path) == []


# 1. --output never overwrites an input.


def _same_as_input(pair: dict[str, Any], tmp_path: Path, how: str) -> Path:
    if how == "originals":
        return Path(pair["originals"])
    if how == "avatars":
        return Path(pair["avatars"])
    if how == "dotted":  # the same path, spelled differently
        (tmp_path / "sub").mkdir()
        return tmp_path / "sub" / ".." / "a.parquet"
    if how == "symlink":  # a link to the avatars (os.replace would only replace the link)
        os.symlink(pair["avatars"], tmp_path / "link.parquet")
        return tmp_path / "link.parquet"
    os.link(pair["avatars"], tmp_path / "hard.parquet")  # one inode, two names
    return tmp_path / "hard.parquet"


@pytest.mark.parametrize("how", ["originals", "avatars", "dotted", "symlink", "hardlink"])
def test_output_that_is_an_input_is_refused(pair: dict[str, Any], tmp_path: Path, how: str) -> None:
    output = _same_as_input(pair, tmp_path, how)
    before = {path: path.read_bytes() for path in (pair["originals"], pair["avatars"])}
    listing = sorted(os.listdir(tmp_path))
    done = launch(
        "check", str(pair["originals"]), str(pair["avatars"]), *PAIR_SPACE, "--output", str(output)
    )
    line = one_error_line(done)
    assert "--output" in line
    assert ("ORIGINALS" if how == "originals" else "AVATARS") in line
    assert {path: path.read_bytes() for path in before} == before
    assert sorted(os.listdir(tmp_path)) == listing
    if how == "symlink":
        assert output.is_symlink()


def test_output_beside_the_inputs_is_fine(pair: dict[str, Any], tmp_path: Path) -> None:
    output = tmp_path / "o.csv"  # the same stem as ORIGINALS, another file
    done = launch(
        "check", str(pair["originals"]), str(pair["avatars"]), *PAIR_SPACE, "--output", str(output)
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(output).height == 200


@pytest.mark.parametrize(
    ("name", "kind"),
    [("out[1]", "parquet"), ("out[1]", "csv"), ("out[1]", "ipc"), ("out*?", "parquet")],
)
def test_output_path_is_literal(pair: dict[str, Any], tmp_path: Path, kind: str, name: str) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / f"{name}.{kind}"
    args = (
        "check",
        str(pair["originals"]),
        str(pair["avatars"]),
        *PAIR_SPACE,
        "--output",
        str(output),
    )
    done = launch(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert os.listdir(folder) == [output.name]
    assert json.loads(done.stdout)["hidden_rate"] == pytest.approx(pair["rate"])
    written = read_one_file(output)
    originals = pl.read_parquet(pair["originals"])
    counts = brute_force_counts(
        originals.select(PAIR_COORDS).to_numpy(),
        pl.read_parquet(pair["avatars"]).sort("id").select(PAIR_COORDS).to_numpy(),
        1e-9,
    )
    assert written.columns == [*originals.columns, "local_cloaking", "hidden"]
    assert written["local_cloaking"].to_list() == counts.tolist()


# 3. --output keeps permissions: never wider than the file it replaces, or than the umask allows.


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("umask", "expected"), [(0o077, 0o600), (0o022, 0o644), (0o027, 0o640)], ids=oct
)
def test_new_output_gets_the_umask(
    pair: dict[str, Any], tmp_path: Path, umask: int, expected: int
) -> None:
    output = tmp_path / "out.parquet"
    done = launch(
        "check",
        str(pair["originals"]),
        str(pair["avatars"]),
        *PAIR_SPACE,
        "--output",
        str(output),
        umask=umask,
    )
    assert done.returncode == 0, done.stderr
    assert _mode(output) == expected


@pytest.mark.parametrize(
    ("mode", "umask"), [(0o600, 0o022), (0o640, 0o077), (0o604, 0o000)], ids=oct
)
def test_replaced_output_keeps_its_mode(
    pair: dict[str, Any], tmp_path: Path, umask: int, mode: int
) -> None:
    output = tmp_path / "out.csv"
    output.write_text("previous\n")
    output.chmod(mode)
    done = launch(
        "check",
        str(pair["originals"]),
        str(pair["avatars"]),
        *PAIR_SPACE,
        "--output",
        str(output),
        umask=umask,
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(output).height == 200
    assert _mode(output) == mode


# 7. An output is a regular file: a FIFO, a socket or a directory there is refused, saying what it
# is, before any counting (the run below would never end if it counted).


def _output_fifo(path: Path) -> None:
    os.mkfifo(path)


def _output_socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    here = Path.cwd()
    os.chdir(path.parent)  # a socket's path is limited to about 100 bytes: bind a short one
    try:
        server.bind(path.name)
    finally:
        os.chdir(here)
    server.close()  # the socket file stays


def _output_directory(path: Path) -> None:
    path.mkdir()


def _link_to_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("pipe"))
    path.symlink_to("pipe")


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (_output_fifo, "a FIFO (named pipe)"),
        (_output_socket, "a socket"),
        (_output_directory, "a directory"),
        (_link_to_fifo, "a FIFO (named pipe)"),
    ],
    ids=["fifo", "socket", "directory", "link-to-fifo"],
)
@pytest.mark.parametrize("option", ["--output", "--html"])
def test_a_non_regular_output_is_refused_before_counting(
    slow_pair: tuple[Path, Path],
    tmp_path: Path,
    make: Callable[[Path], None],
    what: str,
    option: str,
) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / ("out.csv" if option == "--output" else "out.html")
    make(output)
    listing = {name: os.lstat(folder / name).st_mode for name in os.listdir(folder)}
    command = "check" if option == "--output" else "report"
    arguments = [command, *map(str, slow_pair), *PAIR_SPACE, option, str(output)]
    done = subprocess.run(
        [sys.executable, "-c", NEVER_ENDING_CHECK, *arguments],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    line = one_error_line(done)
    assert line == (
        f"hidden-rate: error: {option} {str(output)!r} exists and is {what}, not a regular file"
    )
    assert not (tmp_path / "counting").exists()
    assert {name: os.lstat(folder / name).st_mode for name in os.listdir(folder)} == listing


# 7. Concurrent runs: a file created or replaced while a run counts is left as it is.


def test_a_file_created_meanwhile_is_left_intact(pair: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / "out.csv"
    args = ("check", pair["originals"], pair["avatars"], *PAIR_SPACE, "--output", output)
    run = PausedRun(tmp_path / "signals", *args)
    output.write_text("someone else's\n")
    done = run.finish()
    line = one_error_line(done)
    assert f"--output {str(output)!r} was created while this run was counting" in line
    assert output.read_text() == "someone else's\n"
    assert os.listdir(folder) == ["out.csv"]


def test_a_file_replaced_by_another_run_meanwhile_is_left_intact(
    pair: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "written"
    folder.mkdir()
    output = folder / "out.csv"
    output.write_text("previous\n")
    args = ("check", pair["originals"], pair["avatars"], *PAIR_SPACE, "--output", output)
    first = PausedRun(tmp_path / "signals", *map(str, args))
    second = launch(*map(str, args), "--coords", "Dim1")  # another run, other counts
    assert second.returncode == 0, second.stderr
    written = output.read_bytes()
    assert written != b"previous\n"

    line = one_error_line(first.finish())
    assert f"--output {str(output)!r} was replaced or changed while this run was counting" in line
    assert output.read_bytes() == written
    assert os.listdir(folder) == ["out.csv"]


def test_a_file_found_at_the_start_is_replaced(pair: dict[str, Any], tmp_path: Path) -> None:
    # The pause itself changes nothing: the file the run found is the one it replaces.
    output = tmp_path / "out.csv"
    output.write_text("previous\n")
    args = ("check", pair["originals"], pair["avatars"], *PAIR_SPACE, "--output", output)
    done = PausedRun(tmp_path / "signals", *map(str, args)).finish()
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(output).height == 200


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chgrp needs root")
def test_replaced_output_keeps_its_group(pair: dict[str, Any], tmp_path: Path) -> None:
    output = tmp_path / "out.csv"
    output.write_text("previous\n")
    output.chmod(0o640)
    group = os.stat(output).st_gid + 4321  # not the group a new file gets
    os.chown(output, -1, group)
    done = launch(
        "check", str(pair["originals"]), str(pair["avatars"]), *PAIR_SPACE, "--output", str(output)
    )
    assert done.returncode == 0, done.stderr
    assert (os.stat(output).st_gid, _mode(output)) == (group, 0o640)
