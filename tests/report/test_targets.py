"""The report's verdict with a holdout: the attacks judged by default against their targets,
turned off with ``None`` (``--target NAME=none``), not judged on a holdout too small to judge
them; each distance metric beside the holdout's own figure (the reference), and judged against
it where real unseen records fail the target; without a holdout, the line that says distances
alone show no release safe. Generated look-alikes of a leaky release must fail."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.cli import main
from polars_hidden_rate.report import (
    DEFAULT_HOLDOUT_TARGETS,
    NO_HOLDOUT,
    REFERENCE_METRICS,
    check_targets,
)
from tests.helpers import SHARED_DATASETS, brute_force_two

COLUMNS = ["x0", "x1", "x2", "x3"]


def lookalike(
    n: int, seed: int, *, copies: float = 0.0, noise: float = 0.0
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """A training set, a synthetic set and a holdout of ``n`` records each, drawn from one
    population; a share ``copies`` of the synthetic records are training records, moved by
    ``noise`` (0: exact copies)."""
    rng = np.random.default_rng(seed)
    training, synthetic, holdout = (rng.normal(size=(n, len(COLUMNS))) for _ in range(3))
    taken = round(copies * n)
    picked = rng.choice(n, taken, replace=False)
    synthetic[:taken] = training[picked] + noise * rng.normal(size=(taken, len(COLUMNS)))
    return tuple(pl.DataFrame(x, schema=COLUMNS) for x in (training, synthetic, holdout))  # type: ignore[return-value]


def report_of(
    training: pl.DataFrame, synthetic: pl.DataFrame, holdout: pl.DataFrame | None, **more: Any
) -> phr.PrivacyReport:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small holdouts' warnings: asserted on their own
        return phr.privacy_report(training, synthetic, holdout=holdout, coords=COLUMNS, **more)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["report", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def written(folder: Path, frames: tuple[pl.DataFrame, ...]) -> list[str]:
    paths = []
    for name, frame in zip(("training", "synthetic", "holdout"), frames, strict=True):
        path = folder / f"{name}.csv"
        frame.write_csv(path)
        paths.append(str(path))
    return paths


def test_the_holdout_measures_have_default_targets() -> None:
    targets = check_targets(None)
    assert {name: targets[name] for name in DEFAULT_HOLDOUT_TARGETS} == {
        "membership_auc": 0.55,
        "dcr_overfitting_protection": 0.95,
        "inference_risk": 0.09,
        "linkability_risk": 0.09,
        "singling_out_risk": 0.09,
    }
    # None turns one off; it needs no measure then.
    off = check_targets({"membership_auc": None, "inference_risk": None}, holdout=None)
    assert off["membership_auc"] is None
    assert off["inference_risk"] is None
    assert off["dcr_overfitting_protection"] == 0.95


def test_a_release_of_fresh_draws_passes_by_default() -> None:
    report = report_of(*lookalike(3000, 0))
    checks = report.holdout_checks
    assert checks == {"membership_auc": True, "dcr_overfitting_protection": True}
    assert report.not_judged == {}
    assert report.passed
    assert "PASS: 5 of 5" in report.to_text()  # the distances and the two measures


@pytest.mark.parametrize(
    ("copies", "noise", "fails"),
    [
        # 40 % near-copies: the membership attack and the overfitting both see them.
        (0.4, 0.01, {"membership_auc", "dcr_overfitting_protection"}),
        # 9 % exact copies: under the own copies' 10 % and above the row direct match
        # protection's 90 %, caught by the DCR overfitting protection's target.
        (0.09, 0.0, {"dcr_overfitting_protection"}),
    ],
)
def test_a_release_that_copies_training_records_fails_report_with_a_holdout(
    copies: float,
    noise: float,
    fails: set[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    frames = lookalike(3000, 0, copies=copies, noise=noise)
    report = report_of(*frames)
    assert {name for name, ok in report.holdout_checks.items() if not ok} >= fails
    assert not report.passed
    training, synthetic, holdout = written(tmp_path, frames)
    code, data = run_cli(
        [training, synthetic, "--holdout", holdout, "--coords", ",".join(COLUMNS)], capsys
    )
    assert code == 1
    assert data["passed"] is False
    for name in fails:
        entry = data["holdout_metrics"][name]
        assert entry["passed"] is False, name
        assert entry["target"] == DEFAULT_HOLDOUT_TARGETS[name]
        assert entry["reason"] is None
    # The distances alone pass it: only the holdout's measures fail it.
    assert all(data["metrics"][name]["passed"] for name in REFERENCE_METRICS)
    # Turned off, the two measures are evidence, and the same release passes.
    off = [f"--target={name}=none" for name in DEFAULT_HOLDOUT_TARGETS if name in fails]
    code, data = run_cli(
        [training, synthetic, "--holdout", holdout, "--coords", ",".join(COLUMNS), *off],
        capsys,
    )
    for name in fails:
        entry = data["holdout_metrics"][name]
        assert (entry["target"], entry["passed"]) == (None, None)
        assert entry["reason"] == "not judged: its target is off (evidence)"
    assert code == (0 if data["passed"] else 1)


@pytest.mark.parametrize("name", ["membership_auc", "dcr_overfitting_protection"])
def test_a_holdout_measure_at_its_target_passes_and_one_step_past_it_fails(name: str) -> None:
    """Both directions, ties at the target: at most for the AUC, at least for the DCR
    overfitting protection."""
    frames = lookalike(400, 2, copies=0.2, noise=0.05)
    value = report_of(*frames).holdout_values[name]
    at = report_of(*frames, targets={name: value})
    assert at.holdout_checks[name] is True
    past = float(np.nextafter(value, -math.inf if name == "membership_auc" else math.inf))
    beyond = report_of(*frames, targets={name: past})
    assert beyond.holdout_checks[name] is False
    assert not beyond.passed
    entry = beyond.to_dict()["holdout_metrics"][name]
    assert (entry["value"], entry["target"], entry["passed"]) == (value, past, False)
    # In its default direction, the default target judges it too.
    default = report_of(*frames)
    direction = default.to_dict()["holdout_metrics"][name]["direction"]
    target = DEFAULT_HOLDOUT_TARGETS[name]
    expected = value <= target if direction == "<=" else value >= target
    assert default.holdout_checks[name] is expected


def test_a_target_turned_off_in_the_python_api_is_evidence() -> None:
    frames = lookalike(400, 3, copies=0.4, noise=0.01)
    judged = report_of(*frames)
    assert judged.holdout_checks["membership_auc"] is False
    off = report_of(*frames, targets={"membership_auc": None, "dcr_overfitting_protection": None})
    assert off.holdout_checks == {}
    assert "membership_auc" not in off.verdicts
    assert off.passed
    line = next(x for x in off.to_text().splitlines() if x.startswith("membership AUC "))
    assert "not judged: its target is off (evidence)" in line
    # A service metric's target turned off: shown, not judged, out of the count.
    plain = report_of(*frames, targets={"closest_distances_ratio_median": None})
    entry = plain.to_dict()["metrics"]["closest_distances_ratio_median"]
    assert (entry["target"], entry["passed"]) == (None, None)
    assert "closest_distances_ratio_median" not in plain.verdicts


def test_an_attack_on_a_holdout_too_small_is_not_judged_with_the_reason() -> None:
    training, synthetic, _ = lookalike(200, 4, copies=0.4, noise=0.01)
    holdout = lookalike(20, 5)[2]  # 20 records: under 30, and under half the training set
    report = report_of(training, synthetic, holdout)
    assert report.holdout_checks == {}  # nothing silently passed
    why = report.not_judged
    assert set(why) == {"membership_auc", "dcr_overfitting_protection"}
    assert all(reason.startswith("not judged: the holdout is too small") for reason in why.values())
    data = report.to_dict()
    for name in why:
        entry = data["holdout_metrics"][name]
        assert entry["passed"] is None
        assert entry["reason"] == why[name]
        assert entry["target"] == DEFAULT_HOLDOUT_TARGETS[name]
    line = next(x for x in report.to_text().splitlines() if x.startswith("membership AUC "))
    assert "not judged: the holdout is too small" in line
    assert "PASS" not in line
    assert "FAIL" not in line
    # The inference attack on so few holdout records: not judged either.
    attacked = report_of(training, synthetic, holdout, known=["x0", "x1"], secret="x2")
    assert attacked.not_judged["inference_risk"].startswith("not judged: the holdout is too")
    assert "20 holdout records" in attacked.not_judged["inference_risk"]
    assert "inference_risk" not in attacked.verdicts


def test_the_attacks_that_run_are_judged_by_default() -> None:
    frames = lookalike(300, 6, copies=0.4, noise=0.01)
    report = report_of(
        *frames,
        known=["x0", "x1"],
        secret="x2",
        aux_cols=(["x0"], ["x3"]),
        singling_out="univariate",
    )
    values = report.holdout_values
    assert set(report.holdout_checks) == set(DEFAULT_HOLDOUT_TARGETS)
    assert report.holdout_checks["inference_risk"] is (values["inference_risk"] <= 0.09)
    assert report.holdout_checks["linkability_risk"] is (values["linkability_risk"] <= 0.09)
    assert report.holdout_checks["singling_out_risk"] is (values["singling_out_risk"] <= 0.09)


def brute_reference(training: np.ndarray, holdout: np.ndarray) -> tuple[float, float, float]:
    """The holdout's DCR and NNDR medians against the training set, in float64 by brute
    force, and its row direct match protection (the share of holdout rows equal to no
    training row)."""
    first, second = brute_force_two(training, holdout)
    dcr = np.sqrt(first)
    with np.errstate(invalid="ignore", divide="ignore"):
        nndr = np.where(second == 0.0, 1.0, dcr / np.sqrt(second))
    rows = {tuple(row) for row in training.tolist()}
    copies = sum(tuple(row) in rows for row in holdout.tolist())
    return float(np.median(dcr)), float(np.median(nndr)), 100 * (1 - copies / len(holdout))


@pytest.mark.parametrize("scale", [1.0, 2.0**600, 2.0**-600])
def test_the_references_equal_a_brute_force_of_the_holdouts_own_figures(scale: float) -> None:
    rng = np.random.default_rng(7)
    grid = rng.integers(0, 4, size=(3, 150, len(COLUMNS))).astype(np.float64)
    grid[2, :40] = grid[0, :40]  # holdout rows that equal training rows
    training, synthetic, holdout = (pl.DataFrame(x * scale, schema=COLUMNS) for x in grid)
    report = report_of(training, synthetic, holdout)
    # Brute-forced unscaled (its squares would overflow), then scaled: powers of two exactly.
    dcr, nndr, protection = brute_reference(grid[0], grid[2])
    assert report.references == {
        "distance_to_closest_median": dcr * scale,
        "closest_distances_ratio_median": nndr,
        "row_direct_match_protection": protection,
    }
    metrics = report.to_dict()["metrics"]
    for name, value in report.references.items():
        entry = metrics[name]
        assert entry["reference"] == value
        target = report.targets[name]
        assert target is not None
        assert entry["reference_passed"] is (value > target)
        # Judged against the reference where it fails the target, at least as protective.
        if value > target:
            assert entry["judged_against"] == "target"
            assert entry["passed"] is (entry["value"] > target)
        else:
            assert entry["judged_against"] == "reference"
            assert entry["passed"] is (entry["value"] >= value)
    # The row order of the holdout changes nothing.
    again = report_of(training, synthetic, holdout.reverse())
    assert again.references == report.references


def test_a_distance_metric_whose_reference_fails_its_target_is_judged_against_it() -> None:
    """Real unseen records 0.1 from a training record fail the DCR median's 0.2: the release
    is judged against that figure; a copy of the holdout ties it and passes, the training
    set itself fails it."""
    rng = np.random.default_rng(8)
    training = rng.normal(size=(300, len(COLUMNS))) * 10
    unseen = training.copy()
    unseen[:, 0] += 0.1
    frames = [pl.DataFrame(x, schema=COLUMNS) for x in (training, unseen)]
    name = "distance_to_closest_median"
    tied = report_of(frames[0], frames[1], frames[1])
    reference = tied.references[name]
    assert reference < 0.2
    assert tied.distance_to_closest_median == reference  # the same rows, the same figure
    entry = tied.to_dict()["metrics"][name]
    assert (entry["reference_passed"], entry["judged_against"]) == (False, "reference")
    assert entry["passed"] is True  # at least as protective: a tie passes
    text = tied.to_text()
    assert "fail the target (> 0.2), so the release is judged against this figure" in text
    line = next(x for x in text.splitlines() if x.startswith("median DCR "))
    assert line.split()[-3:] == [">=", repr(reference), "PASS"]
    copied = report_of(frames[0], frames[0], frames[1])
    assert copied.to_dict()["metrics"][name]["passed"] is False
    assert copied.checks[name] is False
    assert not copied.passed
    # Where real unseen records meet the target, the target judges.
    far = report_of(frames[0], frames[1], pl.DataFrame(unseen + 5.0, schema=COLUMNS))
    assert far.to_dict()["metrics"][name]["judged_against"] == "target"
    assert far.checks[name] is False  # 0.1 is not above 0.2


def test_without_a_holdout_the_report_says_distances_alone_show_no_release_safe() -> None:
    training, _, _ = lookalike(200, 9)
    synthetic = training + 0.3  # one per original, by row order
    report = report_of(training, synthetic, None)
    data = report.to_dict()
    assert data["holdout_note"] == NO_HOLDOUT
    assert "--holdout FILE" in NO_HOLDOUT
    assert "holdout=" in NO_HOLDOUT
    assert sum(NO_HOLDOUT in line for line in report.to_text().splitlines()) == 1
    # The page says it without the flag's aside (it names no flag).
    page_words = NO_HOLDOUT.replace(" (--holdout FILE; holdout= in Python)", "")
    assert report.to_html().count(page_words) == 1
    assert all("reference" not in entry for entry in data["metrics"].values())
    with_holdout = report_of(*lookalike(200, 9))
    assert with_holdout.to_dict()["holdout_note"] is None
    assert NO_HOLDOUT not in with_holdout.to_text()


def test_the_json_keys_of_a_report_with_a_holdout() -> None:
    data = json.loads(json.dumps(report_of(*lookalike(200, 10)).to_dict()))
    for name in REFERENCE_METRICS:
        assert {"value", "target", "passed", "reference", "reference_passed", "judged_against"} <= (
            set(data["metrics"][name])
        )
    for entry in data["holdout_metrics"].values():
        assert set(entry) == {"value", "target", "direction", "passed", "reason", "meaning"}
    assert data["holdout_note"] is None


WBCD = SHARED_DATASETS / "wbcd" / "privacy"


@pytest.mark.parametrize("synthetic", ["avatar_0", "ctgan_0", "synthpop_0"])
def test_wbcd_releases_are_judged_against_the_reference_real_records_fail(
    synthetic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """On WBCD's 10-level grid, unseen real patients fail the DCR median's and the row direct
    match protection's targets: each release is judged against their figures."""
    if not (WBCD / "remaining_0.csv").exists():
        pytest.skip(f"the avatar paper's WBCD privacy split is not in {WBCD}")
    files = [str(WBCD / "holdout_0.csv"), str(WBCD / f"{synthetic}.csv")]
    holdout = ["--holdout", str(WBCD / "remaining_0.csv")]
    features = [
        "--features",
        "Clump_Thickness,Uniformity_of_Cell_Size,Uniformity_of_Cell_Shape,Marginal_Adhesion,"
        "Single_Epithelial_Cell_Size,Bare_Nuclei,Bland_Chromatin,Normal_Nucleoli,Mitoses,Class",
        "--categorical",
        "auto",
        "--impute",
        "median",
    ]
    code, data = run_cli([*files, *holdout, *features], capsys)
    for name in ("distance_to_closest_median", "row_direct_match_protection"):
        entry = data["metrics"][name]
        assert entry["reference_passed"] is False, name
        assert entry["judged_against"] == "reference", name
        assert entry["passed"] is (entry["value"] >= entry["reference"]), name
    assert code == (0 if data["passed"] else 1)
