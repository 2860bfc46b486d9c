"""The real WBCD originals and their published avatars (k = 20)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl

import polars_hidden_rate as phr
from tests.helpers import (
    brute_force_counts,
    exact_integer_shares,
    hidden_share,
    real_data_summary,
)


def scaled_coordinates(wbcd_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Numeric columns z-scored and Class one-hot scaled as (dummy - p) / sqrt(p), in numpy."""
    originals = pl.read_csv(wbcd_dir / "originals.csv").drop("Sample_code_number")
    avatars = pl.read_csv(wbcd_dir / "avatars_k20.csv")
    numeric = [c for c in originals.columns if c != "Class"]
    x = originals.select(numeric).to_numpy().astype(float)
    y = avatars.select(numeric).to_numpy().astype(float)
    mean, std = x.mean(axis=0), x.std(axis=0)
    blocks_x, blocks_y = [(x - mean) / std], [(y - mean) / std]
    for level in (2, 4):
        share = (originals["Class"] == level).mean()
        assert isinstance(share, float)
        p = float(share)
        blocks_x.append(((originals["Class"].to_numpy() == level) - p)[:, None] / np.sqrt(p))
        blocks_y.append(((avatars["Class"].to_numpy() == level) - p)[:, None] / np.sqrt(p))
    names = [f"S{k}" for k in range(x.shape[1] + 2)]
    return (
        pl.DataFrame(np.hstack(blocks_x), schema=names),
        pl.DataFrame(np.hstack(blocks_y), schema=names),
    )


def test_wbcd_counts_match_brute_force(wbcd_dir: Path) -> None:
    originals, avatars = scaled_coordinates(wbcd_dir)
    expected = brute_force_counts(originals.to_numpy(), avatars.to_numpy(), 1e-9)
    eager = phr.local_cloaking(originals, avatars, coords=originals.columns)
    lazy = originals.lazy().avatar.local_cloaking(avatars.lazy(), coords=originals.columns)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(eager["local_cloaking"].to_numpy(), expected)
    np.testing.assert_array_equal(lazy.collect()["local_cloaking"].to_numpy(), expected)
    rate = phr.hidden_rate(originals, avatars, coords=originals.columns)
    assert rate == hidden_share(expected)
    # The data is full of duplicates and avatars equal to their originals: ties matter here.
    assert 0.0 < rate < 100.0


def test_wbcd_column_order_changes_no_count(wbcd_dir: Path) -> None:
    originals, avatars = scaled_coordinates(wbcd_dir)
    forward = phr.local_cloaking(originals, avatars, coords=originals.columns)
    backward = phr.local_cloaking(originals, avatars, coords=originals.columns[::-1])
    assert forward["local_cloaking"].equals(backward["local_cloaking"])


def test_wbcd_inference_attack_equals_the_exact_brute_force(wbcd_dir: Path) -> None:
    # The real release's duplicates tie many avatars nearest to one original: the shares of a
    # right guess must be those of the exact standardized distance, over every tied avatar,
    # and a holdout that is the originals themselves, reshuffled, must give a risk of 0.
    originals = pl.read_csv(wbcd_dir / "originals.csv").drop("Sample_code_number")
    avatars = pl.read_csv(wbcd_dir / "avatars_k20.csv")
    known = ["Clump_Thickness", "Uniformity_of_Cell_Size", "Bare_Nuclei"]
    shuffled = originals.sample(fraction=1.0, shuffle=True, seed=3)
    found = phr.inference_risk(
        originals, avatars, shuffled, known=known, secret="Class", secret_kind="categorical"
    )
    x, y = (f.select(known).to_numpy() for f in (originals, avatars))
    secrets = [f["Class"].to_numpy().astype(np.float64) for f in (originals, avatars)]
    expected = exact_integer_shares(x, x, y, secrets[0], secrets[1])
    assert found.members_success.tolist() == expected
    assert any(0.0 < share < 1.0 for share in expected)  # ties between classes
    assert found.members.successes == found.control.successes
    assert found.risk == 0.0
    assert 0.9 * len(originals) < found.members.successes < len(originals)


def test_the_summary_names_the_real_data_tests_that_did_not_run(tmp_path: Path) -> None:
    def skipped(nodeid: str, reason: str) -> SimpleNamespace:
        return SimpleNamespace(nodeid=nodeid, longrepr=("t.py", 1, f"Skipped: {reason}"))

    stats = {
        "skipped": [
            skipped(
                "tests/test_wbcd.py::test_a",
                f"WBCD data not found at {tmp_path}/shared/datasets/wbcd",
            ),
            skipped("tests/test_verdict.py::test_b", "../shared/datasets is absent"),
            skipped("tests/test_gpu.py::test_c", "FAISS sees no GPU here"),
        ],
        "passed": [SimpleNamespace(nodeid="tests/test_wbcd.py::test_d", longrepr=None)],
    }
    lines = real_data_summary(stats, tmp_path)
    assert lines[0].startswith(
        f"2 tests on the paper's AIDS and WBCD releases did not run: {tmp_path}"
    )
    assert lines[1:] == ["  tests/test_verdict.py::test_b", "  tests/test_wbcd.py::test_a"]
    assert real_data_summary({"skipped": stats["skipped"][2:]}, tmp_path) == []
    assert real_data_summary({}, tmp_path) == []
