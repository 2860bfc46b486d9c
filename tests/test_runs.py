"""The run layer under the command line: the CLI parses, calls a run, formats and exits."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
import polars_hidden_rate.cli as cli
from polars_hidden_rate.gate import cloaking_summary

# The command line's package imports: the run layer and its own parser, signals and formats.
MOST_CLI_IMPORTS = 5


def package_imports(source: str) -> set[str]:
    """The modules of the package that ``source`` imports, anywhere in it (a function's
    import counts too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "polars_hidden_rate":  # `from polars_hidden_rate import runs`
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
    return {name for name in found if name.split(".")[0] == "polars_hidden_rate"}


def test_the_command_line_imports_at_most_five_package_modules() -> None:
    imported = package_imports(Path(cli.__file__).read_text("utf-8"))
    assert len(imported) <= MOST_CLI_IMPORTS, sorted(imported)
    assert "polars_hidden_rate.runs" in imported


def test_the_count_sees_a_function_s_import() -> None:
    source = "def f():\n    from polars_hidden_rate.demo.cohort import cohort\n"
    assert package_imports(source) == {"polars_hidden_rate.demo.cohort"}


# -- one run under both entry points: the Python API states what the command line states --


def _release(tmp_path: Path) -> dict[str, Any]:
    """Three numeric columns, avatars near their originals, and a holdout; as frames and as
    parquet files."""
    rng = np.random.default_rng(7)
    columns = ["x", "y", "z"]
    x = rng.normal(size=(160, 3))
    originals = pl.DataFrame(x, schema=columns, orient="row")
    avatars = pl.DataFrame(x + rng.normal(scale=0.4, size=x.shape), schema=columns, orient="row")
    holdout = pl.DataFrame(rng.normal(size=(90, 3)), schema=columns, orient="row")
    found: dict[str, Any] = {"frames": (originals, avatars, holdout)}
    for name, frame in zip(("originals", "avatars", "holdout"), found["frames"], strict=True):
        path = tmp_path / f"{name}.parquet"
        frame.write_parquet(path)
        found[name] = path
    return found


def _json_of(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert cli.main([*argv, "--format", "json"]) in (0, 1)
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


def test_the_report_states_the_same_settings_from_python_and_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _release(tmp_path)
    originals, avatars, holdout = files["frames"]
    report = phr.privacy_report(
        originals, avatars, holdout=holdout, ncp=2, tie_tol=0.0, dcr_baseline=True
    )
    got = report.to_dict()["provenance"]
    argv = ["report", str(files["originals"]), str(files["avatars"])]
    argv += ["--holdout", str(files["holdout"]), "--ncp", "2", "--tie-tol", "0", "--dcr-baseline"]
    stated = _json_of(capsys, *argv)["provenance"]
    assert list(got) == list(stated) == ["inputs", "settings", "versions", "measured_at"]
    assert got["settings"] == stated["settings"]
    assert got["settings"]["space"]["ncp"] == 2
    assert got["settings"]["tie_tol"] == 0.0
    assert got["settings"]["engine"]["strategy"] in ("tree", "flat")
    assert got["settings"]["link_test"] == report.to_dict()["evidence"]["link_test"]
    assert got["versions"] == stated["versions"]
    # From frames: their rows, as the read counted them; from files, their paths and hashes.
    rows = {"originals": 160, "avatars": 160, "holdout": 90}
    assert got["inputs"] == {role: {"rows": count} for role, count in rows.items()}
    assert {role: entry["rows"] for role, entry in stated["inputs"].items()} == rows
    assert "sha256" in stated["inputs"]["originals"]
    # The report's other formats say it too.
    assert "a frame of 160 rows" in report.to_text()
    assert "a frame of 160 rows" in report.to_html()


def test_the_check_states_the_same_settings_from_python_and_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _release(tmp_path)
    originals, avatars, _ = files["frames"]
    options: dict[str, Any] = {"coords": ["x", "y"], "tie_tol": 0.0, "max_own_copies": 50.0}
    summary = cloaking_summary(originals, avatars, min_rate=20, **options)
    got = summary.to_dict()["provenance"]
    argv = ["check", str(files["originals"]), str(files["avatars"]), "--coords", "x,y"]
    argv += ["--tie-tol", "0", "--max-own-copies", "50", "--min-rate", "20"]
    stated = _json_of(capsys, *argv)["provenance"]
    assert got["settings"] == stated["settings"]
    assert got["settings"]["space"] == {"coords": ["x", "y"], "ncp": 2}
    assert got["settings"]["min_rate"] == 20.0
    assert got["settings"]["max_own_copies"] == 50.0
    assert got["inputs"] == {"originals": {"rows": 160}, "avatars": {"rows": 160}}
    assert set(got["versions"]) >= {"polars-hidden-rate", "polars", "numpy"}
    assert got["measured_at"].endswith("Z")


def test_a_dataset_run_states_the_same_settings_from_python_and_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _release(tmp_path)
    folders = {}
    for name in ("originals", "avatars"):
        folders[name] = tmp_path / f"{name}_parts"
        folders[name].mkdir()
        files["frames"][0 if name == "originals" else 1].write_parquet(
            folders[name] / "part.parquet"
        )
    python_out, cli_out = tmp_path / "python", tmp_path / "cli"
    summary = phr.local_cloaking_to_parquet(
        folders["originals"], folders["avatars"], python_out, coords=["x", "y"], min_rate=10
    )
    got = summary.to_dict()["provenance"]
    argv = ["check", str(folders["originals"]), str(folders["avatars"]), "--coords", "x,y"]
    stated = _json_of(capsys, *argv, "--min-rate", "10", "--output", str(cli_out))["provenance"]
    assert got["settings"] == stated["settings"]
    assert got["inputs"] == {"originals": {"rows": 160}, "avatars": {"rows": 160}}
    # Every part states it in its footer, as the command line's parts do.
    footer = pl.read_parquet_metadata(next(python_out.glob("*.parquet")))
    assert json.loads(footer["polars_hidden_rate"]) == got
