"""The report's verdict on what applies: a synthetic set without a one-per-original link judged
on the measures that need none, the overrides never counted and always recorded, targets on
the measures against a holdout in their direction, the own copies, and what the page and the
terminal show of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.cli import main
from polars_hidden_rate.link.link_test import LinkTest
from polars_hidden_rate.link.verdict import Evidence
from polars_hidden_rate.measures.digits import p_text
from polars_hidden_rate.report import PrivacyReport, UnmeasuredTargetError, check_targets
from tests.helpers import AIDS, SHARED_DATASETS, parsed

PRIVACY = SHARED_DATASETS / "aids" / "privacy"
# The AIDS columns (synthpop_0.csv adds a written-out index, left out by naming these).


def needs_split() -> None:
    if not (PRIVACY / "remaining_0.csv").exists():
        pytest.skip(f"the avatar paper's AIDS privacy split is not in {PRIVACY}")


def aids_report(
    synthetic: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, *more: str
) -> tuple[int, dict[str, Any], str, str]:
    """``hidden-rate report`` of round 0 of the AIDS split: the training set against one
    synthetic set, the unseen records as the holdout; the exit code, the JSON, the page and
    stderr."""
    needs_split()
    page = tmp_path / "report.html"
    args = [
        "report",
        str(PRIVACY / "holdout_0.csv"),  # the TRAINING set (the folder's README)
        str(PRIVACY / f"{synthetic}.csv"),
        "--features",
        AIDS,
        "--impute",
        "median",
        "--format",
        "json",
        "--html",
        str(page),
        *more,
    ]
    code = main(args)
    out, err = capsys.readouterr()
    return code, json.loads(out), page.read_text("utf-8"), err


@pytest.mark.parametrize("synthetic", ["ctgan_0", "synthpop_0"])
def test_a_generator_without_a_link_is_judged_on_what_needs_none(
    synthetic: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """CT-GAN and synthpop sets are not one record per original: with the holdout, the
    hidden rate, the local cloaking and the own copies are not applicable (no value, no
    verdict), and the exit code is that of the DCR, the NNDR and the direct matches."""
    holdout = ["--holdout", str(PRIVACY / "remaining_0.csv")]
    code, data, page, err = aids_report(synthetic, capsys, tmp_path, *holdout)
    assert data["link_use"] == "absent"
    for name in ("hidden_rate", "local_cloaking_median"):
        entry = data["metrics"][name]
        assert entry["value"] is None, name
        assert entry["passed"] is None, name
        assert entry["reason"].startswith("n/a: no one-avatar-per-original link"), name
    assert data["own_copies"]["passed"] is None
    assert data["own_copies"]["value"] is None
    judged = ["distance_to_closest_median", "closest_distances_ratio_median"]
    judged.append("row_direct_match_protection")
    assert all(isinstance(data["metrics"][name]["passed"], bool) for name in judged)
    # The holdout's measures are judged by default: the membership AUC at most 0.55 (CT-GAN
    # and synthpop leak little here); the DCR overfitting protection not judged, with the
    # reason, on a holdout under half the training set's size.
    auc = data["holdout_metrics"]["membership_auc"]
    assert (auc["target"], auc["direction"]) == (0.55, "<=")
    assert auc["passed"] is (auc["value"] <= 0.55) is True
    overfit = data["holdout_metrics"]["dcr_overfitting_protection"]
    assert (overfit["target"], overfit["direction"], overfit["passed"]) == (0.95, ">=", None)
    assert "under half as many records as the training set" in overfit["reason"]
    assert data["passed"] == all(data["metrics"][name]["passed"] for name in judged) is True
    assert code == (0 if data["passed"] else 1)
    assert "judged on the measures that need no link" in err or "need no link" in err
    # The page says so: a banner, n/a rows with the reason, the verdict on what applies.
    shown = parsed(page)
    assert shown.banners
    assert "not applicable" in shown.banners[0]
    hidden = next(row for row in shown.rows if row[0] == "Hidden rate (%)")
    assert hidden[-1] == "n/a"
    assert hidden[1].startswith("n/a: no one-avatar-per-original")
    assert "on the measures that need no link" in page
    # The link test's figure is in the provenance.
    settings = data["provenance"]["settings"]
    assert settings["link_test"]["linked"] is False
    assert settings["allow_unlinked"] is False
    # With a target the membership AUC counts: CT-GAN and synthpop leak little here.
    strict = [*holdout, "--target", "membership_auc=0.5"]
    code, data, _, _ = aids_report(synthetic, capsys, tmp_path, *strict)
    assert data["holdout_metrics"]["membership_auc"]["passed"] is False
    assert code == 1
    assert data["passed"] is False


def test_without_a_holdout_a_refused_link_is_judged_on_the_distances(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Without a holdout as with one: a CT-GAN set is judged on the measures that need no
    link (the distances alone), never refused with advice to give a key it has not."""
    code, data, _, err = aids_report("ctgan_0", capsys, tmp_path)
    assert data["link_use"] == "absent"
    assert data["holdout"] is None
    assert data["metrics"]["hidden_rate"]["value"] is None
    assert code == (0 if data["passed"] else 1)
    assert "--on" not in err


