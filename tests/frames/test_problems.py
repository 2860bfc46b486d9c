"""The frames layer's problems as values: a side read in pieces (a cluster's files) reports,
once combined, exactly what the whole read reports, and raises its error word for word."""

from __future__ import annotations

import itertools

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import PolarsError

from polars_hidden_rate.frames import CoordinateProblems, read_aligned
from polars_hidden_rate.frames.schema import Link
from tests.helpers import examples

_BEYOND = 2**53 + 1  # float64 rounds it to 2^53
_FLOATS = st.sampled_from([0.5, -1.0, 3.0, None, float("nan"), float("inf"), -float("inf")])
_INTEGERS = st.sampled_from([0, 7, -_BEYOND, _BEYOND, None])


def _raised(problems: CoordinateProblems) -> str | None:
    """The error ``problems`` raise, as type and message; None when there is none."""
    try:
        problems.raise_first()
    except PolarsError as error:
        return f"{type(error).__name__}: {error}"
    return None


@settings(max_examples=examples(200))
@given(
    rows=st.integers(0, 12).flatmap(
        lambda n: st.tuples(
            st.lists(_FLOATS, min_size=n, max_size=n), st.lists(_INTEGERS, min_size=n, max_size=n)
        )
    ),
    cuts=st.lists(st.integers(0, 12), max_size=4),
)
def test_pieces_combined_are_the_whole_read(
    rows: tuple[list[float | None], list[int | None]], cuts: list[int]
) -> None:
    floats, integers = rows
    frame = pl.DataFrame(
        {"x": pl.Series(floats, dtype=pl.Float64), "k": pl.Series(integers, dtype=pl.Int64)}
    )
    bounds = sorted({0, frame.height, *(min(c, frame.height) for c in cuts)})
    pieces = [frame[a:b] for a, b in itertools.pairwise(bounds)] or [frame]
    whole = CoordinateProblems.of(frame, ["x", "k"], "originals")
    combined = CoordinateProblems.combine(
        [CoordinateProblems.of(piece, ["x", "k"], "originals") for piece in pieces]
    )
    assert combined.rows == whole.rows
    assert list(combined.missing.items()) == list(whole.missing.items())  # in the same order
    assert dict(combined.inexact) == dict(whole.inexact)
    assert bool(combined) == bool(whole)
    assert _raised(combined) == _raised(whole)


def test_the_whole_read_raises_what_read_aligned_raises() -> None:
    """The order of the local read: no rows, then missing values, then inexact ones; the
    originals before the avatars."""
    fine = pl.DataFrame({"x": [0.0, 1.0], "k": [1, 2]})
    cases = [
        pl.DataFrame(schema={"x": pl.Float64, "k": pl.Int64}),
        pl.DataFrame({"x": [None, float("nan")], "k": [_BEYOND, 1]}),
        pl.DataFrame({"x": [0.0, 1.0], "k": [_BEYOND, 1]}),
    ]
    for case in cases:
        for originals, avatars, role in ((case, fine, "originals"), (fine, case, "avatars")):
            expected = _raised(CoordinateProblems.of(case, ["x", "k"], role))
            assert expected is not None
            with pytest.raises(PolarsError) as raised:
                read_aligned(originals.lazy(), avatars.lazy(), ["x", "k"], Link())
            assert f"{type(raised.value).__name__}: {raised.value}" == expected


def test_a_decimal_comma_may_start_a_number() -> None:
    from polars_hidden_rate.frames.text_numbers import DECIMAL_COMMA_NUMBER, notation

    for value in (",5", "-,25", "+,5e3"):
        assert notation(value) == ("a decimal comma",), value
    # The same pattern in Polars' regex, as the csv read applies it.
    assert pl.Series([",5", "-,25", "1,5"]).str.contains(DECIMAL_COMMA_NUMBER).all()


@pytest.mark.parametrize("precision", [16, 17])
def test_decimals_of_more_than_15_digits_are_checked_against_float64(precision: int) -> None:
    import decimal

    from polars_hidden_rate.frames import inexact_counts, inexact_values

    dtype = pl.Decimal(precision, 2)
    # Two values a cent apart whose nearest float64 is one and the same.
    digits = "9" * (precision - 2)
    values = [decimal.Decimal(f"{digits}.01"), decimal.Decimal(f"{digits}.02")]
    assert float(values[0]) == float(values[1])
    frame = pl.DataFrame({"d": values}, schema={"d": dtype})
    assert inexact_values(pl.col("d"), dtype) is not None
    assert inexact_counts(frame, {"d": dtype}) == {"d": 2 if precision == 17 else 1}
    # 15 digits always come back from their float64.
    assert inexact_values(pl.col("d"), pl.Decimal(15, 2)) is None
