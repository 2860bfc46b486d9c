"""The membership attack's figures, from two arrays of scores.

A membership attacker holds a real record and the synthetic set and guesses whether the
record was among the generator's training records (a member: an original) or not (a
holdout record, of the same population, that the generator never saw). The attack scored
here is the one the attack papers start from: the closer a record lies to its nearest
synthetic record, the likelier a member. Each record's score is that distance; the figures
compare the members' scores with the holdout's.

- `auc`: the chance that a random member scores closer than a random holdout record,
  ties counting half: the Mann-Whitney statistic over ``m * h``, counted exactly in integers.
- `auc_interval`: DeLong's interval of that AUC (midranks, so ties count half there
  too).
- `tpr_at_fpr`: the share of members found when the threshold lets through a share
  ``fpr`` of the holdout: the ROC curve of the threshold attack at ``fpr``, ties broken at
  random (the straight segment between two thresholds), so that its area is `auc`.

Random guessing gives an AUC of 0.5 and a true positive rate equal to ``fpr``. Arrays in,
values out: no frames here. Scores are compared as given, so pass squared distances (exact
in float64) rather than their square roots, which can merge two of them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import squared_nearest_two
from polars_hidden_rate.engine.scale import canonical_scale

DEFAULT_FPR = 0.1
"""The false positive rate the attack papers report the true positive rate at."""


@dataclass(frozen=True)
class MembershipRisk:
    """The membership attack on a synthetic set, scored against a holdout.

    Attributes
    ----------
    members, holdout
        Each record's squared distance to its nearest synthetic record, at one power-of-two
        scale (`canonical_scale`) shared by both: the scores
        the figures compare, exact in float64.
    synthetic
        The size of the synthetic set.
    confidence
        The level of [`auc_interval`][polars_hidden_rate.MembershipRisk.auc_interval].
    """

    members: Float64Array
    holdout: Float64Array
    synthetic: int
    confidence: float = 0.95

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
        confidence: float = 0.95,
    ) -> MembershipRisk:
        """Score the originals (members) and the holdout by their exact squared distance to
        the nearest synthetic record: one scale for all three arrays, one kd-tree of the
        synthetic records."""
        (points, members, others), _ = canonical_scale(
            synthetic, originals, holdout, names=("synthetic", "originals", "holdout")
        )
        if len(points) == 0:
            raise ValueError("there are no synthetic records to measure the distances to")
        threads = threads or usable_cores()
        tree = KdTree.build(points, threads=threads)
        return cls(
            squared_nearest_two(tree, members, threads=threads)[:, 0],
            squared_nearest_two(tree, others, threads=threads)[:, 0],
            len(points),
            confidence,
        )

    @functools.cached_property
    def auc(self) -> float:
        """The AUC of the members against the holdout (``membership.auc``): the chance that a
        member lies closer to the synthetic set than a holdout record, ties counting half."""
        return auc(self.members, self.holdout)

    @functools.cached_property
    def auc_interval(self) -> tuple[float, float]:
        """DeLong's interval of [`auc`][polars_hidden_rate.MembershipRisk.auc] at `confidence`
        (``membership.auc_interval``)."""
        return auc_interval(self.members, self.holdout, self.confidence)

    def tpr_at_fpr(self, fpr: float = DEFAULT_FPR) -> float:
        """The share of members found at ``fpr`` false positives by the threshold attack
        (``membership.tpr_at_fpr``: ties broken at random)."""
        return tpr_at_fpr(self.members, self.holdout, fpr)

    def to_dict(self) -> dict[str, float | int | list[float]]:
        """The figures as JSON values."""
        low, high = self.auc_interval
        return {
            "auc": self.auc,
            "auc_interval": [low, high],
            "confidence": self.confidence,
            "tpr_at_fpr": self.tpr_at_fpr(DEFAULT_FPR),
            "fpr": DEFAULT_FPR,
            "members": len(self.members),
            "holdout": len(self.holdout),
            "synthetic": self.synthetic,
        }


@dataclass(frozen=True)
class Placements:
    """For each score of one side, how many scores of the other side it beats and ties.

    ``beats[i]`` counts the other side's scores that score ``i`` is strictly better than
    (closer, for a member; farther, for a holdout record), ``ties[i]`` those equal to it.
    """

    beats: CountArray
    ties: CountArray

    def halves(self) -> CountArray:
        """Twice each placement: ``2 * beats + ties``, exact in integers."""
        return 2 * self.beats + self.ties


def placements(members: npt.ArrayLike, holdout: npt.ArrayLike) -> tuple[Placements, Placements]:
    """The placements of each member among the holdout and of each holdout record among the
    members, from one sort of each side: O((m + h) log(m + h))."""
    m = _scores("members", members)
    h = _scores("holdout", holdout)
    m_sorted, h_sorted = np.sort(m), np.sort(h)
    below = np.searchsorted(h_sorted, m, side="left")
    through = np.searchsorted(h_sorted, m, side="right")
    of_members = Placements(len(h) - through, through - below)
    below = np.searchsorted(m_sorted, h, side="left")
    through = np.searchsorted(m_sorted, h, side="right")
    of_holdout = Placements(below, through - below)
    return of_members, of_holdout


def auc(members: npt.ArrayLike, holdout: npt.ArrayLike) -> float:
    """The chance that a member scores strictly lower than a holdout record, plus half the
    chance of a tie: ``U / (m h)`` with ``U`` the Mann-Whitney statistic.

    ``2 U`` is counted exactly in integers, and the one division is correctly rounded.

    Examples
    --------
    >>> auc([0.0, 1.0], [1.0, 2.0])
    0.875
    >>> auc([1.0, 1.0], [1.0])
    0.5
    """
    of_members, _ = placements(members, holdout)
    return _ratio(int(of_members.halves().sum()), 2 * len(of_members.beats) * _size(holdout))


def auc_interval(
    members: npt.ArrayLike, holdout: npt.ArrayLike, confidence: float = 0.95
) -> tuple[float, float]:
    """DeLong's normal interval of `auc`, cut to [0, 1].

    The variance is ``var(V_members) / m + var(V_holdout) / h``, with ``V`` each record's
    placement among the other side (ties counting half) over that side's size, and ``var``
    the sample variance. With one record on a side the variance is not defined; the
    interval is then [0, 1].
    """
    if not 0.0 < confidence < 1.0:
        msg = f"`confidence` must lie in (0, 1), got {confidence!r}"
        raise ValueError(msg)
    of_members, of_holdout = placements(members, holdout)
    m, h = len(of_members.beats), len(of_holdout.beats)
    centre = _ratio(int(of_members.halves().sum()), 2 * m * h)
    if m < 2 or h < 2:
        return 0.0, 1.0
    v_members = of_members.halves() / (2.0 * h)
    v_holdout = of_holdout.halves() / (2.0 * m)
    variance = float(np.var(v_members, ddof=1)) / m + float(np.var(v_holdout, ddof=1)) / h
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    spread = z * math.sqrt(variance)
    return max(0.0, centre - spread), min(1.0, centre + spread)


def tpr_at_fpr(members: npt.ArrayLike, holdout: npt.ArrayLike, fpr: float = DEFAULT_FPR) -> float:
    """The true positive rate of the threshold attack at false positive rate ``fpr``.

    The attack calls a record a member when its score is at most a threshold. Each
    threshold at a score gives a point ``(FPR, TPR)``; between two of them the curve is the
    straight segment of a threshold at the upper score taken with a probability, which is how
    a tie is broken at random. At an ``fpr`` reached by several points, the highest TPR.

    Examples
    --------
    >>> tpr_at_fpr([0.0, 0.0, 3.0, 4.0], [1.0, 2.0, 3.0, 5.0], fpr=0.25)
    0.5
    >>> tpr_at_fpr([1.0, 2.0], [1.0, 2.0], fpr=0.25)
    0.25
    """
    if not 0.0 <= fpr <= 1.0:
        msg = f"`fpr` must lie in [0, 1], got {fpr!r}"
        raise ValueError(msg)
    m, h = np.sort(_scores("members", members)), np.sort(_scores("holdout", holdout))
    thresholds = np.unique(np.concatenate([m, h]))
    false_pos = np.concatenate([[0], np.searchsorted(h, thresholds, side="right")]) / len(h)
    true_pos = np.concatenate([[0], np.searchsorted(m, thresholds, side="right")]) / len(m)
    # The last point at or below `fpr` holds the highest TPR there (both rise together).
    last = int(np.searchsorted(false_pos, fpr, side="right")) - 1
    if last == len(false_pos) - 1:
        return float(true_pos[last])
    step = (fpr - false_pos[last]) / (false_pos[last + 1] - false_pos[last])
    return float(true_pos[last] + step * (true_pos[last + 1] - true_pos[last]))


def _scores(name: str, values: npt.ArrayLike) -> Float64Array:
    scores = np.asarray(values, dtype=np.float64)
    if scores.ndim != 1:
        msg = f"`{name}` must be one score per record, got shape {scores.shape}"
        raise ValueError(msg)
    if len(scores) == 0:
        msg = f"`{name}` holds no record"
        raise ValueError(msg)
    if np.isnan(scores).any():
        msg = f"`{name}` holds NaN scores"
        raise ValueError(msg)
    return scores


def _size(values: npt.ArrayLike) -> int:
    return len(np.asarray(values))


def _ratio(numerator: int, denominator: int) -> float:
    # Python's int division rounds correctly, whatever the sizes.
    return numerator / denominator
