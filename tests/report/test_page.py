"""The page a data-protection officer reads, and one reading of every figure in the text, the
JSON and the page of one report: settings and long lists folded, no command-line syntax, a
heading per attack, "synthetic records" for a set not linked one per original, the note on
codes projected as numbers, p-values and ratios in words that read right."""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl
import pytest

from polars_hidden_rate.cli import main
from polars_hidden_rate.report.sections import _against_chance
from tests.helpers import SHARED_DATASETS

pytestmark = pytest.mark.filterwarnings("ignore:the holdout holds")
PRIVACY = SHARED_DATASETS / "aids" / "privacy"


def population(rows: int, seed: int) -> pl.DataFrame:
    """Keyless records of one population with 0/1 and graded codes stored as numbers."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "age": rng.normal(40.0, 9.0, rows).round(1),
            "weight": rng.normal(70.0, 12.0, rows).round(1),
            "treated": rng.integers(0, 2, rows),
            "grade": rng.integers(1, 5, rows).astype(float),
            "cd4": rng.normal(350.0, 90.0, rows).round(0),
        }
    ).with_columns(
        pl.when(pl.int_range(rows) % 7 == 0).then(None).otherwise(pl.col("cd4")).alias("cd4")
    )


def visible(page: str) -> str:
    """What a reader sees of ``page``: its text, without the style sheet and the tags."""
    body = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


class Report(NamedTuple):
    """One report in its three formats, from the command line."""

    text: str
    data: dict[str, Any]
    page: str


def run(folder: Path, *args: str) -> Report:
    """``hidden-rate report`` of ``args``: the text, the JSON and the page of one report."""
    said = []
    for form in ("text", "json"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["report", *args, "--format", form, "--html", str(folder / "page.html")])
        said.append(out.getvalue())
    return Report(said[0], json.loads(said[1]), (folder / "page.html").read_text())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("page")
    for name, rows, seed in (("originals", 300, 1), ("synthetic", 450, 2), ("holdout", 200, 3)):
        population(rows, seed).write_csv(folder / f"{name}.csv")
    return folder


@pytest.fixture(scope="module")
def unlinked(files: Path) -> Report:
    """A CT-GAN-like set of 1.5 times the originals' rows, with a holdout and every attack."""
    return run(
        files,
        *(str(files / f"{name}.csv") for name in ("originals", "synthetic")),
        *("--holdout", str(files / "holdout.csv"), "--impute", "median"),
        *("--known", "age,weight", "--secret", "cd4"),
        *("--aux-a", "age,weight", "--aux-b", "grade,cd4"),
        *("--singling-out", "univariate", "--dcr-baseline"),
    )


def alone(files: Path, *more: str) -> Report:
    """The same set without a holdout."""
    sets = (str(files / f"{name}.csv") for name in ("originals", "synthetic"))
    return run(files, *sets, "--impute", "median", *more)


def test_the_settings_and_the_fills_are_folded_and_summarised(
    unlinked: Report,
) -> None:
    page = unlinked.page
    assert re.search(r"<details>\s*<summary>Settings \(\d+\)</summary>", page)
    assert "<summary>5 columns filled (median)</summary>" in page
    # No setting nor fill is a row outside a <details>.
    outside = re.sub(r"<details>.*?</details>", "", page, flags=re.S)
    assert "space.ncp" not in outside
    assert "fills" not in outside
    assert "5 columns filled (median)</td>" in page  # the settings' summary row


def test_the_page_shows_no_command_line_syntax(unlinked: Report, files: Path) -> None:
    without = alone(files)
    for page in (unlinked.page, without.page):
        shown = visible(page)
        assert not re.findall(r"(?<![\w-])--[a-z]", shown), re.findall(r"--[a-z][\w-]*", shown)
    # The terminal keeps the flags: the page drops them, nothing else.
    assert "--holdout" in without.text
    assert "add real records the generator never saw as a holdout to judge" in visible(without.page)


def test_every_attack_that_ran_has_a_heading_and_a_sentence(unlinked: Report) -> None:
    page = unlinked.page
    headings = re.findall(r"<h2>(.*?)</h2>\n<p>(.*?)</p>", page)
    titles = {title for title, _ in headings}
    for attack in (
        "Membership attack",
        "DCR overfitting",
        "Attribute inference attack",
        "Linkability attack",
        "Singling-out attack",
        "DCR baseline protection",
    ):
        assert any(title.startswith(attack) for title in titles), (attack, titles)
    assert all(sentence.endswith(".") for _, sentence in headings)
    # Each attack against the holdout is judged in the top table too.
    data = unlinked.data
    for name in ("membership_auc", "inference_risk", "linkability_risk", "singling_out_risk"):
        assert name in data["holdout_metrics"]
    top = page.split("</table>")[0]
    for label in ("Membership AUC", "Inference risk", "Linkability risk", "Singling-out risk"):
        assert label.lower() in top.lower(), label


