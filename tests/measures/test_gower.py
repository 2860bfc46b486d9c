"""anonymeter's space (`space="gower"`, `polars_hidden_rate.measures.gower`) against the brute
forces of `tests/helpers.py`, written pair by pair in anonymeter's column order and arithmetic:
floats, negative values, missing categories, constant columns, mixed kinds, numeric and
categorical secrets, ``tie_tol`` 0 and above; and its refusals (missing and infinite numbers
in every set, the types pandas would measure otherwise)."""

from __future__ import annotations

import decimal
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import ColumnNotFoundError, ComputeError, SchemaError

import polars_hidden_rate as phr
from polars_hidden_rate.frames import MissingValuesError
from polars_hidden_rate.measures.linkability import LinkabilityRisk
from tests.helpers import brute_gower, brute_gower_inference, brute_link_chance, examples

Sets = tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]

SECRET_KINDS = {"s": False, "v": True}
"""The secrets of the cases below: ``s`` categorical, ``v`` numeric (anonymeter's
``regression``)."""


def shares(
    sets: Sets,
    known: list[str],
    secret: str,
    *,
    numeric: Sequence[str],
    categorical: Sequence[str] = (),
    tolerance: float = 0.05,
    tie_tol: float = 1e-9,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """The package's members' and control's shares in anonymeter's space, then the brute
    force's."""
    originals, synthetic, holdout = sets
    regression = SECRET_KINDS[secret]
    found = phr.inference_risk(
        originals,
        synthetic,
        holdout,
        known=known,
        secret=secret,
        secret_kind="numeric" if regression else "categorical",
        tolerance=tolerance,
        tie_tol=tie_tol,
        space="gower",
    )
    expected = [
        brute_gower_inference(
            targets.to_dicts(),
            synthetic.to_dicts(),
            secret,
            numeric,
            categorical,
            regression=regression,
            tolerance=tolerance,
            tie_tol=tie_tol,
        )
        for targets in (originals, holdout)
    ]
    return found.members_success.tolist(), found.control_success.tolist(), *expected


def check_shares(sets: Sets, known: list[str], secret: str, **kinds: Any) -> list[float]:
    """Assert the package's shares equal the brute force's, float for float; the members'."""
    members, control, expected_members, expected_control = shares(sets, known, secret, **kinds)
    assert members == expected_members
    assert control == expected_control
    return members


# --- the brute force on drawn sets: every kind of column and secret, ties, tie_tol


LEVELS = ["a", "b", "c", "d", None]
NUMBERS = [-2.5, -0.3, -0.1, 0.0, 0.1, 0.2, 0.3, 0.7, 1.0, 3.3]
"""Values whose sums round differently in another order, so ties move with it."""


@st.composite
def mixed_sets(draw: st.DrawFn) -> Sets:
    """Three sets of mixed columns, named so that the user's order is not anonymeter's:
    floats with negatives (``z``, ``a``), an integer column constant or not (``m``),
    categories with missing values (``k``, four levels; ``b``), a categorical and a numeric
    secret (``s``, ``v``, both with missing values)."""
    constant = draw(st.booleans())

    def frame() -> pl.DataFrame:
        rows = st.fixed_dictionaries(
            {
                "z": st.sampled_from(NUMBERS) | st.floats(-5, 5, width=64),
                "a": st.sampled_from(NUMBERS),
                "m": st.just(3) if constant else st.integers(-3, 3),
                "k": st.sampled_from(LEVELS),
                "b": st.sampled_from(["p", "q", None]),
                "s": st.sampled_from(["x", "y", None]),
                "v": st.sampled_from([-1.0, 0.5, 1.0, 1.04, 2.0, None]),
            }
        )
        return pl.DataFrame(
            draw(st.lists(rows, min_size=1, max_size=7)),
            schema={
                "z": pl.Float64,
                "a": pl.Float64,
                "m": pl.Int64,
                "k": pl.String,
                "b": pl.String,
                "s": pl.String,
                "v": pl.Float64,
            },
        )

    originals, synthetic, holdout = frame(), frame(), frame()
    # The originals hold every secret of the others (no set is refused as recoded).
    return pl.concat([originals, synthetic, holdout]), synthetic, holdout


KNOWN = ["z", "k", "a", "m", "b"]
KINDS = {"numeric": ["z", "a", "m"], "categorical": ["k", "b"]}


@given(
    sets=mixed_sets(),
    secret=st.sampled_from(["s", "v"]),
    tie_tol=st.sampled_from([0.0, 1e-9, 5e-4]),
    tolerance=st.sampled_from([0.0, 0.05, 0.5]),
)
@settings(max_examples=examples(300), deadline=None)
def test_inference_equals_the_brute_force(
    sets: Sets, secret: str, tie_tol: float, tolerance: float
) -> None:
    check_shares(sets, KNOWN, secret, **KINDS, tolerance=tolerance, tie_tol=tie_tol)


@given(sets=mixed_sets(), k=st.sampled_from([1, 2]), tie_tol=st.sampled_from([0.0, 1e-9, 5e-4]))
@settings(max_examples=examples(200), deadline=None)
def test_linkability_equals_the_brute_force(sets: Sets, k: int, tie_tol: float) -> None:
    originals, synthetic, holdout = sets
    sides = (["z", "k", "m"], ["b", "a"])
    found = phr.linkability_risk(
        originals, synthetic, holdout, aux_cols=sides, n_neighbors=k, tie_tol=tie_tol,
        space="gower",
    )  # fmt: skip
    kk = min(k, synthetic.height)
    for targets, success in ((originals, found.members_success), (holdout, found.control_success)):
        rows, candidates = targets.to_dicts(), synthetic.to_dicts()
        a = brute_gower(rows, candidates, ["z", "m"], ["k"])
        b = brute_gower(rows, candidates, ["a"], ["b"])
        expected = [brute_link_chance(p, q, kk, tie_tol) for p, q in zip(a, b, strict=True)]
        assert success.tolist() == pytest.approx(expected, abs=1e-15)


# --- one example for each rule, where breaking it moves a share


def frames(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=schema, orient="row")


def one_target(
    target: dict[str, Any], synthetic: list[dict[str, Any]], schema: dict[str, Any]
) -> Sets:
    """The target, then copies of the synthetic records (so the originals hold every secret
    and the ranges are the synthetic set's and the target's), as the originals and the
    holdout."""
    originals = pl.DataFrame([target, *synthetic], schema=schema)
    return originals, pl.DataFrame(synthetic, schema=schema), originals


FLOATS = {"c": pl.Float64, "a": pl.Float64, "b": pl.Float64, "s": pl.String}


def test_the_columns_are_summed_in_anonymeters_order() -> None:
    """Sorted by name, ``(0.1 + 0.2) + 0.3`` against ``(0.3 + 0.2) + 0.1``: the second
    synthetic record is nearer; in the user's order (``c, a, b``) both sum to
    0.6000000000000001 and would tie."""
    sets = one_target(
        {"c": 0.0, "a": 0.0, "b": 0.0, "s": "q"},
        [
            {"c": 0.3, "a": 0.1, "b": 0.2, "s": "p"},
            {"c": 0.1, "a": 0.3, "b": 0.2, "s": "q"},
            {"c": 1.0, "a": 1.0, "b": 1.0, "s": "r"},  # every range 1
        ],
        FLOATS,
    )
    members = check_shares(sets, ["c", "a", "b"], "s", numeric=["c", "a", "b"], tie_tol=0.0)
    assert members[0] == 1.0


def test_missing_categories_equal_each_other() -> None:
    schema = {"k": pl.String, "s": pl.String}
    sets = one_target(
        {"k": None, "s": "p"},
        [{"k": None, "s": "p"}, {"k": "x", "s": "q"}, {"k": "y", "s": "q"}],
        schema,
    )
    assert check_shares(sets, ["k"], "s", numeric=[], categorical=["k"])[0] == 1.0


def test_a_constant_column_is_not_scaled() -> None:
    schema = {"m": pl.Int64, "x": pl.Float64, "s": pl.String}
    sets = one_target(
        {"m": 7, "x": 0.0, "s": "p"},
        [{"m": 7, "x": 0.5, "s": "p"}, {"m": 7, "x": -1.5, "s": "q"}],
        schema,
    )
    assert check_shares(sets, ["m", "x"], "s", numeric=["m", "x"])[0] == 1.0


def test_the_range_spans_the_targets_too() -> None:
    """Over the synthetic set and the targets the range of ``x`` is 10: the first record is
    nearer (0.1 against 1); over the synthetic set alone (1) the two would tie."""
    schema = {"x": pl.Float64, "c": pl.String, "s": pl.String}
    originals = pl.DataFrame(
        [{"x": 0.0, "c": "u", "s": "p"}, {"x": 10.0, "c": "w", "s": "p"}], schema=schema
    )
    synthetic = pl.DataFrame(
        [{"x": 1.0, "c": "u", "s": "p"}, {"x": 0.0, "c": "v", "s": "q"}], schema=schema
    )
    members = check_shares(
        (originals, synthetic, originals), ["x", "c"], "s", numeric=["x"], categorical=["c"]
    )
    assert members[0] == 1.0


def test_categories_differ_by_one_whatever_their_codes() -> None:
    """The first categorical column after the numeric ones: ``a`` against ``c`` is as far as
    ``a`` against ``b`` (their codes are 1, 3 and 2)."""
    schema = {"x": pl.Float64, "k": pl.String, "s": pl.String}
    sets = one_target(
        {"x": 0.0, "k": "a", "s": "p"},
        [{"x": 0.0, "k": "c", "s": "p"}, {"x": 0.0, "k": "b", "s": "q"}],
        schema,
    )
    assert check_shares(sets, ["x", "k"], "s", numeric=["x"], categorical=["k"])[0] == 0.5


NUMERIC_SECRET = {"x": pl.Float64, "v": pl.Float64}


@pytest.mark.parametrize(
    ("guess", "secret", "tolerance", "right"),
    [
        (1.0, 1.5, 0.5 / (1.0 + 1e-12), True),  # exactly at the tolerance: right
        (1.0, 2.0, 0.6, False),  # 1 / 1 misses by more than 0.6 (over the secret: 0.5)
        (-1.0, 5.0, 0.05, True),  # anonymeter's rule: a negative guess is right
        (2.0, 2.0, 0.0, True),
        (None, None, 0.05, True),  # both missing
        (None, 1.0, 0.05, False),
    ],
)
def test_a_numeric_guess_is_judged_by_anonymeters_rule(
    guess: float | None, secret: float | None, tolerance: float, right: bool
) -> None:
    sets = one_target(
        {"x": 0.0, "v": secret}, [{"x": 0.0, "v": guess}, {"x": 9.0, "v": 0.0}], NUMERIC_SECRET
    )
    members = check_shares(sets, ["x"], "v", numeric=["x"], tolerance=tolerance)
    assert members[0] == (1.0 if right else 0.0)


def test_a_missing_categorical_secret_is_guessed_by_a_missing_one() -> None:
    schema = {"x": pl.Float64, "s": pl.String}
    sets = one_target({"x": 0.0, "s": None}, [{"x": 0.0, "s": None}, {"x": 1.0, "s": "p"}], schema)
    assert check_shares(sets, ["x"], "s", numeric=["x"])[0] == 1.0


@pytest.mark.parametrize(("tie_tol", "share"), [(5e-4, 0.5), (1e-9, 1.0), (0.0, 1.0)])
def test_records_within_the_tie_tolerance_tie(tie_tol: float, share: float) -> None:
    """Distances 1 and 1.0004 (over the range 2.0004): tied within 5e-4, not within 1e-9."""
    schema = {"x": pl.Float64, "s": pl.String}
    sets = one_target(
        {"x": 0.0, "s": "p"}, [{"x": 1.0, "s": "p"}, {"x": -1.0004, "s": "q"}], schema
    )
    assert check_shares(sets, ["x"], "s", numeric=["x"], tie_tol=tie_tol)[0] == share


# --- refusals: missing and infinite numbers in every set, the types pandas measures otherwise


def clean_sets() -> Sets:
    frame = pl.DataFrame(
        {"a": [1.0, 2.0, 3.0, 4.0], "b": [3.0, 4.0, 5.0, 1.0], "c": ["x", "y", "x", "y"]}
    )
    return frame, frame, frame


def attack(name: str, sets: Sets) -> Any:
    if name == "linkability":
        return phr.linkability_risk(*sets, aux_cols=(["a"], ["b", "c"]), space="gower")
    return phr.inference_risk(*sets, known=["a", "b"], secret="c", space="gower")


@pytest.mark.parametrize("name", ["linkability", "inference"])
@pytest.mark.parametrize("side", [0, 1, 2])
@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (float("inf"), "infinite"),
        (-float("inf"), "infinite"),
        (float("nan"), "NaN"),
        (None, "null"),
    ],
)
def test_missing_and_infinite_numbers_are_refused_in_every_set(
    name: str, side: int, value: float | None, kind: str
) -> None:
    """As the projected space refuses them: the column, the count and the kind, no value."""
    sets = list(clean_sets())
    secret = 123.456789
    sets[side] = sets[side].with_columns(pl.Series("a", [secret, value, 3.0, 4.0]))
    role = ("originals", "synthetic", "holdout")[side]
    with pytest.raises(MissingValuesError, match=f"columns of {role} .*'a' \\(1 {kind}\\)") as e:
        attack(name, (sets[0], sets[1], sets[2]))
    assert "123.45" not in str(e.value)


