"""SDMetrics' DCR overfitting protection, read against the split: does the synthetic set lie
closer to the records it was generated from than to real records it never saw, more often
than a generator that learnt no record would put it? Every distance exact in float64, the
three arrays brought to one power-of-two scale first, two distances within ``tie_tol`` of
each other a tie (local cloaking's rule), which counts for the holdout. Beside the score, the
synthetic records that are copies of a training record: a copy of a record the holdout holds
too is a tie, which the score does not read as a copy."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any, Unpack

import numpy as np
import polars as pl
from polars.exceptions import NoDataError

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.checks import check_tie_tol
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import (
    squared_nearest,
    walk_order,
    within_reach,
)
from polars_hidden_rate.engine.scale import (
    canonical_scale,
)
from polars_hidden_rate.frames import as_lazy
from polars_hidden_rate.measures.holdout import HoldoutSpace, holdout_plan, warn_holdout_overlap
from polars_hidden_rate.measures.sdmetrics_space import (
    SPACE_ROW,
    DcrSpace,
    SdmetricsColumns,
    check_dcr_space,
    refuse_sdmetrics_options,
    sdmetrics_dcr,
)
from polars_hidden_rate.plan import CountOptions, CountPlan
from polars_hidden_rate.progress import stage

DEFAULT_TIE_TOL = 1e-9
"""Local cloaking's default relative tie tolerance, the rounding allowance of every
comparison of two distances here."""


class SmallHoldoutWarning(UserWarning):
    """The holdout holds fewer than half as many records as the training set (SDMetrics'
    recommendation): the split-corrected score divides by ``1 - null_share``, small, and
    reads a few records' chance as overfitting or its absence."""


