"""anonymeter's linkability attack (`linkability_risk`) and the inference attack in
anonymeter's space (`inference_risk(space="gower")`): against float64 brute forces on
integer grids with ties, duplicates and large offsets (ties at the edge shared by
enumerating every fill), invariant to row order and to power-of-two scales; against
anonymeter 1.1 itself, run in the peers' venv, where its result is defined."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import ColumnNotFoundError, ComputeError, DuplicateError, SchemaError

import polars_hidden_rate as phr
from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.measures.gower import Space
from polars_hidden_rate.measures.linkability import LinkabilityRisk
from tests.helpers import (
    as_columns,
    brute_gower,
    brute_gower_inference,
    brute_link_chance,
    examples,
    run_peer,
)

Side = tuple[Float64Array, Float64Array, Float64Array]
"""One side's (originals, synthetic, holdout) coordinates."""


def mapped(side: Side, change: Callable[[Float64Array], Float64Array]) -> Side:
    return change(side[0]), change(side[1]), change(side[2])


def brute_d2(queries: Float64Array, candidates: Float64Array) -> list[list[float]]:
    """Python floats: squared differences summed in column order."""
    out = []
    for q in queries.tolist():
        row = []
        for c in candidates.tolist():
            d2 = 0.0
            for a, b in zip(q, c, strict=True):
                d2 += (a - b) * (a - b)
            row.append(d2)
        out.append(row)
    return out


def brute_chances(
    sides: list[tuple[Float64Array, Float64Array, Float64Array]], k: int, tie_tol: float
) -> tuple[list[float], list[float]]:
    out = []
    for t in (0, 2):  # originals, holdout
        a, b = (brute_d2(side[t], side[1]) for side in sides)
        kk = min(k, len(sides[0][1]))
        out.append([brute_link_chance(ra, rb, kk, tie_tol) for ra, rb in zip(a, b, strict=True)])
    return out[0], out[1]


grid = st.lists(
    st.tuples(st.integers(-2, 2), st.integers(-1, 1), st.integers(-1, 1)), min_size=1, max_size=9
)


@st.composite
def side_cases(draw: st.DrawFn) -> list[tuple[Float64Array, Float64Array, Float64Array]]:
    """Three sets (originals, synthetic, holdout), each row split into A (2 columns) and B
    (1 column): integer grids, so ties and duplicates abound."""
    sets = [np.array(draw(grid), dtype=np.float64) for _ in range(3)]
    return [tuple(s[:, :2] for s in sets), tuple(s[:, 2:] for s in sets)]  # type: ignore[list-item]


@given(
    sides=side_cases(),
    k=st.sampled_from([1, 2, 3]),
    offset=st.sampled_from([0.0, 2.0**40, -(2.0**60)]),
    unit=st.sampled_from([1.0, 2.0**-600, 2.0**600]),
    tie_tol=st.sampled_from([0.0, 1e-9, 0.5]),
)
@settings(max_examples=examples(200), deadline=None)
def test_the_chances_equal_the_brute_force_enumerating_every_fill(
    sides: list[tuple[Float64Array, Float64Array, Float64Array]],
    k: int,
    offset: float,
    unit: float,
    tie_tol: float,
) -> None:
    sides = [mapped(side, lambda a: a * unit + offset) for side in sides]
    found = LinkabilityRisk.of_arrays(sides, n_neighbors=k, tie_tol=tie_tol)
    members, control = brute_chances(sides, k, tie_tol)  # at the input scale: exact squares
    if unit == 1.0:  # 2^±600 squares overflow or vanish here: the next test compares those
        assert found.members_success.tolist() == pytest.approx(members, abs=1e-15)
        assert found.control_success.tolist() == pytest.approx(control, abs=1e-15)
    assert found.n_neighbors == min(k, len(sides[0][1]))
    assert 0.0 <= found.risk <= 1.0


@given(
    sides=side_cases(),
    k=st.sampled_from([1, 2]),
    unit=st.sampled_from([2.0**-600, 2.0**600]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=examples(200), deadline=None)
def test_the_risk_is_invariant_to_row_order_and_to_power_of_two_scales(
    sides: list[tuple[Float64Array, Float64Array, Float64Array]], k: int, unit: float, seed: int
) -> None:
    found = LinkabilityRisk.of_arrays(sides, n_neighbors=k)
    scaled = LinkabilityRisk.of_arrays(
        [mapped(side, lambda a: a * unit) for side in sides], n_neighbors=k
    )
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(len(a)) for a in sides[0]]
    shuffled = LinkabilityRisk.of_arrays(
        [tuple(a[order] for a, order in zip(side, orders, strict=True)) for side in sides],  # type: ignore[misc]
        n_neighbors=k,
    )
    for other in (scaled, shuffled):
        assert (other.risk, other.risk_interval) == (found.risk, found.risk_interval)
        assert (other.members, other.control) == (found.members, found.control)
    assert shuffled.members_success.tolist() == found.members_success[orders[0]].tolist()
    assert scaled.members_success.tolist() == found.members_success.tolist()


