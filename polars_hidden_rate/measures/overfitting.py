"""SDMetrics' DCR overfitting protection: does the synthetic set lie closer to the records
it was generated from than to real records it never saw? Every distance exact in float64, the
three arrays brought to one power-of-two scale first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

import numpy as np
import polars as pl

from polars_hidden_rate._types import Float64Array, IndexArray
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
from polars_hidden_rate.measures.holdout import HoldoutSpace
from polars_hidden_rate.plan import CountOptions


@dataclass(frozen=True)
class DcrOverfitting:
    """SDMetrics' DCR overfitting protection of a synthetic set.

    Attributes
    ----------
    score
        ``min(2 (1 - closer_to_training), 1)``, in [0, 1]: 1 when at most half of the
        synthetic records lie strictly closer to the training originals than to the holdout.
    closer_to_training
        The share of synthetic records whose nearest training original is strictly closer
        than their nearest holdout record (a tie counts for the holdout, as in SDMetrics).
    synthetic, originals, holdout
        The sizes of the three sets.
    """

    score: float
    closer_to_training: float
    synthetic: int
    originals: int
    holdout: int

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
    ) -> DcrOverfitting:
        """From the three sets' coordinates: one scale, a kd-tree of each real set."""
        (training, queries, others), _ = canonical_scale(
            originals, synthetic, holdout, names=("originals", "synthetic", "holdout")
        )
        threads = threads or usable_cores()
        training_tree = KdTree.build(training, threads=threads)
        rows = walk_order(training_tree, queries, threads=threads)  # one order for both walks
        to_training = squared_nearest(training_tree, queries, threads=threads, rows=rows)
        holdout_tree = KdTree.build(others, threads=threads)
        return cls.of_nearest(to_training, holdout_tree, queries, len(training), threads, rows)

    @classmethod
    def of_distances(
        cls, to_training: Float64Array, to_holdout: Float64Array, originals: int, holdout: int
    ) -> DcrOverfitting:
        """From each synthetic record's ``d2`` to its nearest training original and to its
        nearest holdout record, at one scale."""
        closer = int(np.count_nonzero(to_training < to_holdout))
        return cls._of_closer(closer, len(to_training), originals, holdout)

    @classmethod
    def of_nearest(
        cls,
        to_training: Float64Array,
        holdout: KdTree,
        synthetic: Float64Array,
        originals: int,
        threads: int,
        rows: IndexArray | None = None,
    ) -> DcrOverfitting:
        """`of_distances` from each synthetic record's ``d2`` to its nearest training original
        and the holdout's kd-tree, at one scale: a record is closer to the training originals
        when no holdout record lies within that ``d2`` (`within_reach`, the synthetic records
        walked in the order ``rows``: the same answer as comparing the two nearest, for
        less)."""
        not_closer = within_reach(holdout, synthetic, to_training, threads=threads, rows=rows)
        closer = len(to_training) - int(np.count_nonzero(not_closer))
        return cls._of_closer(closer, len(to_training), originals, holdout.avatars)

    @classmethod
    def _of_closer(
        cls, closer: int, synthetic: int, originals: int, holdout: int
    ) -> DcrOverfitting:
        share = closer / synthetic
        return cls(min(2.0 * (1.0 - share), 1.0), share, synthetic, originals, holdout)

    def to_dict(self) -> dict[str, float | int]:
        """The figures as JSON values."""
        return {
            "score": self.score,
            "closer_to_training": self.closer_to_training,
            "closer_to_holdout": 1.0 - self.closer_to_training,
            "synthetic": self.synthetic,
            "originals": self.originals,
            "holdout": self.holdout,
        }


def dcr_overfitting_protection(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    **options: Unpack[CountOptions],
) -> DcrOverfitting:
    """SDMetrics' DCR overfitting protection: does the synthetic set lie closer to the
    records it was generated from than to real records it never saw?

    For each synthetic record, its distance to the closest training original and to the
    closest holdout record; ``closer_to_training`` is the share where the first is strictly
    smaller, and the score ``min(2 (1 - closer_to_training), 1)``. A generator that learnt the
    population, not its records, puts about half of them closer to each set (the holdout
    should be about as large as the originals; SDMetrics warns below half). Unlike SDMetrics,
    whose distance is a per-column normalised one, the distances are those of
    [`local_cloaking`][polars_hidden_rate.local_cloaking]'s space, exact in float64
    (docs/metrics.md).

    Parameters
    ----------
    originals, synthetic, holdout, **options
        As for [`membership_risk`][polars_hidden_rate.membership_risk].

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 2.0]})
    >>> holdout = pl.DataFrame({"Dim1": [1.0, 3.0]})
    >>> synthetic = pl.DataFrame({"Dim1": [0.1, 2.9, 1.5, 0.5]})
    >>> found = phr.dcr_overfitting_protection(originals, synthetic, holdout, coords="Dim1")
    >>> found.closer_to_training, found.score
    (0.25, 1.0)
    """
    space = HoldoutSpace.read(originals, synthetic, holdout, options, "dcr_overfitting_protection")
    return DcrOverfitting.of_arrays(
        space.originals, space.synthetic, space.holdout, threads=space.threads
    )