def test_allow_unlinked_measures_the_linked_figures_but_never_counts_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--allow-unlinked`` on a random link: the hidden rate of 99.9 % is shown, not judged,
    and recorded as an override in every format; the page opens with a banner."""
    code, data, page, _ = aids_report("ctgan_0", capsys, tmp_path, "--allow-unlinked")
    assert data["link_use"] == "not judged"
    rate = data["metrics"]["hidden_rate"]
    assert rate["value"] > 99.0
    assert rate["passed"] is None
    assert "--allow-unlinked" in rate["reason"]
    assert data["passed"] is (code == 0)
    assert data["provenance"]["settings"]["allow_unlinked"] is True
    assert data["provenance"]["settings"]["link_test"]["linked"] is False
    shown = parsed(page)
    # The page names no flag: the option in words.
    assert any("the allow unlinked option" in banner for banner in shown.banners)
    hidden = next(row for row in shown.rows if row[0] == "Hidden rate (%)")
    assert hidden[-1] == "not judged"
    assert ["Setting: allow_unlinked", "yes"] in shown.rows
    # The terminal: the verdict leaves the hidden rate out, the provenance names the override.
    files = [str(PRIVACY / "holdout_0.csv"), str(PRIVACY / "ctgan_0.csv")]
    main(["report", *files, "--features", AIDS, "--impute", "median", "--allow-unlinked"])
    text = capsys.readouterr().out.splitlines()
    line = next(line for line in text if line.startswith("hidden rate (%)"))
    assert "not judged" in line
    assert "PASS" not in line
    assert any(line.startswith("overrides") and "--allow-unlinked" in line for line in text)
    verdict = next(line for line in text if line.startswith("report"))
    # DCR, NNDR, direct matches (no own copies either), and the refused link: never a pass.
    assert verdict.endswith("FAIL: 3 of 4")
    assert code == 1


def test_the_avatars_with_the_holdout_get_the_full_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """avatar_0 is one avatar per original: every measure is judged, the holdout's by their
    targets in their direction, each shown with what it means."""
    targets = ["--target", "membership_auc=0.55", "--target", "dcr_overfitting_protection=0.5"]
    holdout = ["--holdout", str(PRIVACY / "remaining_0.csv")]
    code, data, page, err = aids_report("avatar_0", capsys, tmp_path, *holdout, *targets)
    assert data["link_use"] == "judged"
    assert not err
    assert data["metrics"]["hidden_rate"]["passed"] is True
    auc = data["holdout_metrics"]["membership_auc"]
    assert auc["value"] == data["holdout"]["membership"]["auc"]
    assert (auc["target"], auc["direction"]) == (0.55, "<=")
    assert auc["passed"] is (auc["value"] <= 0.55)
    overfit = data["holdout_metrics"]["dcr_overfitting_protection"]
    assert (overfit["target"], overfit["direction"]) == (0.5, ">=")
    # The holdout holds 642 records for 1,497 training ones: too small to judge it.
    assert overfit["passed"] is None
    assert overfit["reason"].startswith("not judged: the holdout is too small to judge it")
    assert "times as many members as chance" in auc["meaning"]
    assert auc["passed"] is False  # 0.6053
    assert data["passed"] is False
    assert code == 1
    # The link test's p-value underflows here: a bound, never "p = 0".
    assert data["evidence"]["link_test"]["p_value_text"] == "p < 1e-300"
    assert "p = 0," not in page
    assert "p &lt; 1e-300" in page
    shown = parsed(page)
    assert ["Membership AUC", f"{auc['value']:.4g}", "≤ 0.55", "FAIL"] in shown.rows
    assert not shown.banners
    assert "`" not in page  # no Markdown on the page
    assert '{"' not in page  # the settings as a table, not JSON
    assert any(row[0] == "Membership AUC: what it means" for row in shown.rows)


def test_holdout_targets_in_the_python_api_and_their_checks() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(300, 3))
    originals = pl.DataFrame(x, schema=["a", "b", "c"])
    avatars = pl.DataFrame(x + rng.normal(scale=0.3, size=(300, 3)), schema=["a", "b", "c"])
    holdout = pl.DataFrame(rng.normal(size=(200, 3)), schema=["a", "b", "c"])
    options: dict[str, Any] = {"coords": ["a", "b", "c"], "holdout": holdout}
    plain = phr.privacy_report(originals, avatars, **options)
    auc = plain.holdout_values["membership_auc"]
    assert plain.verdicts["membership_auc"] is (auc <= 0.55)  # judged by default
    unjudged = phr.privacy_report(originals, avatars, targets={"membership_auc": None}, **options)
    assert "membership_auc" not in unjudged.verdicts  # evidence: its target turned off
    # On its target exactly: at most passes; the digits that decide are shown.
    on = phr.privacy_report(originals, avatars, targets={"membership_auc": auc}, **options)
    assert on.verdicts["membership_auc"] is True
    below = float(np.nextafter(auc, -np.inf))
    off = phr.privacy_report(originals, avatars, targets={"membership_auc": below}, **options)
    assert off.verdicts["membership_auc"] is False
    assert not off.passed
    line = next(x for x in off.to_text().splitlines() if "AUC" in x and "target <=" in x)
    words = line.split()
    assert words[:2] == ["membership", "AUC"]
    assert words[-3:] == ["<=", repr(below), "FAIL"]
    assert float(words[2]) > below  # the value shown is on its side of the target
    # A target needs its measure.
    with pytest.raises(ValueError, match=r"`targets\['membership_auc'\]` needs `holdout`"):
        phr.privacy_report(
            originals, avatars, coords=["a", "b", "c"], targets={"membership_auc": 1.0}
        )
    with pytest.raises(ValueError, match=r"`targets\['inference_risk'\]` needs `secret`, or"):
        check_targets({"inference_risk": 0.1}, holdout=holdout, secret=None)
    with pytest.raises(ValueError, match="unknown target 'membership'"):
        check_targets({"membership": 0.1})
    # Linkability's direction is known before its section lands.
    assert check_targets({"linkability_risk": 0.1}, holdout=holdout)["linkability_risk"] == 0.1


# Each target whose measure needs more than the two frames, the options that run it, and
# which of them each refusal names: every such target is refused alike without them.
UNMEASURED = [
    ("membership_auc", {}, ("holdout",)),
    ("dcr_overfitting_protection", {}, ("holdout",)),
    ("correlation_protection_rate", {"holdout": True}, ("known",)),
    ("inference_risk", {}, ("holdout", "known", "secret")),
    ("inference_risk", {"holdout": True}, ("known", "secret")),
    ("inference_risk", {"holdout": True, "known": ["a"]}, ("secret",)),
    ("linkability_risk", {}, ("holdout", "aux_cols")),
    ("linkability_risk", {"holdout": True}, ("aux_cols",)),
    ("linkability_risk", {"holdout": True, "known": ["a"]}, ("aux_cols",)),
]
FLAGS = {
    "holdout": "--holdout",
    "known": "--known",
    "secret": "--secret",
    "aux_cols": "--aux-a and --aux-b",
}


def unmeasured_frames() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(4)
    x = rng.normal(size=(60, 3))
    frames = (x, x + rng.normal(scale=0.3, size=x.shape), rng.normal(size=(40, 3)))
    originals, avatars, holdout = (pl.DataFrame(f, schema=["a", "b", "c"]) for f in frames)
    return originals, avatars, holdout


@pytest.mark.parametrize(("target", "given", "needs"), UNMEASURED)
def test_a_target_for_a_measure_not_run_is_refused_in_the_python_api(
    target: str, given: dict[str, Any], needs: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    originals, avatars, holdout = unmeasured_frames()
    options: dict[str, Any] = {
        key: holdout if key == "holdout" else value for key, value in given.items()
    }

    def unread(*_: object, **__: object) -> None:
        raise AssertionError("read before the targets were checked")

    monkeypatch.setattr("polars_hidden_rate.report.run.plan", unread)  # before anything is read
    with pytest.raises(UnmeasuredTargetError) as caught:
        phr.privacy_report(
            originals, avatars, coords=["a", "b", "c"], targets={target: 0.0}, **options
        )
    assert (caught.value.target, caught.value.needs) == (target, needs)
    words = " and ".join(f"`{keyword}`" for keyword in needs)
    if len(needs) == 3:
        words = f"`{needs[0]}`, `{needs[1]}` and `{needs[2]}`"
    assert str(caught.value).startswith(f"`targets[{target!r}]` needs {words}, or ")


@pytest.mark.parametrize(("target", "given", "needs"), UNMEASURED)
def test_a_target_for_a_measure_not_run_exits_2_naming_its_flags(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target: str,
    given: dict[str, Any],
    needs: tuple[str, ...],
) -> None:
    names = ("o.csv", "a.csv", "h.csv")
    for frame, name in zip(unmeasured_frames(), names, strict=True):
        frame.write_csv(tmp_path / name)
    args = ["report", str(tmp_path / "o.csv"), str(tmp_path / "a.csv"), "--coords", "a,b,c"]
    if "holdout" in given:
        args += ["--holdout", str(tmp_path / "h.csv")]
    if "known" in given:
        args += ["--known", "a"]
    (tmp_path / "o.csv").unlink()  # nothing is read before the targets are checked
    assert main([*args, "--target", f"{target}=0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    flags = [FLAGS[keyword] for keyword in needs]
    named = " and ".join(flags) if len(flags) < 3 else f"{flags[0]}, {flags[1]} and {flags[2]}"
    assert f"error: --target {target} needs {named}, or " in err
    assert "`" not in err


def copies_release(tmp_path: Path, share: float) -> tuple[Path, Path]:
    """200 records, ``share`` of the avatars identical to their own original."""
    rng = np.random.default_rng(11)
    n = 200
    x = rng.normal(size=(n, 3))
    y = x + rng.normal(scale=0.2, size=(n, 3))
    copies = round(share * n)
    y[:copies] = x[:copies]
    originals, avatars = tmp_path / "o.csv", tmp_path / "a.csv"
    pl.DataFrame(x, schema=["a", "b", "c"]).write_csv(originals)
    pl.DataFrame(y, schema=["a", "b", "c"]).write_csv(avatars)
    return originals, avatars


def test_report_fails_on_own_copies_above_the_maximum_as_check_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """16.5 % own copies with --max-own-copies 5: check exits 1, and so does the report (the
    direct match protection's target lowered, so that the own copies alone decide)."""
    originals, avatars = copies_release(tmp_path, 0.165)
    files = [str(originals), str(avatars), "--coords", "a,b,c"]
    assert main(["check", *files, "--max-own-copies", "5", "--quiet"]) == 1
    loose = ["--target", "row_direct_match_protection=50", "--target", "hidden_rate=0"]
    loose += ["--target", "local_cloaking_median=-1"]
    report = ["report", *files, *loose, "--format", "json"]
    assert main([*report, "--max-own-copies", "5"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False
    assert data["own_copies"] == {
        "value": 16.5,
        "target": 5.0,
        "direction": "<=",
        "passed": False,
        "reason": None,
    }
    assert main([*report, "--max-own-copies", "20"]) == 0
    assert json.loads(capsys.readouterr().out)["own_copies"]["passed"] is True
    assert main([*report, "--max-own-copies", "16.5"]) == 0  # at most: on it passes
    capsys.readouterr()
    main(["report", *files, *loose, "--max-own-copies", "5"])
    text = capsys.readouterr().out.splitlines()
    assert "own copies (%)                16.5        target <= 5       FAIL" in text
    # The API's report, the same rule.
    frames = pl.read_csv(originals), pl.read_csv(avatars)
    targets = {"row_direct_match_protection": 50.0, "hidden_rate": 0.0}
    targets["local_cloaking_median"] = -1.0
    api = phr.privacy_report(*frames, coords=["a", "b", "c"], targets=targets, max_own_copies=5)
    assert api.verdicts["own_copies_percent"] is False
    assert not api.passed


def long_report() -> PrivacyReport:
    """A report whose values and targets print at their 17 digits."""
    test = LinkTest(n=120, partners=8, closer=900, farther=60, ties=0, p_value=0.0)
    return PrivacyReport(
        n=120,
        n_hidden=109,
        hidden_rate=90.83333333333333,
        hidden_rate_low=84.0,
        hidden_rate_high=95.0,
        confidence=0.95,
        local_cloaking_median=12.0,
        distance_to_closest_median=0.5,
        closest_distances_ratio_median=0.5,
        row_direct_match_protection=100.0,
        targets={"hidden_rate": 90.83333333333333},
        evidence=Evidence(120, test, 0, ("a",)),
    )


def test_the_terminal_keeps_a_separator_whatever_the_width() -> None:
    lines = long_report().to_text().splitlines()
    line = next(line for line in lines if line.startswith("hidden rate (%)"))
    assert line.split() == [
        "hidden",
        "rate",
        "(%)",
        "90.83333333333333",
        "target",
        ">",
        "90.83333333333333",
        "FAIL",
    ]
    # Short values keep the columns of the first releases.
    assert "median DCR                    0.5         target > 0.2     PASS" in lines


def test_p_values_below_the_smallest_float_are_a_bound_in_every_format() -> None:
    assert p_text(0.0) == "p < 1e-300"
    assert p_text(5e-324) == "p < 1e-300"
    assert p_text(0.56) == "p = 0.56"
    assert p_text(2e-300) == "p = 2e-300"
    report = long_report()
    assert "p < 1e-300" in report.to_text()
    assert "p = 0," not in report.to_text()
    assert "p &lt; 1e-300" in report.to_html()
    assert report.to_dict()["evidence"]["link_test"]["p_value_text"] == "p < 1e-300"


def test_the_page_shows_no_markdown_and_the_settings_as_a_table() -> None:
    report = long_report().with_provenance(
        {
            "inputs": {},
            "settings": {
                "space": {"coords": ["a"], "ncp": 1},
                "link": {"by": "row order"},
                "tie_tol": 1e-9,
                "allow_unlinked": False,
                "by_row_order": True,
            },
            "versions": {"polars": "1"},
            "measured_at": "2026-01-01T00:00:00Z",
        }
    )
    page = report.to_html()
    assert "`" not in page
    assert '{"' not in page
    rows = parsed(page).rows
    assert ["Setting: tie_tol", "1e-09"] in rows
    assert ["Setting: space.coords", "a"] in rows
    assert ["Setting: by_row_order", "yes"] in rows
    text = report.to_text().splitlines()
    assert any(line.startswith("overrides") and "--by-row-order" in line for line in text)


def test_by_row_order_opens_the_page_with_a_banner() -> None:
    from dataclasses import replace

    report = replace(long_report(), overrides={"allow_unlinked": False, "by_row_order": True})
    banners = parsed(report.to_html()).banners
    assert len(banners) == 1
    assert "the by row order option" in banners[0]  # the page names no flag
    assert parsed(long_report().to_html()).banners == []
