"""The Python gate and the summary the CLI prints."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import polars_hidden_rate as phr
from polars_hidden_rate import engine, gate
from polars_hidden_rate.gate import summarize
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


@given(st.lists(st.integers(0, 50), min_size=1, max_size=60), st.floats(0, 100))
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
    if gate.quartiles_below(capped, cap):  # sound: the capped quartiles are the quartiles
        assert summarize(pl.DataFrame({"local_cloaking": capped})) == summarize(
            pl.DataFrame({"local_cloaking": full})
        )
    if full.max() < cap:  # and no recount when nothing was capped
        assert gate.quartiles_below(capped, cap)


def test_hidden_rate_counts_only_to_the_first_rival(monkeypatch: pytest.MonkeyPatch) -> None:
    caps: list[object] = []
    count_cloaking = engine.count_cloaking

    def spy(*args: Any, **kwargs: Any) -> Any:
        caps.append(kwargs.get("cap"))
        return count_cloaking(*args, **kwargs)

    monkeypatch.setattr(engine, "count_cloaking", spy)
    originals, avatars, rate = _frames(3)
    assert phr.hidden_rate(originals, avatars, coords=["a", "b"]) == pytest.approx(rate)
    assert caps == [1]
