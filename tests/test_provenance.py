"""What an output says it measured: the inputs as the read read them (path resolved, every
byte hashed, the very files of a dataset), stated before anything is written."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from polars_hidden_rate.cli import main
from polars_hidden_rate.frames.files import sha256
from polars_hidden_rate.provenance import describe_input


def test_the_hash_covers_every_byte_and_the_path_is_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.csv"
    data = os.urandom(3 << 20) + b"the last bytes"
    path.write_bytes(data)
    assert sha256(path) == hashlib.sha256(data).hexdigest()
    monkeypatch.chdir(tmp_path)
    described = describe_input(Path("big.csv"), 7)
    assert described == {
        "path": str(path.resolve()),
        "size": len(data),
        "rows": 7,
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    assert Path(described["path"]).is_absolute()


def _side(folder: Path, frame: pl.DataFrame) -> list[Path]:
    """A dataset directory with the traps a read skips: a subdirectory named like a part, a
    marker file, a hidden file; the parts themselves as ``.parquet`` and ``.pq``."""
    folder.mkdir()
    (folder / "sub.parquet").mkdir()
    (folder / "_marker.parquet").write_bytes(b"")
    (folder / ".hidden.parquet").write_bytes(b"not parquet")
    parts = [folder / "a.parquet", folder / "b.pq"]
    frame.head(30).write_parquet(parts[0])
    frame.tail(20).write_parquet(parts[1])
    return parts


def test_a_dataset_is_described_by_the_files_the_read_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(0)
    originals = pl.DataFrame({"id": np.arange(50), "x": rng.normal(size=50)})
    avatars = originals.with_columns(pl.col("x") + rng.normal(scale=0.5, size=50))
    read = {
        "originals": _side(tmp_path / "o", originals),
        "avatars": _side(tmp_path / "a", avatars),
    }
    out = tmp_path / "out"
    argv = ["check", str(tmp_path / "o"), str(tmp_path / "a"), "--on", "id", "--coords", "x"]
    code = main([*argv, "--output", str(out), "--format", "json"])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    inputs = json.loads(captured.out)["provenance"]["inputs"]
    for role, parts in read.items():
        described = inputs[role]
        assert described["rows"] == 50
        assert described["size"] == sum(part.stat().st_size for part in parts)
        assert described["files"] == [
            {
                "name": part.name,
                "size": part.stat().st_size,
                "sha256": hashlib.sha256(part.read_bytes()).hexdigest(),
            }
            for part in parts
        ]


def test_the_provenance_is_built_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An input that cannot be described fails the run before its output is committed.
    originals = pl.DataFrame({"id": np.arange(20), "x": np.arange(20.0)})
    for side in ("o", "a"):
        (tmp_path / side).mkdir()
        originals.write_parquet(tmp_path / side / "a.parquet")

    def unreadable(path: Path) -> str:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("polars_hidden_rate.provenance.sha256", unreadable)
    out = tmp_path / "out"
    argv = ["check", str(tmp_path / "o"), str(tmp_path / "a"), "--on", "id", "--coords", "x"]
    assert main([*argv, "--output", str(out)]) == 2
    assert "Permission denied" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["a", "o"]


def test_every_part_of_a_dataset_output_carries_the_provenance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a single parquet ``--output`` does: the block the summary states, in every part's
    footer, with the link test that ran."""
    rng = np.random.default_rng(1)
    originals = pl.DataFrame({"id": np.arange(60), "x": rng.normal(size=60)})
    avatars = originals.with_columns(pl.col("x") + rng.normal(scale=0.1, size=60))
    for side, frame in (("o", originals), ("a", avatars)):
        (tmp_path / side).mkdir()
        frame.head(25).write_parquet(tmp_path / side / "a.parquet")
        frame.tail(35).write_parquet(tmp_path / side / "b.parquet")
    out = tmp_path / "out"
    argv = ["check", str(tmp_path / "o"), str(tmp_path / "a"), "--on", "id", "--coords", "x"]
    code = main([*argv, "--output", str(out), "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    stated = json.loads(captured.out)["provenance"]
    assert stated["settings"]["link_test"]["tested"]
    for part in ("part-00000.parquet", "part-00001.parquet"):
        metadata = pl.read_parquet_metadata(out / part)
        assert json.loads(metadata["polars_hidden_rate"]) == stated


@pytest.mark.parametrize(
    ("categorical", "by", "line"),
    [
        (
            ["--categorical", "auto"],
            {"named": [], "by_type": ["town"], "auto": ["grade"]},
            "'town' by type (text, categorical and boolean columns); 'grade' by the auto rule "
            "(numbers with at most 10 distinct values)",
        ),
        (
            ["--categorical", "code"],
            {"named": ["code"], "by_type": ["town"], "auto": []},
            "'code' named (categorical=, --categorical); 'town' by type (text, categorical and "
            "boolean columns)",
        ),
        (
            [],
            {"named": [], "by_type": ["town"], "auto": []},
            "'town' by type (text, categorical and boolean columns)",
        ),
    ],
)
def test_each_categorical_column_is_listed_by_why_it_is(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    categorical: list[str],
    by: dict[str, list[str]],
    line: str,
) -> None:
    """A text column of 40 values is categorical by its type, never under the auto rule's
    "at most 10 distinct values"; an integer of 3 values is the auto rule's, a column named
    in --categorical is named."""
    rng = np.random.default_rng(2)
    n = 200
    originals = pl.DataFrame(
        {
            "grade": rng.integers(0, 3, n),
            "town": [f"t{i}" for i in rng.permutation(np.arange(n) % 40)],
            "w": rng.normal(size=n),
            "code": rng.integers(0, 50, n),
        }
    )
    avatars = originals.with_columns(pl.col("w") + rng.normal(size=n))
    paths = [str(tmp_path / "o.parquet"), str(tmp_path / "a.parquet")]
    originals.write_parquet(paths[0])
    avatars.write_parquet(paths[1])
    assert main(["check", *paths, *categorical, "--format", "json"]) == 0
    space = json.loads(capsys.readouterr().out)["provenance"]["settings"]["space"]
    assert space["categorical_by"] == by
    assert sorted(space["categorical"]) == sorted(name for names in by.values() for name in names)
    assert main(["check", *paths, *categorical]) == 0
    shown = [row for row in capsys.readouterr().out.splitlines() if row.startswith("categorical")]
    assert shown == [f"categorical           {line}"]
