"""Statistics of numbers and arrays, each written once: the normal quantile and tail, Wilson's
interval, DeLong's interval of an AUC, a percentage.

A leaf: numpy, math and statistics only. The options these take (a confidence level, say)
are checked by their callers, once, with `polars_hidden_rate.checks`; here they are
assumed valid.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from polars_hidden_rate._types import Float64Array


def normal_quantile(confidence: float) -> float:
    """The two-sided standard normal quantile at ``confidence``, in (0, 1): the ``z`` with
    ``P(|Z| <= z) = confidence``, the normal quantile of ``1/2 + confidence / 2``."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def upper_tail(z: float) -> float:
    """``P(Z >= z)`` for a standard normal ``Z``; far out, where ``1 - cdf`` rounds to 0,
    its asymptotic form ``exp(-z²/2) / (z sqrt(2 pi))``."""
    if z < 8:
        return 1.0 - NormalDist().cdf(z)
    return math.exp(-z * z / 2.0) / (z * math.sqrt(2.0 * math.pi))


def wilson(successes: float, records: int, confidence: float) -> tuple[float, float]:
    """Wilson's score interval of a rate of ``successes`` in ``records`` trials, as its
    centre and half-width at ``confidence`` (anonymeter's ``success_rate``):
    ``(s + z²/2) / (n + z²)`` and ``z / (n + z²) * sqrt(s (n - s) / n + z²/4)``.

    ``successes`` may be a sum of fractions (guesses shared among ties); ``records`` is at
    least 1.
    """
    z = normal_quantile(confidence)
    z2 = z * z
    denominator = records + z2
    centre = (successes + 0.5 * z2) / denominator
    spread = successes * (records - successes) / records
    return centre, z / denominator * math.sqrt(spread + 0.25 * z2)


def delong_variance(members: Float64Array, holdout: Float64Array) -> float:
    """DeLong's variance of an AUC: ``var(V_members) / m + var(V_holdout) / h``.

    ``members[i]`` is member ``i``'s placement, the share of the ``h`` others it beats
    (ties counting half), and ``holdout[j]`` the share of the ``m`` members that holdout
    record ``j`` loses to; ``var`` is the sample variance. Each side needs two values.
    """
    of_members = float(np.var(members, ddof=1)) / len(members)
    return of_members + float(np.var(holdout, ddof=1)) / len(holdout)


def delong_interval(
    auc: float, members: Float64Array, holdout: Float64Array, confidence: float
) -> tuple[float, float]:
    """DeLong's normal interval of ``auc`` at ``confidence``, cut to [0, 1], from the two
    sides' placements (`delong_variance`); [0, 1] when a side holds a single record, where
    the variance is not defined."""
    if len(members) < 2 or len(holdout) < 2:
        return 0.0, 1.0
    spread = normal_quantile(confidence) * math.sqrt(delong_variance(members, holdout))
    return max(0.0, auc - spread), min(1.0, auc + spread)


def percent(part: float, whole: float) -> float:
    """``part`` as a percentage of ``whole``: ``100 * part / whole``, rounded as written (the
    product first, then the division)."""
    return 100.0 * part / whole