def test_copies_are_linked_and_a_tie_is_shared() -> None:
    originals = pl.DataFrame({"age": [30.0, 40.0, 50.0, 60.0], "zip": [1.0, 2.0, 3.0, 4.0]})
    holdout = pl.DataFrame({"age": [31.0, 41.0, 52.0, 58.0], "zip": [4.0, 3.0, 1.0, 2.0]})
    found = phr.linkability_risk(originals, originals, holdout, aux_cols=("age", "zip"))
    assert found.members_success.tolist() == [1.0] * 4
    assert found.interval == found.risk_interval
    assert found.aux_cols == (("age",), ("zip",))
    assert found.space == "projected"
    # Two synthetic records at one distance from a target on A, one of them its B-nearest:
    # the fill at the edge is drawn, so the link is there half the time.
    a = np.array([[0.0]])
    synthetic_a, synthetic_b = np.array([[-1.0], [1.0], [5.0]]), np.array([[0.0], [9.0], [9.0]])
    tied = LinkabilityRisk.of_arrays([(a, synthetic_a, a), (a, synthetic_b, a + 9.0)])
    assert tied.members_success.tolist() == [0.5]
    # Tied on both sides (A: records 0 and 1; B, from 9: records 1 and 2): 1 / (2 * 2).
    assert tied.control_success.tolist() == [0.25]
    two = LinkabilityRisk.of_arrays([(a, synthetic_a, a), (a, synthetic_b, a + 9.0)], n_neighbors=2)
    assert two.members_success.tolist() == [1.0]  # both of A's, and B's nearest among them


@pytest.mark.parametrize("space", ["projected", "gower"])
def test_copies_of_both_sets_at_the_papers_split_give_no_risk(space: Space) -> None:
    # 1,497 training and 642 holdout records (the paper's split), a synthetic set holding a
    # copy of each: every target of both sets is linked and its secret guessed (1.000
    # against 1.000), so the synthetic set tells no more about its training records than
    # about the holdout. Rates at the sets' own sizes read a risk of 0.570.
    rng = np.random.default_rng(3)

    def people(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "a": rng.normal(size=n),
                "b": rng.normal(size=n) * 10.0,
                "c": rng.choice(["x", "y", "z"], n),
            }
        )

    originals, holdout = people(1497), people(642)
    synthetic = pl.concat([originals, holdout])
    linked = phr.linkability_risk(
        originals, synthetic, holdout, aux_cols=(["a"], ["b"]), space=space
    )
    guessed = phr.inference_risk(
        originals, synthetic, holdout, known=["a", "b"], secret="c", space=space
    )
    for found in (linked, guessed):
        assert found.members.successes == 1497
        assert found.control.successes == 642
        assert found.members.rate == found.control.rate
        assert found.risk == 0.0 == found.risk_interval[0]


def test_each_side_is_projected_on_its_own() -> None:
    """Each side's projection is fitted on the originals' columns of that side alone: with
    every component, the Euclidean distance of those columns standardized by the originals
    (a rotation of them), so the same nearest records where none ties."""
    rng = np.random.default_rng(1)

    def frame(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {"a": rng.normal(size=n), "b": rng.normal(size=n) * 1e6, "d": rng.normal(size=n)}
        )

    originals, holdout = frame(40), frame(30)
    synthetic = pl.concat([originals.head(15), frame(20)]).with_columns(pl.col("a") + 0.01)
    sides = (["a"], ["b", "d"])
    found = phr.linkability_risk(originals, synthetic, holdout, aux_cols=sides, n_neighbors=2)

    def standardized(side: list[str]) -> tuple[Float64Array, Float64Array, Float64Array]:
        mean = originals.select(side).mean().to_numpy()
        sd = originals.select(side).std(ddof=0).to_numpy()
        o, s, h = ((f.select(side).to_numpy() - mean) / sd for f in (originals, synthetic, holdout))
        return o, s, h

    by_hand = LinkabilityRisk.of_arrays([standardized(side) for side in sides], n_neighbors=2)
    assert found.members_success.tolist() == by_hand.members_success.tolist()
    assert found.control_success.tolist() == by_hand.control_success.tolist()
    assert found.members.successes > found.control.successes


