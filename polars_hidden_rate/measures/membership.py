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

Two scores tie when they are within ``tie_tol`` of each other, local cloaking's rule for two
squared distances: ``a`` and ``b`` tie unless ``a * (1 + tie_tol) < b`` or
``b * (1 + tie_tol) < a`` (products as rounded in float64), so that two distances equal in
exact arithmetic and an ulp apart once projected stay equal. The AUC and its interval judge
every (member, holdout) pair so; the ROC curve's thresholds are the scores of the sorted
run where one lies beyond the previous one's tolerance (a run of scores each within
``tie_tol`` of the previous is one threshold). ``tie_tol`` is 1e-9 for `MembershipRisk`, whose
scores are squared distances, and 0 (the literal comparison) for the functions of any scores;
a negative score is compared by its magnitude, in the mirror image (``b`` beats ``a < 0``
when ``a / (1 + tie_tol) < b``).

Random guessing gives an AUC of 0.5 and a true positive rate equal to ``fpr``. Arrays in,
values out: no frames here. Scores are compared as given, so pass squared distances (exact
in float64) rather than their square roots, which can merge two of them.

With fewer than `MIN_RECORDS` records on a side, the figures warn (`SmallSampleWarning`):
DeLong's normal interval then covers the AUC less often than its level says (a 95 % interval
covers a random attack's 0.5 in about 86 % of runs with 5 members against 500 holdout
records, 94 % from 30 a side), and a true positive rate at 10 % false positives among 5
holdout records is an interpolation between two of them. The farther the AUC lies from 0.5,
the more records the interval needs: it warns too where the smaller side's size times
``min(AUC, 1 - AUC)`` is below `MIN_DISCORDANT` (a simulation of binormal scores put a 95 %
interval's coverage below 93 % there: 91 % at an AUC of 0.9 with 30 a side, 90 % at 0.95
with 50). So does an interval of zero width (every placement alike: the sides fully
separated, or every score tied), whose variance estimate of 0 is no certainty. Each of these
is also a line of `MembershipRisk.interval_warnings`, which the report shows.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Unpack

import numpy as np
import numpy.typing as npt
import polars as pl

from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.checks import check_confidence, check_tie_tol, known
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import squared_nearest
from polars_hidden_rate.engine.scale import canonical_scale
from polars_hidden_rate.measures.holdout import HoldoutSpace
from polars_hidden_rate.plan import CountOptions
from polars_hidden_rate.stats import delong_interval

DEFAULT_FPR = 0.1
"""The false positive rate the attack papers report the true positive rate at."""

MIN_RECORDS = 30
"""Below this many members or holdout records, the figures warn (`SmallSampleWarning`)."""

MIN_DISCORDANT = 10
"""Below this many, the smaller side's size times ``min(AUC, 1 - AUC)``, DeLong's interval
warns (`SmallSampleWarning`): the records that place against the attack's lean are too few
for its normal approximation (the binomial rule of thumb ``n p >= 10``)."""


class SmallSampleWarning(UserWarning):
    """The membership figures rest on too few records to be read at their stated level: a
    side below `MIN_RECORDS` records, too few for an AUC this far from 0.5
    (`MIN_DISCORDANT`), or DeLong's interval of zero width."""


