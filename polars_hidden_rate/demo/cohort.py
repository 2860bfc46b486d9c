"""The demonstration: a synthetic cohort the package makes itself, and how k moves the hidden rate.

[`cohort`][polars_hidden_rate.demo.cohort.cohort] draws a seeded mixed-type cohort (no
download, no data file); [`sweep_k`][polars_hidden_rate.demo.cohort.sweep_k] avatarizes it for
several ``k`` and measures each anonymization;
[`k_table`][polars_hidden_rate.demo.cohort.k_table] sums that up. ``hidden-rate demo`` (and
``make demo``) runs all three.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from polars_hidden_rate.api import local_cloaking
from polars_hidden_rate.checks import check_count, check_seed
from polars_hidden_rate.measures.summary import summarize

DEFAULT_KS = (2, 5, 10, 20, 50)


def cohort(rows: int = 3000, *, seed: int = 0) -> pl.DataFrame:
    """A synthetic patient cohort with correlated numeric and categorical columns.

    The columns: ``age`` (years, integer), ``sex``, ``height_cm``, ``weight_kg``,
    ``systolic_bp`` (mmHg, integer), ``cholesterol`` (mmol/L), ``smoker``
    (never/former/current), ``diabetes`` (no/yes), ``region`` and
    ``visits_per_year`` (integer). Weight follows height and age, blood
    pressure follows age and weight, diabetes is likelier with age and weight,
    and so on, so that the projection has structure to find.

    Parameters
    ----------
    rows
        Number of records.
    seed
        Seed of the random generator: the same seed gives the same cohort.

    Returns
    -------
    DataFrame

    Examples
    --------
    >>> from polars_hidden_rate.demo.cohort import cohort
    >>> frame = cohort(5, seed=1)
    >>> frame.shape
    (5, 10)
    >>> frame.equals(cohort(5, seed=1))
    True
    """
    rows = check_count(rows, "rows")
    rng = np.random.default_rng(check_seed(seed))
    age = np.clip(rng.normal(52, 16, rows), 18, 95).round()
    male = rng.random(rows) < 0.48
    height = np.where(male, 176.0, 163.0) + rng.normal(0, 7, rows) - 0.04 * (age - 50)
    bmi = 23.5 + 0.06 * (age - 50) + rng.gamma(4.0, 1.1, rows) - 2.5
    weight = bmi * (height / 100) ** 2
    smoker_odds = rng.random(rows)
    smoker = np.where(
        smoker_odds < 0.22 - 0.001 * (age - 50),
        "current",
        np.where(smoker_odds < 0.45 + 0.003 * (age - 50), "former", "never"),
    )
    diabetes_logit = -3.2 + 0.045 * (age - 50) + 0.16 * (bmi - 25)
    diabetes = np.where(rng.random(rows) < 1 / (1 + np.exp(-diabetes_logit)), "yes", "no")
    systolic = 118 + 0.45 * (age - 50) + 0.9 * (bmi - 25) + 4 * male + rng.normal(0, 11, rows)
    cholesterol = 5.1 + 0.012 * (age - 50) + 0.3 * (smoker == "current") + rng.normal(0, 0.8, rows)
    region = rng.choice(["north", "south", "east", "west"], rows, p=[0.3, 0.3, 0.25, 0.15])
    visit_rate = 2.0 + 0.04 * (age - 50).clip(0) + 3.0 * (diabetes == "yes")
    visits = rng.poisson(visit_rate)
    return pl.DataFrame(
        {
            "age": age.astype(np.int64),
            "sex": np.where(male, "M", "F"),
            "height_cm": height.round(1),
            "weight_kg": weight.round(1),
            "systolic_bp": systolic.round().astype(np.int64),
            "cholesterol": cholesterol.clip(2.0).round(2),
            "smoker": smoker,
            "diabetes": diabetes,
            "region": region,
            "visits_per_year": visits.astype(np.int64),
        }
    )


def sweep_k(
    originals: pl.DataFrame,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    ncp: int = 5,
    seed: int | None = 0,
) -> pl.DataFrame:
    """Avatarize ``originals`` for each ``k`` and measure the local cloaking of every record.

    Each anonymization is [`polars_hidden_rate.avatarize`][polars_hidden_rate.avatarize.avatarize]
    with ``ncp`` components; its local cloaking is measured on the projection of the
    originals' columns with the same ``ncp``.

    Parameters
    ----------
    originals
        The records to anonymize.
    ks
        The numbers of neighbours to try.
    ncp
        Number of projected components, for the avatars and for the metric.
    seed
        Seed of [`polars_hidden_rate.avatarize`][polars_hidden_rate.avatarize.avatarize].

    Returns
    -------
    DataFrame
        One row per ``(k, record)``: columns ``k`` and ``local_cloaking``.
    """
    from polars_hidden_rate import avatarize

    parts = []
    for k in ks:
        avatars = avatarize(originals, k, ncp=ncp, seed=seed)
        measured = local_cloaking(originals, avatars, ncp=ncp)
        parts.append(measured.select(pl.lit(k, pl.UInt32).alias("k"), "local_cloaking"))
    return pl.concat(parts)


def k_table(per_record: pl.DataFrame) -> pl.DataFrame:
    """The hidden rate and local cloaking median for each ``k`` of
    [`sweep_k`][polars_hidden_rate.demo.cohort.sweep_k]'s output.

    Examples
    --------
    >>> import polars as pl
    >>> from polars_hidden_rate.demo.cohort import k_table
    >>> per_record = pl.DataFrame({"k": [2, 2, 5, 5], "local_cloaking": [0, 2, 3, 5]})
    >>> k_table(per_record)
    shape: (2, 3)
    ┌─────┬─────────────┬───────────────────────┐
    │ k   ┆ hidden_rate ┆ local_cloaking_median │
    │ --- ┆ ---         ┆ ---                   │
    │ i64 ┆ f64         ┆ f64                   │
    ╞═════╪═════════════╪═══════════════════════╡
    │ 2   ┆ 50.0        ┆ 1.0                   │
    │ 5   ┆ 100.0       ┆ 4.0                   │
    └─────┴─────────────┴───────────────────────┘
    """
    rows = []
    for (k,), group in per_record.group_by("k", maintain_order=True):
        summary = summarize(group)
        rows.append((k, summary.hidden_rate, summary.local_cloaking_median))
    return pl.DataFrame(
        rows,
        schema={
            "k": per_record.schema["k"],
            "hidden_rate": pl.Float64,
            "local_cloaking_median": pl.Float64,
        },
        orient="row",
    )