@pytest.mark.parametrize("unit", [2.0**-600, 2.0**600])
def test_gower_equals_the_brute_force_and_is_invariant(unit: float) -> None:
    rng = np.random.default_rng(4)

    def frame(n: int) -> pl.DataFrame:  # integer grids: ties everywhere
        return pl.DataFrame(
            {
                "x": rng.integers(0, 3, n).astype(np.float64) * 2.0 + 1e6,
                "w": rng.integers(-1, 2, n).astype(np.float64),
                "c": rng.choice(["p", "q"], n),
                "y": rng.integers(0, 4, n).astype(np.float64),
            }
        )

    originals, synthetic, holdout = frame(12), frame(9), frame(10)
    sides = (["x", "c"], ["y", "w"])  # anonymeter's order: numbers by name, then categories
    for k in (1, 2):
        found = phr.linkability_risk(
            originals, synthetic, holdout, aux_cols=sides, n_neighbors=k, space="gower"
        )
        for targets, shares in (
            (originals, found.members_success),
            (holdout, found.control_success),
        ):
            a = brute_gower(targets.to_dicts(), synthetic.to_dicts(), ["x"], ["c"])
            b = brute_gower(targets.to_dicts(), synthetic.to_dicts(), ["y", "w"])
            expected = [brute_link_chance(p, q, k, 1e-9) for p, q in zip(a, b, strict=True)]
            assert shares.tolist() == pytest.approx(expected, abs=1e-15)
        scaled = phr.linkability_risk(
            *(
                f.with_columns(pl.col("x", "w", "y") * unit)
                for f in (originals, synthetic, holdout)
            ),
            aux_cols=sides,
            n_neighbors=k,
            space="gower",
        )
        shuffled = phr.linkability_risk(
            originals.sample(fraction=1.0, shuffle=True, seed=k),
            synthetic.sample(fraction=1.0, shuffle=True, seed=k + 1),
            holdout,
            aux_cols=sides,
            n_neighbors=k,
            space="gower",
        )
        for other in (scaled, shuffled):
            assert (other.risk, other.risk_interval) == (found.risk, found.risk_interval)


def test_gower_inference_shares_ties_whatever_the_order() -> None:
    rng = np.random.default_rng(5)

    def frame(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "x": rng.integers(0, 3, n) * 1.0,
                "c": rng.choice(["p", "q"], n),
                "s": rng.integers(0, 2, n),
            }
        )

    originals, synthetic, holdout = frame(15), frame(11), frame(13)
    found = phr.inference_risk(
        originals,
        synthetic,
        holdout,
        known=["x", "c"],
        secret="s",
        secret_kind="categorical",
        space="gower",
    )
    expected = brute_gower_inference(
        originals.to_dicts(), synthetic.to_dicts(), "s", ["x"], ["c"], regression=False
    )
    assert found.members_success.tolist() == expected
    assert found.space == "gower"
    assert found.to_dict()["space"] == "gower"
    shuffled = phr.inference_risk(
        originals, synthetic.reverse(), holdout, known=["x", "c"], secret="s",
        secret_kind="categorical", space="gower",
    )  # fmt: skip
    assert (shuffled.risk, shuffled.risk_interval) == (found.risk, found.risk_interval)


def test_bad_requests_are_refused() -> None:
    frame = pl.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "c": ["x", "y"]})

    def attack(**options: object) -> object:
        settings = {"aux_cols": ("a", "b"), **options}
        return phr.linkability_risk(frame, frame, frame, **settings)  # type: ignore[arg-type]

    with pytest.raises(DuplicateError, match="in both A and B"):
        attack(aux_cols=(["a", "b"], ["b"]))
    with pytest.raises(ColumnNotFoundError):
        attack(aux_cols=("a", "z"))
    with pytest.raises(TypeError, match="pair"):
        attack(aux_cols="a")
    with pytest.raises(ValueError, match="n_neighbors"):
        attack(n_neighbors=0)
    with pytest.raises(ValueError, match="space"):
        attack(space="euclid")
    with pytest.raises(ValueError, match="takes no `ncp`"):
        attack(space="gower", ncp=1)
    with pytest.raises(ValueError, match="takes no `on`"):
        attack(on="a")
    with pytest.raises(NotImplementedError):
        attack(device="gpu")
    with pytest.raises(SchemaError):
        phr.linkability_risk(frame, frame, frame.drop("c"), aux_cols=("a", "b"))
    with pytest.raises(SchemaError, match="'a'"):
        phr.linkability_risk(
            frame, frame.with_columns(pl.col("a").cast(pl.String)), frame,
            aux_cols=("a", "b"), space="gower",
        )  # fmt: skip
    gaps = frame.with_columns(pl.Series("a", [1.0, None]))
    with pytest.raises(ComputeError, match="missing values"):
        phr.linkability_risk(gaps, gaps, gaps, aux_cols=("a", "b"), space="gower")
    with pytest.raises(ValueError, match="takes no `impute`"):
        phr.inference_risk(frame, frame, frame, known="a", secret="c", space="gower", impute="mean")