@dataclass(frozen=True)
class MembershipRisk:
    """The membership attack on a synthetic set, scored against a holdout.

    Attributes
    ----------
    members, holdout
        The scores the figures compare, exact in float64: each record's squared distance to
        its nearest synthetic record, at one power-of-two scale (`canonical_scale`) shared by
        both, ``2^(2 exponent)`` times the squared distance in the coordinates' own units
        (`members_squared_distances` and `holdout_squared_distances` give those).
    synthetic
        The size of the synthetic set.
    confidence
        The level of [`auc_interval`][polars_hidden_rate.MembershipRisk.auc_interval].
    exponent
        The power of two the coordinates were multiplied by before the distances were taken.
    tie_tol
        Two scores within this relative tolerance of each other tie (local cloaking's rule,
        as for [`local_cloaking`][polars_hidden_rate.local_cloaking]).
    """

    members: Float64Array
    holdout: Float64Array
    synthetic: int
    confidence: float = 0.95
    exponent: int = 0
    tie_tol: float = 1e-9

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
        confidence: float = 0.95,
        tie_tol: float = 1e-9,
    ) -> MembershipRisk:
        """Score the originals (members) and the holdout by their exact squared distance to
        the nearest synthetic record: one scale for all three arrays, one kd-tree of the
        synthetic records."""
        check_confidence(confidence)
        (points, members, others), exponent = canonical_scale(
            synthetic, originals, holdout, names=("synthetic", "originals", "holdout")
        )
        if len(points) == 0:
            raise ValueError("there are no synthetic records to measure the distances to")
        threads = threads or usable_cores()
        tree = KdTree.build(points, threads=threads)
        return cls(
            squared_nearest(tree, members, threads=threads),
            squared_nearest(tree, others, threads=threads),
            len(points),
            confidence,
            exponent,
            check_tie_tol(tie_tol),
        )

    @property
    def members_squared_distances(self) -> Float64Array:
        """Each member's squared distance to its nearest synthetic record, in the units of
        the coordinates (`members` times ``2^(-2 exponent)``: exact, but where that
        underflows or overflows float64, which the scores themselves never do)."""
        return np.ldexp(self.members, -2 * self.exponent)

    @property
    def holdout_squared_distances(self) -> Float64Array:
        """Each holdout record's squared distance to its nearest synthetic record, in the
        units of the coordinates (as `members_squared_distances`)."""
        return np.ldexp(self.holdout, -2 * self.exponent)

    @functools.cached_property
    def _sorted(self) -> _Sorted:
        # Every figure needs both sides sorted: sorted once, for all of them.
        found = _Sorted.of(self.members, self.holdout, check_tie_tol(self.tie_tol))
        few = _few_records(len(found.members), len(found.holdout))
        if few is not None:
            warnings.warn(few, SmallSampleWarning, stacklevel=3)
        return found

    @functools.cached_property
    def _auc_and_interval(self) -> tuple[float, tuple[float, float] | None]:
        # One placement of each side for both (its arrays are let go afterwards); no
        # interval at a confidence out of range, refused when asked for.
        of_members, of_holdout = self._sorted.placements()
        try:
            interval: tuple[float, float] | None = _interval_of(
                of_members, of_holdout, self.confidence
            )
        except ValueError:  # the confidence, checked again by `auc_interval`
            interval = None
        area = _auc_of(of_members, of_holdout)
        for msg in _unreliable_interval(len(self.members), len(self.holdout), area, interval):
            warnings.warn(msg, SmallSampleWarning, stacklevel=3)
        return area, interval

    @property
    def interval_warnings(self) -> tuple[str, ...]:
        """Why the figures cannot be read at their stated level, each also a
        `SmallSampleWarning` (``membership.interval_warnings``; empty when none): a side
        below `MIN_RECORDS` records, the smaller side too small for an AUC this far from 0.5
        (`MIN_DISCORDANT`), DeLong's interval of zero width."""
        auc, interval = self._auc_and_interval
        few = _few_records(len(self.members), len(self.holdout))
        unreliable = _unreliable_interval(len(self.members), len(self.holdout), auc, interval)
        return (*([] if few is None else [few]), *unreliable)

    @property
    def auc(self) -> float:
        """The AUC of the members against the holdout (``membership.auc``): the chance that a
        member lies closer to the synthetic set than a holdout record, ties (within
        ``tie_tol``) counting half."""
        return self._auc_and_interval[0]

    @property
    def auc_interval(self) -> tuple[float, float]:
        """DeLong's interval of [`auc`][polars_hidden_rate.MembershipRisk.auc] at `confidence`
        (``membership.auc_interval``)."""
        check_confidence(self.confidence)
        interval = known(self._auc_and_interval[1], "DeLong's interval at a checked confidence")
        return interval

    def tpr_at_fpr(self, fpr: float = DEFAULT_FPR) -> float:
        """The share of members found at ``fpr`` false positives by the threshold attack
        (``membership.tpr_at_fpr``: ties broken at random)."""
        return self._sorted.tpr_at_fpr(fpr)

    def to_dict(self) -> dict[str, float | int | list[float] | list[str]]:
        """The figures as JSON values, with ``interval_warnings`` (`interval_warnings`)."""
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
            "tie_tol": self.tie_tol,
            "interval_warnings": list(self.interval_warnings),
        }


