from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bench_trees

ROOT = Path(__file__).resolve().parents[1]


def test_two_trees_run_in_alternated_pairs(tmp_path: Path) -> None:
    trees = ["--before", str(ROOT), "--after", str(ROOT)]
    sizes = ["--n", "2000", "--dims", "3", "--repeat", "2", "--threads", "1"]
    bench_trees.main([*trees, *sizes, "--out", str(tmp_path), "--name", "t"])
    result = json.loads((tmp_path / "t.json").read_text())
    for run in bench_trees.RUNS:
        first, second = result["pairs"][run]
        assert list(first) == ["before", "after"]
        assert list(second) == ["after", "before"]
        assert all(seconds > 0 for pair in (first, second) for seconds in pair.values())
        assert result["median_ratio"][run] > 0
    assert "| local_cloaking |" in (tmp_path / "t.md").read_text()


def test_no_pair_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_trees.main(["--before", str(ROOT), "--repeat", "0"])
    assert exit_.value.code == 2
    assert "--repeat must be at least 1" in capsys.readouterr().err