def test_a_set_not_linked_one_per_original_is_called_synthetic_records(
    unlinked: Report,
) -> None:
    assert unlinked.data["link_use"] == "absent"
    page = unlinked.page
    assert "<th>synthetic records</th>" in page  # the file's role
    assert "<th>avatars</th>" not in page
    lines = unlinked.text.splitlines()
    assert any(line.startswith("synthetic records     '") for line in lines)
    assert not any(line.startswith("avatars ") for line in lines)
    link = next(line for line in lines if line.startswith("link "))
    assert "n/a: no one-avatar-per-original link" in link  # not "row order"
    # The histograms' counts are of synthetic records, not of avatars.
    assert ">avatars<" not in page
    assert ">synthetic records<" in page


def test_codes_projected_as_numbers_are_said_and_the_option_named(
    unlinked: Report, files: Path
) -> None:
    space = unlinked.data["provenance"]["settings"]["space"]
    assert space["few_valued_numbers"] == ["treated", "grade"]
    text = unlinked.text
    line = next(line for line in text.splitlines() if line.startswith("numbers as numbers"))
    assert "2 number columns with at most 10 distinct values projected as numbers" in line
    assert "'treated', 'grade'" in line
    assert 'categorical="auto" (--categorical auto)' in line
    shown = visible(unlinked.page)
    assert "projected as numbers ('treated', 'grade'); categorical=\"auto\" treats them" in shown
    auto = alone(files, "--categorical", "auto")
    assert auto.data["provenance"]["settings"]["space"]["few_valued_numbers"] == []
    assert "numbers as numbers" not in auto.text
    assert "Numbers as numbers" not in auto.page


def test_sdmetrics_rule_in_this_space_is_named_so_in_the_text_and_the_page(
    unlinked: Report,
) -> None:
    score = unlinked.data["holdout"]["dcr_overfitting_protection"]["sdmetrics_score"]
    for shown in (unlinked.text, visible(unlinked.page)):
        assert "SDMetrics' score" not in shown
        assert re.search(rf"SDMetrics' rule, this space\s+{score:.4f}", shown)


@pytest.mark.parametrize(
    ("ratio", "words"),
    [
        (1.0, "no more members than chance"),
        (1.004, "no more members than chance"),
        (0.9, "fewer members than chance"),
        (1.17, "17 % more members than chance"),
        (2.8, "2.8 times as many members as chance"),
    ],
)
def test_a_ratio_near_one_reads_right(ratio: float, words: str) -> None:
    assert _against_chance(ratio) == words


@pytest.mark.skipif(not PRIVACY.is_dir(), reason=f"{PRIVACY} absent (../shared/datasets)")
def test_an_underflowing_p_value_reads_as_a_bound_in_the_text_the_json_and_the_page(
    tmp_path: Path,
) -> None:
    report = run(
        tmp_path,
        *(str(PRIVACY / f"{n}.csv") for n in ("holdout_0", "avatar_0")),
        "--impute",
        "median",
    )
    test = report.data["provenance"]["settings"]["link_test"]
    assert test["p_value"] == 0.0  # below the smallest float
    evidence = report.data["evidence"]["link_test"]
    assert test["p_value_text"] == evidence["p_value_text"] == "p < 1e-300"
    assert "p < 1e-300" in report.text
    assert re.search(r"link_test\.p_value</th><td>p &lt; 1e-300</td>", report.page)
    assert not re.search(r"p_value</th><td>0</td>", report.page)


WBCD = SHARED_DATASETS / "wbcd" / "privacy"


@pytest.mark.skipif(not WBCD.is_dir(), reason=f"{WBCD} absent (../shared/datasets)")
def test_wbcd_avatars_read_their_copies_and_the_holdouts_figure_alike_everywhere(
    tmp_path: Path,
) -> None:
    """WBCD's avatars: a DCR overfitting protection of 1 is read with the copies of training
    records the holdout holds too, beside it in the text and the page; the direct match
    protection judged against the holdout's own figure prints it as the holdout's line does,
    not in seventeen digits."""
    files = [str(WBCD / f"{n}.csv") for n in ("holdout_0", "avatar_0")]
    report = run(tmp_path, *files, "--holdout", str(WBCD / "remaining_0.csv"), "--impute", "median")
    overfit = report.data["holdout"]["dcr_overfitting_protection"]
    assert report.data["holdout_metrics"]["dcr_overfitting_protection"]["value"] == 1.0
    copies = overfit["copies_of_training"]
    shared = overfit["copies_also_in_holdout"]
    aside = f"{copies:,} synthetic records copy a training record, {shared:,} of them a holdout"
    line = next(x for x in report.text.splitlines() if x.startswith("DCR overfitting protection "))
    assert aside in line
    assert aside in visible(report.page).split("Correlation protection")[0]  # the top table
    match = report.data["metrics"]["row_direct_match_protection"]
    assert match["judged_against"] == "reference"
    assert f"target >= {match['reference']:.4g}" in report.text
    assert f"&ge; {match['reference']:.4g}</td>" in report.page
    assert repr(match["reference"]) not in report.text + report.page