def _few_records(members: int, holdout: int) -> str | None:
    """Why figures on ``members`` and ``holdout`` records are unreliable: a side below
    `MIN_RECORDS`; None when neither is."""
    few = [
        f"{size} {name}"
        for size, name in ((members, "members"), (holdout, "holdout records"))
        if size < MIN_RECORDS
    ]
    if not few:
        return None
    return (
        f"the membership figures rest on {' and '.join(few)} (fewer than {MIN_RECORDS}): "
        "DeLong's interval covers the AUC less often than its level says, and the true "
        "positive rate at a false positive rate interpolates between a few records; "
        f"measure with at least {MIN_RECORDS} records on each side"
    )


def _unreliable_interval(
    members: int, holdout: int, auc: float, interval: tuple[float, float] | None
) -> list[str]:
    """Why DeLong's ``interval`` of ``auc`` cannot be read at its level beyond the sides'
    sizes (`_few_records`): too few records for an AUC this far from 0.5, or zero width."""
    found = []
    smaller = min(members, holdout)
    if smaller >= MIN_RECORDS and smaller * min(auc, 1.0 - auc) < MIN_DISCORDANT:
        name = "members" if members <= holdout else "holdout records"
        found.append(
            f"DeLong's interval of the membership AUC rests on {smaller} {name} for an AUC of "
            f"{auc:.4g}: {smaller} times {min(auc, 1.0 - auc):.4g} is below {MIN_DISCORDANT}, "
            "too few records placing against the attack's lean for the interval to cover "
            "the AUC as often as its level says"
        )
    if interval is not None and interval[0] == interval[1]:
        low, high = interval
        found.append(
            f"DeLong's interval of the membership AUC has zero width ([{low:g}, {high:g}]): "
            "every record places alike among the other side (the sides fully separated, "
            "or every score tied), so its variance estimate is 0, which is no certainty"
        )
    return found


@dataclass(frozen=True)
class Placements:
    """For each score of one side, how many scores of the other side it beats and ties.

    ``beats[i]`` counts the other side's scores that score ``i`` is better than beyond the
    tie tolerance (closer, for a member; farther, for a holdout record), ``ties[i]`` those
    it ties with (equal, or within the tolerance).
    """

    beats: CountArray
    ties: CountArray

    def halves(self) -> CountArray:
        """Twice each placement: ``2 * beats + ties``, exact in integers."""
        return 2 * self.beats + self.ties


@dataclass(frozen=True)
class _Sorted:
    """Both sides' scores, checked, and each sorted once: what every figure starts from."""

    members: Float64Array
    holdout: Float64Array
    members_sorted: Float64Array
    holdout_sorted: Float64Array
    tie_tol: float = 0.0

    @classmethod
    def of(cls, members: npt.ArrayLike, holdout: npt.ArrayLike, tie_tol: float = 0.0) -> _Sorted:
        tie_tol = check_tie_tol(tie_tol)
        m, h = _scores("members", members), _scores("holdout", holdout)
        return cls(m, h, np.sort(m), np.sort(h), tie_tol)

    def placements(self) -> tuple[Placements, Placements]:
        # ``a`` beats ``b`` (lies below it) when ``_grown(a) < b``; at 0 tolerance the
        # literal comparison. `_grown` is monotone, so a sorted side stays sorted once
        # grown, and each count is one binary search; ``_grown(x) >= x``, so no pair beats
        # both ways.
        m, h = self.members, self.holdout
        m_sorted, h_sorted = self.members_sorted, self.holdout_sorted
        m_grown, h_grown = _grown(m, self.tie_tol), _grown(h, self.tie_tol)
        m_sorted_grown, h_sorted_grown = (
            _grown(m_sorted, self.tie_tol),
            _grown(h_sorted, self.tie_tol),
        )
        # A member beats the holdout records above its grown score, loses to those whose
        # grown score lies below it, and ties with the rest.
        wins = len(h) - np.searchsorted(h_sorted, m_grown, side="right")
        losses = np.searchsorted(h_sorted_grown, m, side="left")
        of_members = Placements(wins, len(h) - wins - losses)
        wins = np.searchsorted(m_sorted_grown, h, side="left")
        losses = len(m) - np.searchsorted(m_sorted, h_grown, side="right")
        of_holdout = Placements(wins, len(m) - wins - losses)
        return of_members, of_holdout

    def tpr_at_fpr(self, fpr: float) -> float:
        _check_fpr(fpr)
        m, h = self.members_sorted, self.holdout_sorted
        # The distinct scores: two sorted runs, merged by a stable sort in linear time; a
        # score within the tolerance of the one below it is not a threshold of its own
        # (each threshold the last score of its run).
        merged = np.concatenate([m, h])
        merged.sort(kind="stable")
        apart = merged[1:] > _grown(merged[:-1], self.tie_tol)
        thresholds = merged[np.concatenate([apart, [True]])]
        false_pos = np.concatenate([[0], np.searchsorted(h, thresholds, side="right")]) / len(h)
        true_pos = np.concatenate([[0], np.searchsorted(m, thresholds, side="right")]) / len(m)
        # The last point at or below `fpr` holds the highest TPR there (both rise together).
        last = int(np.searchsorted(false_pos, fpr, side="right")) - 1
        if last == len(false_pos) - 1:
            return float(true_pos[last])
        step = (fpr - false_pos[last]) / (false_pos[last + 1] - false_pos[last])
        return float(true_pos[last] + step * (true_pos[last + 1] - true_pos[last]))