@pytest.mark.parametrize("name", ["linkability", "inference"])
@pytest.mark.parametrize(
    ("dtype", "words"),
    [(pl.Float32, "cast it to Float64"), (pl.Duration("ms"), "cast it to a number")],
)
def test_types_pandas_measures_otherwise_are_refused(
    name: str, dtype: pl.DataType, words: str
) -> None:
    originals, _, _ = clean_sets()
    cast = originals.with_columns(pl.col("a").cast(pl.Int64).cast(dtype))
    with pytest.raises(SchemaError, match=f"column 'a' is {re.escape(str(dtype))}.*{words}"):
        attack(name, (cast, cast, cast))


@pytest.mark.parametrize("name", ["linkability", "inference"])
def test_a_narrow_integer_is_refused_where_pandas_range_wraps(name: str) -> None:
    originals, _, _ = clean_sets()
    narrow = originals.with_columns(pl.Series("a", [-100, 0, 20, 27], dtype=pl.Int8))
    fits = attack(name, (narrow, narrow, narrow))  # range 127: pandas holds it
    wide = narrow.with_columns(pl.col("a").cast(pl.Int64))
    assert (
        fits.members_success.tolist() == attack(name, (wide, wide, wide)).members_success.tolist()
    )
    wraps = narrow.with_columns(pl.Series("a", [-100, 0, 20, 28], dtype=pl.Int8))
    with pytest.raises(ComputeError, match=r"column 'a' is Int8 .*cast it to Int64"):
        attack(name, (wraps, wraps, wraps))
    # In the holdout only: the control's search wraps, the members' does not.
    with pytest.raises(ComputeError, match="column 'a' is Int8"):
        attack(name, (narrow, narrow, wraps))


