"""The statistics of `polars_hidden_rate.stats` against independent references (scipy's
normal distribution, Wilson's interval in 60-digit decimals, DeLong's variance from the O(m h)
comparison matrix), and the option checks of `polars_hidden_rate.checks` they rely on."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import (
    OptionTypeError,
    check_confidence,
    check_percentage,
    check_tolerance,
    refuse_fraction,
)
from polars_hidden_rate.measures.membership import auc, auc_interval
from polars_hidden_rate.stats import (
    compared_rates,
    delong_interval,
    delong_variance,
    normal_quantile,
    percent,
    residual_risk,
    upper_tail,
    wilson,
)
from tests.helpers import examples, reference_risk

levels = st.floats(1e-6, 1 - 1e-9)


@pytest.mark.parametrize(
    ("confidence", "z"), [(0.95, 1.959963984540054), (0.99, 2.5758293035489004)]
)
def test_normal_quantile_of_the_usual_levels(confidence: float, z: float) -> None:
    assert normal_quantile(confidence) == pytest.approx(z, rel=1e-15)


def test_normal_quantile_is_the_one_every_figure_used() -> None:
    # Bit for bit the quantile the intervals have always used: statistics' normal quantile
    # of 0.5 + confidence / 2 (the correctly rounded (1 + confidence) / 2).
    assert normal_quantile(0.95) == NormalDist().inv_cdf(0.5 + 0.95 / 2.0) == 1.9599639845400536
    assert normal_quantile(0.9) == 1.6448536269514715


@given(confidence=levels)
@settings(max_examples=examples(200))
def test_normal_quantile_is_scipys(confidence: float) -> None:
    z = normal_quantile(confidence)
    assert z == pytest.approx(norm.ppf(0.5 + confidence / 2.0), rel=1e-13, abs=1e-15)
    # Two-sided: the mass within [-z, z] is the confidence.
    assert norm.cdf(z) - norm.cdf(-z) == pytest.approx(confidence, rel=1e-12)


@pytest.mark.parametrize("z", [-6.0, -1.0, 0.0, 0.5, 1.959963984540054, 3.0, 7.5, 7.999])
def test_upper_tail_is_scipys_survival(z: float) -> None:
    # 1 - cdf: exact up to the rounding of the cdf near 1.
    assert upper_tail(z) == pytest.approx(norm.sf(z), rel=1e-12, abs=2e-16)


@pytest.mark.parametrize("z", [8.0, 10.0, 20.0, 30.0, 1e3])
def test_upper_tail_far_out_is_the_asymptotic_form(z: float) -> None:
    # Mills' ratio: the form overestimates the tail by a relative 1/z² at most.
    exact = norm.sf(z)
    found = upper_tail(z)
    if exact == 0.0:
        assert found == 0.0
    else:
        assert 0.0 < found / exact - 1.0 <= 1.0 / (z * z)


def wilson_decimal(successes: float, records: int, confidence: float) -> tuple[float, float]:
    """Wilson's centre and half-width in 60-digit decimals, from the same float z."""
    with localcontext() as context:
        context.prec = 60
        z = Decimal(normal_quantile(confidence))
        s, n = Decimal(successes), Decimal(records)
        centre = (s + z * z / 2) / (n + z * z)
        half = z / (n + z * z) * (s * (n - s) / n + z * z / 4).sqrt()
        return float(centre), float(half)


@pytest.mark.parametrize(
    ("successes", "records", "confidence", "expected"),
    [
        # Hand-computed: (k + z²/2 ± z sqrt(k (n - k) / n + z²/4)) / (n + z²).
        (90, 100, 0.95, (0.825634, 0.944771)),
        (5, 10, 0.95, (0.236593, 0.763407)),
        (0, 10, 0.95, (0.0, 0.277533)),
        (90, 100, 0.99, (0.796249, 0.953974)),
    ],
)
def test_wilson_known_values(
    successes: int, records: int, confidence: float, expected: tuple[float, float]
) -> None:
    centre, half = wilson(successes, records, confidence)
    assert centre - half == pytest.approx(expected[0], abs=1e-6)
    assert centre + half == pytest.approx(expected[1], abs=1e-6)


@given(
    records=st.integers(1, 10**6),
    share=st.floats(0.0, 1.0),
    confidence=levels,
)
@settings(max_examples=examples(300))
def test_wilson_against_decimals_and_its_equation(
    records: int, share: float, confidence: float
) -> None:
    successes = share * records  # a sum of shared guesses need not be an integer
    centre, half = wilson(successes, records, confidence)
    exact_centre, exact_half = wilson_decimal(successes, records, confidence)
    assert centre == pytest.approx(exact_centre, rel=1e-13, abs=1e-300)
    assert half == pytest.approx(exact_half, rel=1e-12, abs=1e-300)
    # The bounds are the roots of Wilson's equation (p_hat - p)² = z² p (1 - p) / n.
    z = normal_quantile(confidence)
    for bound in (centre - half, centre + half):
        residual = (successes / records - bound) ** 2 - z * z * bound * (1 - bound) / records
        assert residual == pytest.approx(0.0, abs=1e-12 * (1 + z * z))


