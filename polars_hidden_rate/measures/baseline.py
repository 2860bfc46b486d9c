"""SDMetrics' DCR baseline protection: do the synthetic records sit as far from the originals
as random records would? The medians of two exact DCRs, the arrays at one power-of-two scale.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Unpack

import numpy as np
import polars as pl
from polars.exceptions import NoDataError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import check_seed
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import squared_nearest, walk_order
from polars_hidden_rate.engine.scale import canonical_scale
from polars_hidden_rate.frames import as_lazy
from polars_hidden_rate.measures.sdmetrics_space import (
    SPACE_ROW,
    DcrSpace,
    SdmetricsColumns,
    check_dcr_space,
    refuse_sdmetrics_options,
    sdmetrics_dcr,
)
from polars_hidden_rate.plan import CountOptions, CountPlan, plan, require_cpu
from polars_hidden_rate.progress import Progress, stage

NEAREST_STAGE = "DCR baseline protection, nearest records"
SDMETRICS_STAGE = "DCR baseline protection in SDMetrics' space, nearest records"


@dataclass(frozen=True)
class DcrBaseline:
    """SDMetrics' DCR baseline protection of a synthetic set.

    Attributes
    ----------
    score
        ``min(synthetic_median / random_median, 1)``, in [0, 1]: 1 when the synthetic
        records' median distance to the closest original is at least random records';
        NaN when the random records' median is 0 (as SDMetrics).
    synthetic_median, random_median
        The median DCR of the synthetic records and of the random ones, in the space's
        units (the mean of the two middle values for an even count).
    synthetic
        The number of synthetic records, and of random records drawn.
    originals
        The number of originals.
    seed
        The seed the random records were drawn with.
    space
        Where the distances were measured: ``"projected"`` (the package's space) or
        ``"sdmetrics"`` (SDMetrics' own distance, `polars_hidden_rate.measures.sdmetrics_space`).
    """

    score: float
    synthetic_median: float
    random_median: float
    synthetic: int
    originals: int
    seed: int = 0
    space: DcrSpace = "projected"

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        random: Float64Array,
        *,
        seed: int = 0,
        threads: int | None = None,
        progress: bool | None = None,
    ) -> DcrBaseline:
        """From the three sets' coordinates: one scale, one kd-tree of the originals; each
        median is taken at the canonical scale, so the score is the same whatever power of
        two the coordinates are multiplied by. The synthetic and random records walked are
        the units of the stage `NEAREST_STAGE` (``progress`` as
        `polars_hidden_rate.progress.stage` takes it)."""
        (points, queries, randoms), exponent = canonical_scale(
            originals, synthetic, random, names=("originals", "synthetic", "random records")
        )
        if len(points) == 0 or len(queries) == 0:
            raise NoDataError("there are no originals or no synthetic records to measure")
        threads = threads or usable_cores()
        tree = KdTree.build(points, threads=threads)
        with stage(NEAREST_STAGE, len(queries) + len(randoms), enabled=progress) as bar:
            found, baseline = (
                float(np.median(np.sqrt(_nearest_squared(tree, rows, threads, bar))))
                for rows in (queries, randoms)
            )
        score = math.nan if baseline == 0.0 else min(found / baseline, 1.0)
        return cls(
            score,
            math.ldexp(found, -exponent),
            math.ldexp(baseline, -exponent),
            len(queries),
            len(points),
            seed,
        )

    @classmethod
    def of_plan(cls, space: CountPlan, *, seed: int = 0) -> DcrBaseline:
        """In the space of a fitted plan (`CountPlan.fitted`), on this machine's CPU: the
        random records drawn over the originals' columns of that space (`random_records`,
        as many as the synthetic records), then projected with its fit as the synthetic
        records are."""
        columns = list(space.projection.features if space.projection else space.coords)
        drawn_from = space.originals.select(columns).collect()
        fitted = space.projection.fitted if space.projection is not None else None
        categorical = frozenset(
            () if fitted is None else (f.name for f in fitted.scaling.categorical)
        )
        synthetic = space.coordinates_of(space.avatars, "synthetic")
        random = random_records(drawn_from, categorical, len(synthetic), seed)
        return cls.of_arrays(
            space.coordinates_of(space.originals, "originals"),
            synthetic,
            space.coordinates_of(random.lazy(), "random records"),
            seed=seed,
            threads=space.threads,
            progress=space.progress,
        )

    @classmethod
    def of_sdmetrics(cls, space: CountPlan, *, seed: int = 0) -> DcrBaseline:
        """In SDMetrics' space (`polars_hidden_rate.measures.sdmetrics_space`), over the plan's
        columns (`SdmetricsColumns.of_plan`): the random records drawn over the originals'
        columns (`random_records`, as many as the synthetic records), each set's DCR to the
        originals (their ranges), the medians as SDMetrics takes them; the exact kd-tree search
        of `sdmetrics_dcr`."""
        columns = SdmetricsColumns.of_plan(space)
        drawn_from = space.originals.select(list(columns.names)).collect()
        categorical = frozenset(
            name
            for name, numerical in zip(columns.names, columns.numerical, strict=True)
            if not numerical
        )
        synthetic = space.avatars.select(list(columns.names)).collect()
        if drawn_from.height == 0 or synthetic.height == 0:
            raise NoDataError("there are no originals or no synthetic records to measure")
        random = random_records(drawn_from, categorical, synthetic.height, seed)
        read = columns.arrays(
            {"originals": drawn_from, "synthetic": synthetic, "random records": random}
        )
        with stage(SDMETRICS_STAGE, 2 * len(read["synthetic"]), enabled=space.progress) as bar:
            found, baseline = (
                float(
                    np.median(
                        sdmetrics_dcr(
                            read[role],
                            read["originals"],
                            columns.numerical,
                            threads=space.threads,
                            bar=bar,
                        )
                    )
                )
                for role in ("synthetic", "random records")
            )
        score = math.nan if baseline == 0.0 else min(found / baseline, 1.0)
        return cls(score, found, baseline, synthetic.height, drawn_from.height, seed, "sdmetrics")

    def rows(self) -> list[tuple[str, str]]:
        """The figures as (label, value) lines, for the text and the page of a report."""
        score = (
            "undefined (the random records' median DCR is 0)"
            if math.isnan(self.score)
            else f"{self.score:.4f} (1: as far from the originals as random records)"
        )
        return [
            ("DCR baseline protection", score),
            (
                "  median DCR",
                f"{self.synthetic_median:.4g} of the synthetic records, {self.random_median:.4g} "
                f"of {self.synthetic:,} random records (seed {self.seed})",
            ),
            *([SPACE_ROW] if self.space == "sdmetrics" else []),
        ]

    def to_dict(self) -> dict[str, float | int | str | None]:
        """The figures as JSON values (a NaN score as null)."""
        return {
            "score": None if math.isnan(self.score) else self.score,
            "synthetic_median": self.synthetic_median,
            "random_median": self.random_median,
            "synthetic": self.synthetic,
            "originals": self.originals,
            "seed": self.seed,
            "space": self.space,
        }


def column_seed(seed: int, name: str) -> int:
    """The seed of column ``name``'s own generator: the SHA-256 of ``"{seed}:{name}"`` (the
    name in UTF-8; a seed's digits hold no colon) as a 256-bit integer, so that a column draws
    the same values whatever other columns there are and in whatever order."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    return int.from_bytes(digest, "big")


def random_records(
    originals: pl.DataFrame, categorical: frozenset[str], records: int, seed: int
) -> pl.DataFrame:
    """``records`` random records over the originals' columns, as SDMetrics'
    ``_generate_random_data`` draws them, each column from its own generator
    ``numpy.random.default_rng(column_seed(seed, name))`` (SDMetrics takes one generator
    column by column in the frame's order, so that its draw moves when the columns are listed
    in another order): an integer column uniformly among the integers of its range
    (``integers(min, max + 1)``), a float column uniformly over its range (``uniform(min,
    max)``), any other, and any column in ``categorical``, uniformly among the originals'
    distinct values (sorted: the draws do not depend on the originals' order). Where a column
    has missing values (null, or NaN in a float column), as large a share of the draws is
    missing: after its values, the column's generator draws ``random(records)`` and a draw is
    missing where that is below the share (SDMetrics' mask is unseeded). The columns come back
    in the originals' order."""
    columns = []
    for name in originals.columns:
        column = originals.get_column(name)
        values = np.random.default_rng(column_seed(seed, name))
        present = column.drop_nulls()
        if column.dtype.is_float():
            present = present.filter(present.is_not_nan())
        if present.len() == 0:
            msg = f"column {name!r} of originals has no value to draw random records from"
            raise NoDataError(msg)
        if name in categorical or not column.dtype.is_numeric():
            choices = present.unique().sort()
            drawn = choices.gather(values.choice(choices.len(), size=records))
        elif column.dtype.is_integer():
            first, last = int(present.min()), int(present.max())  # type: ignore[arg-type]
            drawn = pl.Series(name, values.integers(first, last + 1, size=records))
            drawn = drawn.cast(column.dtype)
        else:
            low, high = float(present.min()), float(present.max())  # type: ignore[arg-type]
            drawn = pl.Series(name, values.uniform(low, high, size=records)).cast(column.dtype)
        share = (column.len() - present.len()) / column.len()
        if share > 0.0:
            drawn = drawn.scatter(np.flatnonzero(values.random(records) < share), None)
        columns.append(drawn.alias(name))
    return pl.DataFrame(columns)


def dcr_baseline_protection(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    *,
    seed: int = 0,
    space: DcrSpace = "projected",
    **options: Unpack[CountOptions],
) -> DcrBaseline:
    """SDMetrics' DCR baseline protection: are the synthetic records as far from the
    originals as random records would be?

    The median of the synthetic records' distance to the closest original, over that of
    as many random records drawn uniformly over the originals' columns (numbers over their
    range, categories among the originals' own; `random_records`); the score is ``min(ratio,
    1)``. Target: at least SDMetrics' 1, a score near 0 says the synthetic records hug the
    originals far more than chance. The random records are drawn in the originals' columns,
    then projected with the projection fitted on the originals, as the synthetic records
    are: the distances are those of [`local_cloaking`][polars_hidden_rate.local_cloaking]'s
    space, exact in float64 (with ``coords``, the random records are drawn over the
    coordinates' ranges). SDMetrics measures with its per-column normalised distance instead
    (docs/metrics.md). Deterministic: the same ``seed`` draws the same records, whatever the
    order the columns are listed in (each column has its own generator, `column_seed`).

    Parameters
    ----------
    originals
        The records the synthetic set was generated from.
    synthetic
        The synthetic records, any number of them.
    seed
        The seed of the random records.
    space
        ``"projected"`` (default), the package's space, or ``"sdmetrics"``, SDMetrics' own
        distance (docs/metrics.md) over the ``features`` (``categorical`` names the numbers
        SDMetrics' metadata would call categorical, or ``"auto"``; ``ncp``, ``impute`` and
        ``tie_tol`` are refused there): the medians are then those SDMetrics gives for the
        same random records.
    **options
        ``coords`` or ``features``, ``ncp``, ``categorical``, ``impute``, ``tie_tol`` and
        ``threads``, as for [`local_cloaking`][polars_hidden_rate.local_cloaking]; the link
        options, ``cluster`` and ``device="gpu"`` are refused.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"age": [20.0, 40.0, 60.0, 80.0]})
    >>> found = phr.dcr_baseline_protection(originals, originals)  # copies
    >>> found.synthetic_median, found.score
    (0.0, 0.0)
    """
    for option in ("on", "left_on", "right_on"):
        if options.get(option) is not None:
            msg = f"dcr_baseline_protection() takes no `{option}`: it needs no link"
            raise ValueError(msg)
    require_cpu(options, "dcr_baseline_protection")
    seed = check_seed(seed)
    if check_dcr_space(space, "dcr_baseline_protection") == "sdmetrics":
        refuse_sdmetrics_options(options, "dcr_baseline_protection")
    request = plan(originals, synthetic, options, caller="dcr_baseline_protection")
    if space == "sdmetrics":
        return DcrBaseline.of_sdmetrics(request, seed=seed)
    columns = list(request.projection.features if request.projection else request.coords)
    read = {
        role: as_lazy(frame, role).select(columns).collect()
        for role, frame in (("originals", originals), ("synthetic", synthetic))
    }
    if read["originals"].height == 0 or read["synthetic"].height == 0:
        raise NoDataError("there are no originals or no synthetic records to measure")
    fitted = plan(
        read["originals"], read["synthetic"], options, caller="dcr_baseline_protection"
    ).fitted()
    return DcrBaseline.of_plan(fitted, seed=seed)


def _nearest_squared(
    tree: KdTree, queries: Float64Array, threads: int, bar: Progress | None = None
) -> Float64Array:
    """Each query's ``d2`` to its nearest point of ``tree``, walked in the tree's order."""
    return squared_nearest(
        tree, queries, threads=threads, rows=walk_order(tree, queries, threads=threads), bar=bar
    )