def placements(
    members: npt.ArrayLike, holdout: npt.ArrayLike, *, tie_tol: float = 0.0
) -> tuple[Placements, Placements]:
    """The placements of each member among the holdout and of each holdout record among the
    members, from one sort of each side: O((m + h) log(m + h)); two scores within
    ``tie_tol`` of each other tie."""
    return _Sorted.of(members, holdout, tie_tol).placements()


def _auc_of(of_members: Placements, of_holdout: Placements) -> float:
    m, h = len(of_members.beats), len(of_holdout.beats)
    return _ratio(int(of_members.halves().sum()), 2 * m * h)


def _interval_of(
    of_members: Placements, of_holdout: Placements, confidence: float
) -> tuple[float, float]:
    check_confidence(confidence)
    m, h = len(of_members.beats), len(of_holdout.beats)
    # Each record's placement among the other side, ties counting half: DeLong's V.
    v_members = of_members.halves() / (2.0 * h)
    v_holdout = of_holdout.halves() / (2.0 * m)
    return delong_interval(_auc_of(of_members, of_holdout), v_members, v_holdout, confidence)


def auc(members: npt.ArrayLike, holdout: npt.ArrayLike, *, tie_tol: float = 0.0) -> float:
    """The chance that a member scores strictly lower than a holdout record, plus half the
    chance of a tie: ``U / (m h)`` with ``U`` the Mann-Whitney statistic; with ``tie_tol``,
    lower beyond that relative tolerance (``m * (1 + tie_tol) < h``), a tie within it.

    ``2 U`` is counted exactly in integers, and the one division is correctly rounded.

    Examples
    --------
    >>> auc([0.0, 1.0], [1.0, 2.0])
    0.875
    >>> auc([1.0, 1.0], [1.0])
    0.5
    >>> auc([1.0], [1.0 + 2**-52]), auc([1.0], [1.0 + 2**-52], tie_tol=1e-9)
    (1.0, 0.5)
    """
    return _auc_of(*placements(members, holdout, tie_tol=tie_tol))


def auc_interval(
    members: npt.ArrayLike,
    holdout: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    tie_tol: float = 0.0,
) -> tuple[float, float]:
    """DeLong's normal interval of `auc`, cut to [0, 1].

    The variance is ``var(V_members) / m + var(V_holdout) / h``, with ``V`` each record's
    placement among the other side (ties counting half) over that side's size, and ``var``
    the sample variance. With one record on a side the variance is not defined; the
    interval is then [0, 1].
    """
    check_confidence(confidence)  # before the scores are looked at
    return _interval_of(*placements(members, holdout, tie_tol=tie_tol), confidence)