def test_wilson_is_anonymeters_formula_bit_for_bit() -> None:
    # The formula both the hidden rate's interval and the inference attack's rates use.
    for successes, records in ((0.0, 1), (2.5, 7), (90.0, 100), (1234.75, 99991)):
        z = normal_quantile(0.95)
        centre = (successes + 0.5 * z * z) / (records + z * z)
        half = (
            z
            / (records + z * z)
            * math.sqrt(successes * (records - successes) / records + 0.25 * z * z)
        )
        assert wilson(successes, records, 0.95) == (centre, half)


def risk_of(
    attack: tuple[float, int], control: tuple[float, int], confidence: float = 0.95
) -> tuple[float, tuple[float, float], tuple[float, float], tuple[float, float]]:
    rates, base = compared_rates(attack, control, confidence)
    return (*residual_risk(rates, base), rates, base)


sizes = st.integers(1, 10**6)


@given(attack=sizes, control=sizes, share=st.floats(0.0, 1.0), confidence=levels)
@settings(max_examples=examples(300))
def test_compared_rates_and_risk_against_decimals(
    attack: int, control: int, share: float, confidence: float
) -> None:
    # Shared guesses: the successes need not be integers.
    found = [share * attack, share * control * 0.5]
    risk, (low, high), (rate, _), (base, _) = risk_of(
        (found[0], attack), (found[1], control), confidence
    )
    exact = reference_risk((found[0], attack), (found[1], control), confidence)
    if exact[4] > 1 - 1e-6:
        return  # a control near 1 at a confidence near 0: the risk's division is ill-posed
    assert (rate, base) == pytest.approx(exact[3:], rel=1e-13, abs=1e-300)
    assert (risk, low, high) == pytest.approx(exact[:3], rel=1e-9, abs=1e-12)


@given(
    share=st.fractions(0, 1, max_denominator=50),
    multiples=st.tuples(st.integers(1, 5000), st.integers(1, 5000)),
    confidence=st.sampled_from([0.5, 0.9, 0.95, 0.99]),
)
@settings(max_examples=examples(500))
def test_equal_shares_give_no_risk_at_any_sizes(
    share: Fraction, multiples: tuple[int, int], confidence: float
) -> None:
    # The same share over two sizes: s = share * n for n a multiple of its denominator.
    sides = [(float(share * n), n) for n in (share.denominator * m for m in multiples)]
    risk, (low, high), (rate, _), (base, _) = risk_of(sides[0], sides[1], confidence)
    assert rate == base
    assert risk == 0.0 == low
    assert high > 0.0


@pytest.mark.parametrize(("attack", "control"), [(1497, 642), (642, 1497), (1, 10**6), (7, 7)])
def test_every_target_found_on_both_sides_gives_no_risk(attack: int, control: int) -> None:
    # The paper's split with a synthetic set copying every training and holdout record: both
    # attacks succeed everywhere. Wilson's centres at the two sizes (0.99872, 0.99703) gave
    # a risk of 0.570.
    risk, interval, (rate, _), (base, _) = risk_of((attack, attack), (control, control))
    assert rate == base == wilson(min(attack, control), min(attack, control), 0.95)[0]
    assert risk == 0.0
    assert interval[0] == 0.0


@given(
    attack=st.tuples(st.integers(0, 2000), st.integers(1, 2000)),
    control=st.tuples(st.integers(0, 2000), st.integers(1, 2000)),
    confidence=st.sampled_from([0.5, 0.95, 0.99]),
)
@settings(max_examples=examples(500))
def test_the_rates_read_in_the_order_of_the_shares(
    attack: tuple[int, int], control: tuple[int, int], confidence: float
) -> None:
    (s, n), (c, m) = (min(attack), max(attack)), (min(control), max(control))
    _, _, (rate, _), (base, _) = risk_of((s, n), (c, m), confidence)
    order = Fraction(s, n) - Fraction(c, m)
    if order > 0:
        assert rate > base
    elif order < 0:
        assert rate < base
    else:
        assert rate == base


def test_a_small_control_no_longer_reverses_the_shares() -> None:
    # Raw shares 0.64 % (3 of 470) and 0.20 % (0.4 of 204, guesses shared among ties):
    # Wilson's centres at the sets' own sizes read 1.04 % and 1.12 %, the control above the
    # attack. At one size both read in the order of their shares.
    assert wilson(3, 470, 0.95)[0] < wilson(0.4, 204, 0.95)[0]  # the reversal at own sizes
    _, _, (rate, _), (base, _) = risk_of((3, 470), (0.4, 204))
    assert rate > base


@given(records=sizes, share=st.floats(0.0, 1.0), other=st.floats(0.0, 1.0))
@settings(max_examples=examples(300))
def test_equal_sizes_are_anonymeters_bit_for_bit(records: int, share: float, other: float) -> None:
    attack, control = (share * records, records), (other * records, records)
    risk, interval, rates, base = risk_of(attack, control)
    assert (rates, base) == (wilson(*attack, 0.95), wilson(*control, 0.95))
    if base[0] < 1.0:
        assert (risk, interval) == residual_risk(wilson(*attack, 0.95), wilson(*control, 0.95))