def test_a_decimal_column_is_categorical_as_pandas_holds_it() -> None:
    """``to_pandas`` makes a Decimal column Python objects, which ``select_dtypes("number")``
    leaves out: each value a category (1.50 and 1.5 one), not a number."""
    schema: dict[str, pl.DataType] = {"d": pl.Decimal(10, 2), "x": pl.Float64(), "s": pl.String()}
    rows = [
        {"d": decimal.Decimal("1.50"), "x": 0.0, "s": "p"},
        {"d": decimal.Decimal("9.00"), "x": 0.0, "s": "q"},
        {"d": decimal.Decimal("1.60"), "x": 0.1, "s": "p"},
        {"d": decimal.Decimal("9.00"), "x": 10.0, "s": "q"},
    ]
    originals = pl.DataFrame(rows, schema=schema)  # the target, then copies of the synthetic
    synthetic = pl.DataFrame(rows[1:], schema=schema).with_columns(
        pl.col("d").cast(pl.Decimal(10, 1))
    )
    found = phr.inference_risk(
        originals, synthetic, originals, known=["d", "x"], secret="s", space="gower"
    )
    assert found.categorical == ("d",)
    # As numbers, 1.6 is nearer than 9 by far (the second record); as categories both
    # differ from 1.50, and x decides (the first).
    assert found.members_success[0] == 0.0
    expected = brute_gower_inference(
        originals.to_dicts(), synthetic.to_dicts(), "s", ["x"], ["d"], regression=False
    )
    assert expected == found.members_success.tolist()
    same = synthetic.with_columns(
        pl.Series("d", [decimal.Decimal(v) for v in ("9.0", "1.5", "9.0")], pl.Decimal(10, 1))
    )
    found = phr.inference_risk(
        originals, same, originals, known=["d", "x"], secret="s", space="gower"
    )
    assert found.members_success[0] == 1.0  # 1.50 equals 1.5: the second is nearest
    with pytest.raises(SchemaError, match=r"column 'd' .*Decimal is categorical"):
        phr.inference_risk(
            originals, synthetic.with_columns(pl.col("d").cast(pl.Float64)), originals,
            known=["d", "x"], secret="s", space="gower",
        )  # fmt: skip