def tpr_at_fpr(
    members: npt.ArrayLike,
    holdout: npt.ArrayLike,
    fpr: float = DEFAULT_FPR,
    *,
    tie_tol: float = 0.0,
) -> float:
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
    _check_fpr(fpr)  # before the scores are looked at
    return _Sorted.of(members, holdout, tie_tol).tpr_at_fpr(fpr)


def _check_fpr(fpr: float) -> None:
    if not 0.0 <= fpr <= 1.0:
        msg = f"`fpr` must lie in [0, 1], got {fpr!r}"
        raise ValueError(msg)


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


def _grown(scores: Float64Array, tie_tol: float) -> Float64Array:
    """Each score moved up by the relative tolerance, as rounded: ``x * (1 + tie_tol)``, or
    ``x / (1 + tie_tol)`` for a negative one (the mirror image, which keeps it below 0).
    Monotone, and never below the score: a score beats another beyond the tolerance when
    its grown value lies below the other."""
    if tie_tol == 0.0:
        return scores
    grow = 1.0 + tie_tol
    grown: Float64Array = scores * grow
    negative = scores < 0.0
    if negative.any():
        grown[negative] = scores[negative] / grow
    return grown


def _ratio(numerator: int, denominator: int) -> float:
    # Python's int division rounds correctly, whatever the sizes.
    return numerator / denominator


def membership_risk(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    *,
    confidence: float = 0.95,
    **options: Unpack[CountOptions],
) -> MembershipRisk:
    """The membership attack: can an attacker holding a real record and the synthetic set
    tell whether the record was among the originals the generator learnt from?

    Each real record, original (a member) or holdout (not one), is scored by its distance to
    its nearest synthetic record; the closer, the likelier a member. The figures compare the
    two groups' scores ([`MembershipRisk`][polars_hidden_rate.MembershipRisk]): the AUC
    (ties counting half, counted exactly), its DeLong interval, and the true positive rate at
    a false positive rate (10 % by default, as the attack papers report it). Random guessing
    gives an AUC of 0.5 and a true positive rate equal to the false positive rate.

    Parameters
    ----------
    originals
        The records the synthetic set was generated from (the members).
    synthetic
        The synthetic records, any number of them (avatars or another generator's).
    holdout
        Real records of the same population that the generator never saw, with the
        originals' columns and types.
    confidence
        The level of the AUC's interval, strictly between 0 and 1.
    **options
        ``coords`` or ``features``, ``categorical``, ``impute`` and ``ncp`` choose the
        space, as for [`local_cloaking`][polars_hidden_rate.local_cloaking]; ``threads``;
        ``tie_tol`` (default 1e-9), local cloaking's tie rule, by which two scores within it
        of each other tie. No link:
        ``on`` only keeps key columns out of the default features. ``cluster`` and
        ``device="gpu"`` are refused (the walk runs on this machine's CPU).

    Raises
    ------
    polars.exceptions.SchemaError
        When the holdout's columns or types differ from the originals', before anything is
        read.
    ValueError, TypeError
        When ``confidence`` is not a number strictly between 0 and 1, before anything is read.

    Warns
    -----
    SmallSampleWarning
        When the members or the holdout number fewer than `MIN_RECORDS` (30) records, or
        the AUC's interval has zero width.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 2.0, 3.0]})
    >>> synthetic = pl.DataFrame({"Dim1": [0.0, 1.0, 2.0, 3.0]})  # copies
    >>> holdout = pl.DataFrame({"Dim1": [0.5, 1.5, 2.5, 3.5]})
    >>> risk = phr.membership_risk(originals, synthetic, holdout, coords="Dim1")
    >>> risk.auc, risk.tpr_at_fpr(0.1)  # 4 records a side: a SmallSampleWarning
    (1.0, 1.0)
    >>> risk.holdout_squared_distances.tolist()
    [0.25, 0.25, 0.25, 0.25]
    """
    check_confidence(confidence)  # before anything is read
    space = HoldoutSpace.read(originals, synthetic, holdout, options, "membership_risk")
    return MembershipRisk.of_arrays(
        space.originals,
        space.synthetic,
        space.holdout,
        threads=space.threads,
        confidence=confidence,
        tie_tol=space.tie_tol,
    )