def test_each_error_is_its_own_sides() -> None:
    (_, error), (_, base_error) = compared_rates((30, 100), (900, 3000), 0.95)
    assert error == wilson(30, 100, 0.95)[1]
    assert base_error == wilson(900, 3000, 0.95)[1]


def brute_placements(
    members: Float64Array, holdout: Float64Array
) -> tuple[float, Float64Array, Float64Array]:
    """The AUC and each side's placements from the m x h comparison matrix."""
    psi = (members[:, None] < holdout[None, :]) + 0.5 * (members[:, None] == holdout[None, :])
    return float(psi.mean()), psi.mean(axis=1), psi.mean(axis=0)


def brute_delong_variance(v_members: Float64Array, v_holdout: Float64Array, area: float) -> float:
    m, h = len(v_members), len(v_holdout)
    s10 = sum((v - area) ** 2 for v in v_members) / (m - 1)
    s01 = sum((v - area) ** 2 for v in v_holdout) / (h - 1)
    return float(s10 / m + s01 / h)


scores = st.lists(st.integers(0, 6).map(float), min_size=2, max_size=40)


@given(members=scores, holdout=scores, confidence=st.sampled_from([0.5, 0.9, 0.95, 0.99]))
@settings(max_examples=examples(300))
def test_delong_against_the_comparison_matrix(
    members: list[float], holdout: list[float], confidence: float
) -> None:
    m, h = np.array(members), np.array(holdout)
    area, v_members, v_holdout = brute_placements(m, h)
    assert auc(m, h) == pytest.approx(area, abs=1e-15)
    variance = delong_variance(v_members, v_holdout)
    assert variance == pytest.approx(brute_delong_variance(v_members, v_holdout, area), abs=1e-15)
    spread = norm.ppf(0.5 + confidence / 2.0) * math.sqrt(variance)
    expected = (max(0.0, area - spread), min(1.0, area + spread))
    assert delong_interval(area, v_members, v_holdout, confidence) == pytest.approx(
        expected, abs=1e-12
    )
    assert auc_interval(m, h, confidence) == pytest.approx(expected, abs=1e-12)


def test_delong_interval_of_a_single_record_is_the_unit_interval() -> None:
    one, two = np.array([0.5]), np.array([0.25, 0.75])
    assert delong_interval(0.5, one, two, 0.95) == (0.0, 1.0)
    assert delong_interval(0.5, two, one, 0.95) == (0.0, 1.0)
    # Perfectly separated sides: no variance, the interval is the point.
    assert delong_interval(1.0, np.ones(3), np.zeros(4), 0.95) == (1.0, 1.0)


@given(part=st.integers(0, 2**40), whole=st.integers(1, 2**40))
@settings(max_examples=examples(300))
def test_percent_is_correctly_rounded_for_integers(part: int, whole: int) -> None:
    # 100 * part is exact below 2**46, so the one division rounds the exact percentage.
    assert percent(part, whole) == float(Fraction(100 * part, whole))


def test_percent_of_fractions() -> None:
    assert percent(0.5, 4) == 12.5
    assert percent(1, 3) == 100.0 * 1 / 3
    assert percent(7, 7) == 100.0


def test_confidence_check() -> None:
    assert check_confidence(0.95) == 0.95
    assert type(check_confidence(np.float32(0.5))) is float
    for bad in (0.0, 1.0, 0):
        with pytest.raises(ValueError, match="`confidence` must lie strictly between 0 and 1"):
            check_confidence(bad)
    for bad in (1.5, -0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"`confidence` must be a finite number in \[0, 1\]"):
            check_confidence(bad)
    with pytest.raises(OptionTypeError, match="`confidence` must be a number"):
        check_confidence("0.95")


def test_tolerance_check() -> None:
    assert check_tolerance(0) == 0.0
    assert check_tolerance(0.05) == 0.05
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="`tolerance` must be a finite number >= 0"):
            check_tolerance(bad)
    with pytest.raises(OptionTypeError, match="`tolerance` must be a number"):
        check_tolerance(True)


def test_percentage_checks() -> None:
    assert check_percentage(90, "min_rate") == 90.0
    assert check_percentage(0, "min_rate") == 0.0
    assert refuse_fraction(-5.0, "targets['x']") == -5.0
    with pytest.raises(ValueError, match=r"`min_rate` is a percentage: 0.9 means 0.9 %; "):
        check_percentage(0.9, "min_rate")
    with pytest.raises(ValueError, match=r"--min-rate is a percentage: 1 means 1 %; did you"):
        refuse_fraction(1.0, "--min-rate")
    with pytest.raises(ValueError, match=r"`min_rate` must be a finite number in \[0, 100\]"):
        check_percentage(100.5, "min_rate")
