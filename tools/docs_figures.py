"""Write the demonstration's figures, k table and privacy report into the docs, for the site.

    python tools/docs_figures.py [DIR]    # default docs/generated

`make docs` runs it before building: the pages show what ``hidden-rate demo --plot`` shows on
the same seeded cohort, so they cannot drift from the code. Nothing it writes is committed (the
docs venv has matplotlib, the ``plot`` extra, so the files can always be made again).

- ``k_table.md``: the demo's k table, as a Markdown table (the home page includes it);
- ``hidden_rate_by_k.png`` and ``local_cloaking.png``: the demo's two plots;
- ``privacy_report.html``: the privacy report of one of the demo's anonymizations (``REPORT_K``),
  against a holdout (another draw of the cohort, never avatarized) and with the attribute
  inference attack (``KNOWN`` known to the attacker, ``SECRET`` inferred), the linkability
  attack (the attacker's two tables ``AUX_COLS``) and the DCR baseline protection, so that
  the page shows every row the report can hold.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

from polars_hidden_rate import avatarize, privacy_report
from polars_hidden_rate.demo.cohort import DEFAULT_KS, cohort, k_table, sweep_k
from polars_hidden_rate.demo.plots import cloaking_histogram, k_curve

DOCS = Path(__file__).resolve().parent.parent / "docs"
NCP = 5  # the demo's default
SEED = 0
# Below the hidden-rate target at this k, so the example report shows a FAIL beside passes.
REPORT_K = 20
HOLDOUT_SEED = 1  # the holdout: records of the same population the generator never saw
KNOWN = ("age", "sex", "region")
SECRET = "diabetes"
AUX_COLS = (["age", "sex", "region"], ["height_cm", "weight_kg", "smoker"])  # linkability


def k_table_markdown(table: pl.DataFrame) -> str:
    """The k table as ``hidden-rate demo`` prints it, as a Markdown table."""
    lines = ["| k | hidden rate | median local cloaking |", "| ---: | ---: | ---: |"]
    lines += [
        f"| {k} | {rate:.2f} % | {median:g} |"
        for k, rate, median in table.select("k", "hidden_rate", "local_cloaking_median").iter_rows()
    ]
    return "\n".join(lines) + "\n"


def write(folder: Path) -> list[Path]:
    """Write every generated file into ``folder``; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    originals = cohort(seed=SEED)
    per_record = sweep_k(originals, DEFAULT_KS, ncp=NCP, seed=SEED)
    table = k_table(per_record)
    markdown = folder / "k_table.md"
    markdown.write_text(k_table_markdown(table))
    avatars = avatarize(originals, REPORT_K, ncp=NCP, seed=SEED)
    report = privacy_report(
        originals,
        avatars,
        ncp=NCP,
        by_row_order=True,
        holdout=cohort(len(originals), seed=HOLDOUT_SEED),
        known=list(KNOWN),
        secret=SECRET,
        aux_cols=AUX_COLS,
        dcr_baseline=True,
    )
    page = folder / "privacy_report.html"
    page.write_text(report.to_html(title=f"Privacy report: the demo cohort at k = {REPORT_K}"))
    return [
        markdown,
        k_curve(table, folder / "hidden_rate_by_k.png"),
        cloaking_histogram(per_record, folder / "local_cloaking.png"),
        page,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DOCS / "generated")
    args = parser.parse_args(argv)
    for path in write(args.folder):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