@dataclass(frozen=True)
class DcrOverfitting:
    """The DCR overfitting protection of a synthetic set, against a holdout of any size.

    Attributes
    ----------
    score
        ``min((1 - closer_to_training) / (1 - null_share), 1)``, in [0, 1]: 1 when no more
        synthetic records lie closer to the training originals than a generator that learnt
        no record would put there, 0 when every one does. SDMetrics' score where the
        holdout is as large as the training set.
    sdmetrics_score
        SDMetrics' own ``min(2 (1 - closer_to_training), 1)``, which takes the null share
        for 1/2 whatever the sizes: below 1 for any generator once the training set is
        the larger.
    closer_to_training
        The share of synthetic records whose nearest training original is closer than their
        nearest holdout record by more than the tie rule allows:
        ``d2_training * (1 + tie_tol) < d2_holdout`` (a tie counts for the holdout, as in
        SDMetrics).
    null_share
        ``originals / (originals + holdout)``: the share closer to the training set
        expected of synthetic records drawn from the population, independent of which real
        records were the training ones (each real record is then as likely as any other to
        be a synthetic record's nearest).
    synthetic, originals, holdout
        The sizes of the three sets.
    tie_tol
        The relative tie tolerance the distances were compared with (0 in SDMetrics' space,
        which compares them exactly).
    copies_of_training
        The number of synthetic records at distance 0 of a training original: copies of a
        training record in the measure's space.
    copies_also_in_holdout
        How many of those lie at distance 0 of a holdout record too (a record the training
        set and the holdout share): each is a tie, which counts for the holdout, so the
        score reads these copies as no closer to the training set (`copies_message`).
    space
        Where the distances were measured: ``"projected"`` (the package's space) or
        ``"sdmetrics"`` (SDMetrics' own distance, `polars_hidden_rate.measures.sdmetrics_space`).
    """

    score: float
    sdmetrics_score: float
    closer_to_training: float
    null_share: float
    synthetic: int
    originals: int
    holdout: int
    tie_tol: float = DEFAULT_TIE_TOL
    copies_of_training: int = 0
    copies_also_in_holdout: int = 0
    space: DcrSpace = "projected"

    @property
    def closer_to_holdout(self) -> float:
        """The share of synthetic records not closer to the training originals: their
        nearest holdout record is as close (within ``tie_tol``) or closer."""
        return 1.0 - self.closer_to_training

    @property
    def small_holdout(self) -> bool:
        """Whether the holdout holds fewer than half as many records as the training set."""
        return 2 * self.holdout < self.originals

    def small_holdout_message(self) -> str:
        """Why a small holdout weakens the score (`SmallHoldoutWarning`'s message)."""
        return (
            f"the holdout holds {self.holdout:,} records for {self.originals:,} training "
            f"records, under half (SDMetrics' recommendation): the DCR overfitting protection "
            f"is read against a null share of {self.null_share:.4f} closer to the training "
            f"set, and its score divides by {1.0 - self.null_share:.4f}, so chance in a few "
            "records moves it far"
        )

    def copies_message(self) -> str | None:
        """The copies of training records, and what the score reads of those the holdout
        holds too; None without any."""
        if not self.copies_of_training:
            return None
        copies, shared = self.copies_of_training, self.copies_also_in_holdout
        found = (
            f"{copies:,} of {self.synthetic:,} synthetic records "
            f"({100 * copies / self.synthetic:.2f} %) at distance 0 of a training record (in "
            "this space)"
        )
        if not shared:
            return f"{found}, none of a holdout record: each counts as closer to the training set"
        return (
            f"{found}, {shared:,} of them of a holdout record too, a record both sets hold: "
            f"ties count for the holdout, so the score reads these {shared:,} copies as no "
            "closer to the training set"
        )

    def rows(self) -> list[tuple[str, str]]:
        """The figures as (label, value) lines, for the holdout's section of a report: the
        score, SDMetrics' beside it, the copies of training records when there are any and
        the small holdout's warning."""
        copies = self.copies_message()
        return [
            (
                "DCR overfitting protection",
                f"{self.score:.4f} ({100 * self.closer_to_training:.2f} % of synthetic "
                "records closer to the originals than to the holdout; "
                f"{100 * self.null_share:.2f} % without overfitting at this split)",
            ),
            # SDMetrics' rule, in this report's space: SDMetrics' own figure only in its space.
            (
                "  SDMetrics' rule, this space",
                f"{self.sdmetrics_score:.4f} (takes the null share for 50 %)",
            ),
            *([SPACE_ROW] if self.space == "sdmetrics" else []),
            *([] if copies is None else [("  copies of training records", copies)]),
            *([("  warning", self.small_holdout_message())] if self.small_holdout else []),
        ]

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
        tie_tol: float = DEFAULT_TIE_TOL,
    ) -> DcrOverfitting:
        """From the three sets' coordinates: one scale, a kd-tree of each real set."""
        tie_tol = check_tie_tol(tie_tol)
        (training, queries, others), _ = canonical_scale(
            originals, synthetic, holdout, names=("originals", "synthetic", "holdout")
        )
        threads = threads or usable_cores()
        training_tree = KdTree.build(training, threads=threads)
        rows = walk_order(training_tree, queries, threads=threads)  # one order for both walks
        to_training = squared_nearest(training_tree, queries, threads=threads, rows=rows)
        holdout_tree = KdTree.build(others, threads=threads)
        return cls.of_nearest(
            to_training, holdout_tree, queries, len(training), threads, rows, tie_tol=tie_tol
        )

    @classmethod
    def of_distances(
        cls,
        to_training: Float64Array,
        to_holdout: Float64Array,
        originals: int,
        holdout: int,
        *,
        tie_tol: float = DEFAULT_TIE_TOL,
    ) -> DcrOverfitting:
        """From each synthetic record's ``d2`` to its nearest training original and to its
        nearest holdout record, at one scale."""
        tie_tol = check_tie_tol(tie_tol)
        closer = int(np.count_nonzero(to_training * (1.0 + tie_tol) < to_holdout))
        copies = to_training == 0.0
        shared = int(np.count_nonzero(copies & (to_holdout == 0.0)))
        return cls._of_closer(
            closer, len(to_training), originals, holdout, tie_tol, (int(copies.sum()), shared)
        )

    @classmethod
    def of_nearest(
        cls,
        to_training: Float64Array,
        holdout: KdTree,
        synthetic: Float64Array,
        originals: int,
        threads: int,
        rows: IndexArray | None = None,
        *,
        tie_tol: float = DEFAULT_TIE_TOL,
    ) -> DcrOverfitting:
        """`of_distances` from each synthetic record's ``d2`` to its nearest training original
        and the holdout's kd-tree, at one scale: a record is closer to the training originals
        when no holdout record lies within that ``d2`` times ``1 + tie_tol`` (`within_reach`,
        the synthetic records walked in the order ``rows``: the same answer as comparing the
        two nearest, for less)."""
        tie_tol = check_tie_tol(tie_tol)
        reach = to_training * (1.0 + tie_tol)  # the threshold local cloaking's rule gives
        not_closer = within_reach(holdout, synthetic, reach, threads=threads, rows=rows)
        closer = len(to_training) - int(np.count_nonzero(not_closer))
        # A copy's reach is 0: a holdout record within it is a copy too.
        copies = to_training == 0.0
        shared = int(np.count_nonzero(copies & not_closer))
        return cls._of_closer(
            closer,
            len(to_training),
            originals,
            holdout.avatars,
            tie_tol,
            (int(copies.sum()), shared),
        )

    @classmethod
    def _of_closer(
        cls,
        closer: int,
        synthetic: int,
        originals: int,
        holdout: int,
        tie_tol: float,
        copies: tuple[int, int],
    ) -> DcrOverfitting:
        share = closer / synthetic
        null = originals / (originals + holdout)
        # (1 - share) / (1 - null), 1 - null = holdout / (originals + holdout): one division
        # of Python ints, correctly rounded. No holdout: every record is closer to the
        # training set, and the score 0 (SDMetrics' too).
        corrected = (
            min((synthetic - closer) * (originals + holdout) / (synthetic * holdout), 1.0)
            if holdout
            else 0.0
        )
        found = cls(
            corrected,
            min(2.0 * (1.0 - share), 1.0),
            share,
            null,
            synthetic,
            originals,
            holdout,
            tie_tol,
            *copies,
        )
        if found.small_holdout:
            warnings.warn(found.small_holdout_message(), SmallHoldoutWarning, stacklevel=3)
        return found

    @classmethod
    def of_sdmetrics(cls, request: CountPlan, holdout: pl.LazyFrame) -> DcrOverfitting:
        """In SDMetrics' space (`polars_hidden_rate.measures.sdmetrics_space`), over the plan's
        columns (`SdmetricsColumns.of_plan`): each synthetic record's DCR to the training
        originals (their ranges) and to the holdout (its own ranges), compared as SDMetrics
        compares them, strictly (``tie_tol`` 0). The exact kd-tree search of `sdmetrics_dcr`."""
        columns = SdmetricsColumns.of_plan(request)
        read = columns.read(
            {"originals": request.originals, "synthetic": request.avatars, "holdout": holdout}
        )
        synthetic = read["synthetic"]
        if len(synthetic) == 0:
            raise NoDataError("there are no synthetic records to measure")
        if len(read["holdout"]) == 0:
            raise NoDataError("the holdout holds no records to measure")
        with stage(
            "DCR overfitting protection in SDMetrics' space, nearest records",
            2 * len(synthetic),
            enabled=request.progress,
        ) as bar:
            to_training, to_holdout = (
                sdmetrics_dcr(
                    synthetic, read[role], columns.numerical, threads=request.threads, bar=bar
                )
                for role in ("originals", "holdout")
            )
        found = cls.of_distances(
            to_training, to_holdout, len(read["originals"]), len(read["holdout"]), tie_tol=0.0
        )
        return replace(found, space="sdmetrics")

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON values (with ``copies_of_training`` and
        ``copies_also_in_holdout``)."""
        return {
            "score": self.score,
            "sdmetrics_score": self.sdmetrics_score,
            "closer_to_training": self.closer_to_training,
            "closer_to_holdout": self.closer_to_holdout,
            "null_share": self.null_share,
            "synthetic": self.synthetic,
            "originals": self.originals,
            "holdout": self.holdout,
            "small_holdout": self.small_holdout,
            "tie_tol": self.tie_tol,
            "copies_of_training": self.copies_of_training,
            "copies_also_in_holdout": self.copies_also_in_holdout,
            "space": self.space,
        }


def dcr_overfitting_protection(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    *,
    space: DcrSpace = "projected",
    **options: Unpack[CountOptions],
) -> DcrOverfitting:
    """The DCR overfitting protection (SDMetrics'), read against the split: does the
    synthetic set lie closer to the records it was generated from than to real records it
    never saw?

    For each synthetic record, its distance to the closest training original and to the
    closest holdout record; ``closer_to_training`` is the share where the first is smaller
    by more than the tie rule allows (``d2_training * (1 + tie_tol) < d2_holdout``, local
    cloaking's rule: a tie counts for the holdout). A generator that learnt the population,
    not its records, puts a share ``null_share = n_training / (n_training + n_holdout)`` of
    them closer to the training set (a half only when the two are as large); the score
    ``min((1 - closer_to_training) / (1 - null_share), 1)`` is 1 there and 0 when every
    synthetic record is closer to the training set. SDMetrics' own ``min(2 (1 -
    closer_to_training), 1)``, which takes the null share for a half whatever the split, is
    ``sdmetrics_score``. A holdout under half the training set's size warns
    (`SmallHoldoutWarning`). The synthetic records at distance 0 of a training original are
    counted beside the score (``copies_of_training``), and those of them at distance 0 of a
    holdout record too (``copies_also_in_holdout``): a record the two real sets share is a
    tie, which counts for the holdout, so the score alone does not read such a copy as one.
    By default the distances are those of [`local_cloaking`][polars_hidden_rate.local_cloaking]'s
    space, exact in float64; with ``space="sdmetrics"``, SDMetrics' own per-column normalised
    distance (each reference set's ranges, missing values as SDMetrics compares them), so
    that ``closer_to_training`` and ``sdmetrics_score`` are SDMetrics' own figures
    (docs/metrics.md).

    Parameters
    ----------
    originals, synthetic, holdout, **options
        As for [`membership_risk`][polars_hidden_rate.membership_risk]; ``tie_tol``
        (default 1e-9) as for [`local_cloaking`][polars_hidden_rate.local_cloaking].
    space
        ``"projected"`` (default), the package's space, or ``"sdmetrics"``, SDMetrics' own
        distance over the ``features`` (``categorical`` names the numbers SDMetrics'
        metadata would call categorical, or ``"auto"``; ``ncp``, ``impute`` and
        ``tie_tol`` are refused there).

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 2.0]})
    >>> holdout = pl.DataFrame({"Dim1": [1.0, 3.0]})
    >>> synthetic = pl.DataFrame({"Dim1": [0.1, 2.9, 1.5, 0.5]})
    >>> found = phr.dcr_overfitting_protection(originals, synthetic, holdout, coords="Dim1")
    >>> found.closer_to_training, found.null_share, found.score
    (0.25, 0.5, 1.0)
    """
    caller = "dcr_overfitting_protection"
    if check_dcr_space(space, caller) == "sdmetrics":
        refuse_sdmetrics_options(options, caller)
        request = holdout_plan(originals, synthetic, holdout, options, caller)
        held_out = as_lazy(holdout, "holdout")
        warn_holdout_overlap(request.originals, held_out, request.link.left)
        return DcrOverfitting.of_sdmetrics(request, held_out)
    read = HoldoutSpace.read(originals, synthetic, holdout, options, caller)
    return DcrOverfitting.of_arrays(
        read.originals,
        read.synthetic,
        read.holdout,
        threads=read.threads,
        tie_tol=read.tie_tol,
    )