# --- anonymeter itself, in the peers' venv (`make peers`), where its result is defined


def peer_sets(seed: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Continuous columns on each side (no tie between distances), categories beside them;
    the originals and the holdout of one size (anonymeter attacks as many of each)."""
    rng = np.random.default_rng(seed)

    def frame(n: int, shift: float = 0.0) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "a": rng.normal(size=n) + shift,
                "b": rng.integers(0, 3, n),
                "c": rng.choice(["x", "y", "z"], n),
                "d": rng.normal(size=n) * 100.0,
                "s": rng.choice(["p", "q"], n),
                "v": rng.normal(size=n) * 10.0,
            }
        )

    originals = frame(80)
    synthetic = pl.concat([originals.head(30), frame(50, 0.3)])  # some copies leak
    return originals, synthetic, frame(80)


def typed(sets: tuple[pl.DataFrame, ...]) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The sets with ``b`` as Int8 (its range fits the type: pandas' figure is float64's) and
    ``e``, ``a`` to the nearest half as a Decimal (Python objects to pandas, so a category to
    anonymeter)."""
    half = (pl.col("a") * 2).round() / 2
    o, s, h = (
        f.with_columns(pl.col("b").cast(pl.Int8), half.cast(pl.Decimal(10, 1)).alias("e"))
        for f in sets
    )
    return o, s, h


def typed_columns(frame: pl.DataFrame) -> dict[str, list[Any]]:
    """`as_columns`, the Decimal as text (JSON has no decimals; `peer_oracle` reads it back)."""
    return as_columns(frame.with_columns(pl.col("e").cast(pl.String)))


TYPED_CASTS = {"b": "int8", "e": "decimal"}
TYPED_SIDES = (["a", "e"], ["b", "d"])
TYPED_KNOWN = ["a", "b", "e"]


def close(found: float, expected: float) -> bool:
    return math.isclose(found, expected, rel_tol=1e-9, abs_tol=1e-12)


LINKABILITY = [(1, 0), (3, 1), (5, 2)]
INFERENCE = [("s", False), ("v", True), ("b", False)]
SIDES = (["a", "c"], ["b", "d"])


def known_for(secret: str) -> list[str]:
    return [c for c in ("a", "c", "d") if c != secret]


@pytest.fixture(scope="module")
def anonymeters() -> dict[tuple[str, object], dict[str, object]]:
    """anonymeter's figures for every case below, from one process of the peers' venv."""
    cases: list[dict[str, object]] = []
    for k, seed in LINKABILITY:
        originals, synthetic, holdout = peer_sets(seed)
        cases.append(
            {
                "peer": "linkability",
                "originals": as_columns(originals),
                "synthetic": as_columns(synthetic),
                "holdout": as_columns(holdout),
                "aux_cols": SIDES,
                "n_neighbors": k,
                "confidence": 0.95,
            }
        )
    originals, synthetic, holdout = peer_sets(7)
    for secret, regression in INFERENCE:
        cases.append(
            {
                "peer": "inference",
                "originals": as_columns(originals),
                "synthetic": as_columns(synthetic),
                "holdout": as_columns(holdout),
                "known": known_for(secret),
                "secret": secret,
                "regression": regression,
                "confidence": 0.95,
            }
        )
    originals, synthetic, holdout = typed(peer_sets(8))
    sets = {
        "originals": typed_columns(originals),
        "synthetic": typed_columns(synthetic),
        "holdout": typed_columns(holdout),
        "casts": TYPED_CASTS,
        "confidence": 0.95,
    }
    cases.append({"peer": "linkability", **sets, "aux_cols": TYPED_SIDES, "n_neighbors": 1})
    cases.append(
        {"peer": "inference", **sets, "known": TYPED_KNOWN, "secret": "s", "regression": False}
    )
    found = run_peer(cases, needs="anonymeter")
    keys = [("linkability", k) for k, _ in LINKABILITY] + [("inference", s) for s, _ in INFERENCE]
    keys += [("linkability", "typed"), ("inference", "typed")]
    return dict(zip(keys, found, strict=True))


@pytest.mark.parametrize(("k", "seed"), LINKABILITY)
def test_linkability_equals_anonymeters(
    k: int, seed: int, anonymeters: dict[tuple[str, object], dict[str, Any]]
) -> None:
    originals, synthetic, holdout = peer_sets(seed)
    peer = anonymeters["linkability", k]
    found = phr.linkability_risk(
        originals, synthetic, holdout, aux_cols=SIDES, n_neighbors=k, space="gower"
    )
    assert set(found.members_success.tolist()) <= {0.0, 1.0}  # no tie at any edge
    assert (found.members.successes, found.control.successes) == (
        peer["n_success"],
        peer["n_control"],
    )
    assert close(found.risk, peer["risk"])
    assert all(close(x, y) for x, y in zip(found.interval, peer["interval"], strict=True))
    assert close(found.members.rate, peer["attack_rate"][0])
    assert close(found.control.error, peer["control_rate"][1])


@pytest.mark.parametrize(("secret", "regression"), INFERENCE)
def test_gower_inference_equals_anonymeters(
    secret: str, regression: bool, anonymeters: dict[tuple[str, object], dict[str, Any]]
) -> None:
    originals, synthetic, holdout = peer_sets(7)
    peer = anonymeters["inference", secret]
    found = phr.inference_risk(
        originals,
        synthetic,
        holdout,
        known=known_for(secret),
        secret=secret,
        secret_kind="numeric" if regression else "categorical",
        space="gower",
    )
    assert (found.members.successes, found.control.successes) == (
        peer["n_success"],
        peer["n_control"],
    )
    assert close(found.risk, peer["risk"])
    assert all(close(x, y) for x, y in zip(found.risk_interval, peer["interval"], strict=True))


def test_gower_takes_the_types_as_anonymeter_does(
    anonymeters: dict[tuple[str, object], dict[str, Any]],
) -> None:
    """An Int8 column whose range fits its type, and a Decimal column, which pandas holds as
    objects and anonymeter takes as a category: the same figures as anonymeter's."""
    originals, synthetic, holdout = typed(peer_sets(8))
    found: list[Any] = [
        phr.linkability_risk(
            originals, synthetic, holdout, aux_cols=TYPED_SIDES, space="gower"
        ),
        phr.inference_risk(
            originals, synthetic, holdout, known=TYPED_KNOWN, secret="s",
            secret_kind="categorical", space="gower",
        ),
    ]  # fmt: skip
    for attack, peer in zip(
        found, (anonymeters["linkability", "typed"], anonymeters["inference", "typed"]), strict=True
    ):
        assert (attack.members.successes, attack.control.successes) == (
            peer["n_success"],
            peer["n_control"],
        )
        assert close(attack.risk, peer["risk"])


def test_the_attacks_by_small_blocks_of_targets_give_the_same_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where records tie by the thousand the searches run by blocks of targets
    (`query_blocks`); blocks of one or a few targets change no figure."""
    from polars_hidden_rate.engine import nearest

    rng = np.random.default_rng(11)

    def frame(n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "x": rng.integers(0, 3, n) * 1.0,
                "c": rng.choice(["p", "q"], n),
                "y": rng.integers(0, 2, n) * 1.0,
                "s": rng.integers(0, 2, n),
            }
        )

    sets = frame(40), frame(30), frame(35)
    runs = []
    for first, budget in ((1024, 1 << 22), (1, 1), (3, 20)):
        monkeypatch.setattr(nearest, "FIRST_BLOCK", first)
        monkeypatch.setattr(nearest, "FOUND_PER_BLOCK", budget)
        runs.append(
            [
                phr.linkability_risk(
                    *sets, aux_cols=(["x", "c"], ["y"]), n_neighbors=2, space=space
                )
                for space in ("gower", "projected")
            ]
            + [phr.inference_risk(*sets, known=["x", "c"], secret="s", space="gower")]
        )
    for run in runs[1:]:
        for found, expected in zip(run, runs[0], strict=True):
            assert found.members_success.tolist() == expected.members_success.tolist()
            assert found.control_success.tolist() == expected.control_success.tolist()
