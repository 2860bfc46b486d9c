"""The Python gate and the summary the CLI prints."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import polars_hidden_rate as phr
from polars_hidden_rate import gate
from polars_hidden_rate import plan as planner
from polars_hidden_rate.engine import count
from polars_hidden_rate.measures.summary import quartiles_below, summarize
from tests.helpers import brute_force_counts, counts_of, hidden_share


def _frames(seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame, float]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 30, (200, 2)).astype(float)
    y = x + rng.integers(-1, 2, x.shape)
    rate = hidden_share(brute_force_counts(x, y, 1e-9))
    return pl.DataFrame(x, schema=["a", "b"]), pl.DataFrame(y, schema=["a", "b"]), rate


def test_gate_passes_and_returns_the_rate() -> None:
    originals, avatars, rate = _frames()
    assert 0 < rate < 100
    measured = phr.assert_hidden_rate(originals, avatars, min_rate=rate, coords=["a", "b"])
    assert measured == pytest.approx(rate, abs=1e-12)


def test_gate_raises_below_the_minimum() -> None:
    originals, avatars, rate = _frames()
    with pytest.raises(phr.HiddenRateTooLowError, match="is below the minimum") as caught:
        phr.assert_hidden_rate(originals.lazy(), avatars, min_rate=rate + 0.1, coords=["a", "b"])
    assert isinstance(caught.value, AssertionError)
    assert caught.value.rate == pytest.approx(rate, abs=1e-12)
    assert caught.value.min_rate == pytest.approx(rate + 0.1)


def test_gate_default_minimum_is_90() -> None:
    originals, avatars, rate = _frames()
    assert rate < 90
    with pytest.raises(phr.HiddenRateTooLowError) as caught:
        phr.assert_hidden_rate(originals, avatars, coords=["a", "b"])
    assert caught.value.min_rate == 90


@pytest.mark.parametrize("min_rate", [-1, 100.5, float("nan"), None, True, "90"])
def test_gate_rejects_bad_minimum(min_rate: object) -> None:
    originals, avatars, _ = _frames()
    with pytest.raises(ValueError, match="min_rate"):
        phr.assert_hidden_rate(originals, avatars, min_rate=min_rate, coords="a")  # type: ignore[arg-type]


def test_gate_forwards_options_and_their_errors() -> None:
    originals, avatars, _ = _frames()
    with pytest.raises(pl.exceptions.ColumnNotFoundError, match="'zz'"):
        phr.assert_hidden_rate(originals, avatars, min_rate=0, coords="zz")


@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=60),
    st.just(0.0) | st.floats(1, 100, exclude_min=True),
)
def test_summary_matches_numpy(counts: list[int], min_rate: float) -> None:
    values = np.array(counts)
    summary = summarize(
        pl.DataFrame({"local_cloaking": values}, schema={"local_cloaking": pl.UInt32}),
        min_rate=min_rate,
    )
    rate = 100.0 * np.mean(values > 0)
    assert summary.n == len(values)
    assert summary.hidden_rate == pytest.approx(rate, abs=1e-12)
    assert summary.not_hidden == int((values == 0).sum())
    assert summary.not_hidden_share == pytest.approx(100 - rate, abs=1e-9)
    q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    assert (summary.local_cloaking_q1, summary.local_cloaking_median) == (q1, median)
    assert summary.local_cloaking_q3 == q3
    assert summary.passed == (summary.hidden_rate >= min_rate)


def test_summary_without_gate_passes_and_rejects_empty() -> None:
    summary = summarize(pl.LazyFrame({"local_cloaking": [0, 0]}))
    assert (summary.hidden_rate, summary.min_rate, summary.passed) == (0.0, None, True)
    with pytest.raises(pl.exceptions.NoDataError):
        summarize(pl.DataFrame({"local_cloaking": []}, schema={"local_cloaking": pl.UInt32}))


@pytest.mark.parametrize("cap", [1, 2, 3, 5, 64])
@pytest.mark.parametrize("spread", [3, 30])
def test_cloaking_summary_equals_the_summary_of_the_full_counts(
    monkeypatch: pytest.MonkeyPatch, cap: int, spread: int
) -> None:
    """Whatever the cap, below or above the quartiles, the summary is that of the full
    counts, value for value (a narrow spread gives counts in the dozens)."""
    monkeypatch.setattr(gate, "QUARTILE_CAP", cap)
    rng = np.random.default_rng(cap + spread)
    x = rng.integers(0, spread, (300, 2)).astype(float)
    y = x + rng.integers(-1, 2, x.shape)
    originals, avatars = pl.DataFrame(x, schema=["a", "b"]), pl.DataFrame(y, schema=["a", "b"])
    per_record = phr.local_cloaking(originals, avatars, coords=["a", "b"])
    expected = summarize(per_record, min_rate=50)
    found = gate.cloaking_summary(
        originals, avatars, min_rate=50, coords=["a", "b"], max_own_copies=100
    )
    assert counts_of(found) == counts_of(expected)
    assert found.passed == expected.passed
    assert expected.local_cloaking_q3 == pytest.approx(
        np.quantile(brute_force_counts(x, y, 1e-9), 0.75)
    )


@given(
    counts=st.lists(st.integers(0, 6), min_size=1, max_size=40),
    cap=st.integers(1, 7),
)
def test_quartiles_below_the_cap_are_the_quartiles(counts: list[int], cap: int) -> None:
    full = np.array(counts, dtype=np.int64)
    capped = np.minimum(full, cap)
    if quartiles_below(capped, cap):  # sound: the capped quartiles are the quartiles
        assert summarize(pl.DataFrame({"local_cloaking": capped})) == summarize(
            pl.DataFrame({"local_cloaking": full})
        )
    if full.max() < cap:  # and no recount when nothing was capped
        assert quartiles_below(capped, cap)


def test_hidden_rate_counts_only_to_the_first_rival(monkeypatch: pytest.MonkeyPatch) -> None:
    caps: list[object] = []
    linked_result = count.linked_result  # what the planner counts with

    def spy(*args: Any, **kwargs: Any) -> Any:
        caps.append(args[3].cap)  # its CountSettings
        return linked_result(*args, **kwargs)

    monkeypatch.setattr(planner, "linked_result", spy)
    originals, avatars, rate = _frames(3)
    assert phr.hidden_rate(originals, avatars, coords=["a", "b"]) == pytest.approx(rate)
    assert caps == [1]


@pytest.mark.parametrize("min_rate", [0.9, 1, 0.5, np.float64(0.9), 1e-9])
def test_a_fraction_is_refused_as_a_minimum_rate(min_rate: float) -> None:
    """0.9 means 0.9 %, a gate almost any release passes: every gate refuses it, with the fix."""
    originals, avatars, _ = _frames()
    meant = f"{100 * float(min_rate):g}"
    match = rf"`min_rate` is a percentage: {float(min_rate):g} means .* %; did you mean {meant}\?"
    with pytest.raises(ValueError, match=match):
        phr.assert_hidden_rate(originals, avatars, min_rate=min_rate, coords=["a", "b"])
    with pytest.raises(ValueError, match=match):
        gate.cloaking_summary(originals, avatars, min_rate=min_rate, coords=["a", "b"])
    with pytest.raises(ValueError, match=match):
        summarize(pl.DataFrame({"local_cloaking": [0, 1]}), min_rate=min_rate)


@pytest.mark.parametrize("min_rate", [0, 0.0, 1.5, 100])
def test_zero_and_percentages_above_one_are_minimum_rates(min_rate: float) -> None:
    summary = summarize(pl.DataFrame({"local_cloaking": [0, 1]}), min_rate=min_rate)
    assert summary.min_rate == min_rate
    assert summary.passed == (min_rate <= 50.0)


def _counts(hidden: int, n: int) -> pl.DataFrame:
    return pl.DataFrame({"local_cloaking": [1] * hidden + [0] * (n - hidden)})


def test_the_printed_verdict_shows_the_digits_that_decide_it() -> None:
    """89.995 % fails a 90 % gate: it is never printed as 90.00 %."""
    from polars_hidden_rate.cli import format_text

    below = summarize(_counts(17_999, 20_000), min_rate=90)
    assert below.hidden_rate == 89.995
    assert not below.passed
    text = format_text(below)
    assert "gate                  FAIL: hidden rate 89.995 % < 90 %" in text
    assert "hidden rate           89.995 %" in text
    error = gate.HiddenRateTooLowError(below.hidden_rate, 90.0)
    assert str(error) == "hidden rate 89.995 % is below the minimum of 90 %"

    at = format_text(summarize(_counts(18_000, 20_000), min_rate=90))
    assert "gate                  PASS: hidden rate 90.00 % >= 90 %" in at
    above = format_text(summarize(_counts(18_001, 20_000), min_rate=90))
    assert "gate                  PASS: hidden rate 90.005 % >= 90 %" in above
    # A threshold with more digits is printed as given, and the rate as far as it takes.
    odd = format_text(summarize(_counts(18_000, 20_000), min_rate=90.0001))
    assert "FAIL: hidden rate 90.00 % < 90.0001 %" in odd
    far = format_text(summarize(_counts(18_631, 20_000), min_rate=90))
    assert "PASS: hidden rate 93.16 % >= 90 %" in far  # two decimals where they decide


@given(st.integers(1, 400), st.data())
def test_the_printed_rate_is_on_the_side_of_the_threshold_it_lies_on(
    n: int, data: st.DataObject
) -> None:
    """Whatever the rate and the threshold, the printed numbers compare as the verdict says."""
    from polars_hidden_rate.cli import format_text

    hidden = data.draw(st.integers(0, n))
    min_rate = data.draw(
        (
            st.sampled_from([100.0 * hidden / n, 100.0 * max(hidden - 1, 0) / n])
            | st.floats(1, 100, exclude_min=True)
        ).filter(lambda rate: not 0 < rate <= 1)  # a fraction for a percentage is refused
    )
    summary = summarize(_counts(hidden, n), min_rate=min_rate)
    verdict = format_text(summary).splitlines()[-1]
    shown = verdict.split(": ", 1)[1].removeprefix("hidden rate ")
    shown_rate, _, shown_threshold = shown.partition(" % ")
    rate = float(shown_rate)
    threshold = float(shown_threshold.split()[1])
    assert threshold == min_rate  # the threshold as given, not rounded
    assert (rate >= threshold) == summary.passed
    assert (rate == threshold) == (summary.hidden_rate == min_rate)
