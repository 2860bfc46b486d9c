"""Statistics of numbers and arrays, each written once: the normal quantile, Wilson's
interval, an attack's and its control's rates and the residual risk between them, the
hypergeometric chance that a query singles out one record of a subsample, DeLong's
interval of an AUC, the normal upper tail (the link test's p-value), a percentage.

A leaf: numpy, math and statistics only. The options these take (a confidence level, say)
are checked by their callers, once, with `polars_hidden_rate.checks`; here they are
assumed valid.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import Float64Array


def normal_quantile(confidence: float) -> float:
    """The two-sided standard normal quantile at ``confidence``, in (0, 1): the ``z`` with
    ``P(|Z| <= z) = confidence``, the normal quantile of ``1/2 + confidence / 2``."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


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


def compared_rates(
    attack: tuple[float, int], control: tuple[float, int], confidence: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    """An attack's and its control's rates with their errors at ``confidence``, from each
    side's ``(successes, records)``, to be compared (`residual_risk`).

    Each rate is Wilson's centre (`wilson`) at one common number of trials, the smaller
    side's ``n``: the side's share ``s / records`` as ``n s / records`` successes in ``n``.
    Wilson's centre pulls a share towards 1/2 by ``z²/2`` pseudo-successes and failures;
    at the sides' own sizes the pull differs, so that equal shares would read as different
    rates. At one ``n``, equal shares give equal rates, and a larger share a rate no
    smaller; neither rate lies farther from 1/2 than its side's own Wilson centre. Each
    error is Wilson's half-width at the side's own size, what its own trials can tell.
    With equal sizes both are anonymeter's ``success_rate``, bit for bit (the successes
    used as they are).
    """
    (successes, records), (base, base_records) = attack, control
    if records == base_records:
        at_common = attack, control
    else:
        trials = min(records, base_records)
        # Through the shares, one rounding alike on both sides: equal shares, equal rates.
        at_common = (successes / records * trials, trials), (base / base_records * trials, trials)
    (rate, _), (base_rate, _) = (wilson(s, n, confidence) for s, n in at_common)
    error = wilson(successes, records, confidence)[1]
    base_error = wilson(base, base_records, confidence)[1]
    return (rate, error), (base_rate, base_error)


def residual_risk(
    attack: tuple[float, float], control: tuple[float, float]
) -> tuple[float, tuple[float, float]]:
    """anonymeter's ``residual_success`` and ``bind_value``: from the attack's and the
    control's rates with their errors, ``(a - c) / (1 - c)`` and, with its error propagated
    to first order, ``sqrt((da / (1 - c))^2 + (dc (a - 1) / (1 - c)^2)^2)``, the risk and
    the risk plus and minus its error, each cut to [0, 1]. ``c`` is below 1."""
    (rate, error), (base, base_error) = attack, control
    residual = (rate - base) / (1.0 - base)
    spread = math.hypot(error / (1.0 - base), base_error * (rate - 1.0) / (1.0 - base) ** 2)
    return _unit(residual), (_unit(residual - spread), _unit(residual + spread))


def _unit(value: float) -> float:
    return min(max(value, 0.0), 1.0)


def single_chance(matches: npt.ArrayLike, population: int, sample: int) -> Float64Array:
    """For each count ``m`` of ``matches``, the chance that a query matching ``m`` of
    ``population`` records matches exactly one of a random subsample of ``sample`` of them
    (drawn without replacement): the hypergeometric ``C(m, 1) C(N - m, n - 1) / C(N, n)``,
    as ``m n / N`` times the factors ``(N - n - j + 1) / (N - j)`` for ``j`` from 1 to
    ``m - 1``, each one division, multiplied in that order (0 for ``m = 0``; exactly 1 and 0
    at ``n = N``). ``0 < sample <= population``."""
    counts = np.asarray(matches, dtype=np.int64)
    top = int(counts.max(initial=0))
    # factors[j] for j = 1 .. top - 1; their running products, from 1 at j = 0.
    j = np.arange(1, max(top, 1), dtype=np.float64)
    # Past the first zero factor (m > N - n + 1) the product stays 0: no negative factor.
    factors = np.maximum((population - sample - j + 1.0) / (population - j), 0.0)
    products = np.concatenate(([1.0], np.cumprod(factors)))
    first = counts.astype(np.float64) * sample / population
    chances = np.where(counts > 0, first * products[np.maximum(counts - 1, 0)], 0.0)
    return np.asarray(chances, dtype=np.float64)


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


def upper_tail(z: float) -> float:
    """``P(Z >= z)`` for a standard normal ``Z``; far out, where ``1 - cdf`` rounds to 0,
    its asymptotic form ``exp(-z²/2) / (z sqrt(2 pi))``."""
    if z < 8:
        return 1.0 - NormalDist().cdf(z)
    return math.exp(-z * z / 2.0) / (z * math.sqrt(2.0 * math.pi))


def percent(part: float, whole: float) -> float:
    """``part`` as a percentage of ``whole``: ``100 * part / whole``, rounded as written (the
    product first, then the division)."""
    return 100.0 * part / whole