# --- the linkability attack's own options


def seven_columns(seed: int) -> Sets:
    rng = np.random.default_rng(seed)

    def frame(n: int) -> pl.DataFrame:
        return pl.DataFrame({f"c{i}": rng.normal(size=n) * (i + 1) for i in range(8)})

    originals = frame(60)
    synthetic = pl.concat([originals.head(20), frame(40)]).with_columns(pl.all() + 0.05)
    return originals, synthetic, frame(60)


def test_each_side_keeps_every_component_by_default() -> None:
    """With every component, a side's projection is a rotation of its standardized columns:
    the same nearest records as those columns standardized by hand, on a 7-column side where
    the plan's default number of components would keep fewer."""
    originals, synthetic, holdout = seven_columns(3)
    sides = (["c0"], [f"c{i}" for i in range(1, 8)])
    found = phr.linkability_risk(originals, synthetic, holdout, aux_cols=sides)
    by_hand = []
    for side in sides:
        mean = originals.select(side).mean().to_numpy()
        sd = originals.select(side).std(ddof=0).to_numpy()
        o, s, h = ((f.select(side).to_numpy() - mean) / sd for f in (originals, synthetic, holdout))
        by_hand.append((o, s, h))
    expected = LinkabilityRisk.of_arrays(by_hand)
    assert found.members_success.tolist() == expected.members_success.tolist()
    assert found.control_success.tolist() == expected.control_success.tolist()
    assert found.risk == expected.risk


def test_a_categorical_name_of_neither_side_is_refused() -> None:
    originals, synthetic, holdout = seven_columns(4)
    with pytest.raises(ColumnNotFoundError, match="'zz'"):
        phr.linkability_risk(
            originals, synthetic, holdout, aux_cols=(["c0"], ["c1"]), categorical=["c0", "zz"]
        )
