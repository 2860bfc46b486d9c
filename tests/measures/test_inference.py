"""The attribute inference attack (issue 23) against a float64 brute force over every
(target, synthetic record) pair: ties among the nearest shared, Wilson's rates at the smaller
set's size and the propagated interval (anonymeter's at equal sizes), order invariance, and bad
input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import polars.selectors as cs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.exceptions import (
    ColumnNotFoundError,
    ComputeError,
    DuplicateError,
    NoDataError,
    SchemaError,
)

import polars_hidden_rate as phr
from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.measures.inference import InferenceRisk
from tests.helpers import (
    brute_shares,
    exact_integer_shares,
    examples,
    reference_risk,
    release_with_holdout,
)

points = st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2)), min_size=1, max_size=30)
# Dyadic values and tolerances, so that a guess can lie exactly on the tolerance's edge.
values = st.sampled_from([0.0, 1.0, 3.0, 4.0, 5.0, -4.0, -3.0, 0.5, math.inf, math.nan])


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Float64Array], list[Float64Array], float]:
    coordinates, secrets = [], []
    for _ in range(3):
        rows = draw(points)
        coordinates.append(np.array(rows, dtype=np.float64))
        secrets.append(np.array(draw(st.lists(values, min_size=len(rows), max_size=len(rows)))))
    return coordinates, secrets, draw(st.sampled_from([0.0, 0.25, 0.5]))


@given(
    case=cases(),
    offset=st.sampled_from([0.0, 2.0**40, -(2.0**60)]),
    unit=st.sampled_from([1.0, 2.0**-30, 2.0**300]),
    kind=st.sampled_from(["numeric", "categorical"]),
    tie_tol=st.sampled_from([0.0, 1e-9, 9.99e-4]),
)
@settings(max_examples=examples(300))
def test_the_attack_equals_the_brute_force_on_integer_grids(
    case: tuple[list[Float64Array], list[Float64Array], float],
    offset: float,
    unit: float,
    kind: Literal["numeric", "categorical"],
    tie_tol: float,
) -> None:
    # Integer grids: many synthetic records tied nearest, copies, zero distances; an offset
    # and a power-of-two unit that the shared scale must not let change a tie; a tie
    # tolerance of 1/4, with which a d2 of 5 ties with a nearest of 4 exactly on its edge.
    coordinates, secrets, tolerance = case
    arrays = [c * unit + offset for c in coordinates]
    found = InferenceRisk.of_arrays(
        arrays[0], arrays[1], arrays[2], (secrets[0], secrets[1], secrets[2]),
        secret_kind=kind, tolerance=tolerance, tie_tol=tie_tol, threads=1,
    )  # fmt: skip
    used = tolerance if kind == "numeric" else 0.0
    members = brute_shares(arrays[0], arrays[1], secrets[0], secrets[1], used, tie_tol)
    control = brute_shares(arrays[2], arrays[1], secrets[2], secrets[1], used, tie_tol)
    assert found.members_success.tolist() == members
    assert found.control_success.tolist() == control
    assert found.members.successes == math.fsum(members)
    risk, low, high, rate, base = reference_risk(
        (math.fsum(members), len(members)), (math.fsum(control), len(control)), 0.95
    )
    assert (found.members.rate, found.control.rate) == pytest.approx((rate, base), abs=1e-12)
    assert found.risk == pytest.approx(risk, abs=1e-12)
    assert found.risk_interval == pytest.approx((low, high), abs=1e-12)
    assert (found.members.records, found.control.records) == (len(arrays[0]), len(arrays[2]))
    assert found.tolerance == used


@given(case=cases(), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=examples(100))
def test_the_order_of_the_synthetic_records_changes_nothing(
    case: tuple[list[Float64Array], list[Float64Array], float], seed: int
) -> None:
    # anonymeter takes the first of the tied records; sharing the ties makes the result a
    # function of the sets, not of their order.
    coordinates, secrets, tolerance = case
    order = np.random.default_rng(seed).permutation(len(coordinates[1]))

    def attack(synthetic: Float64Array, guesses: Float64Array) -> InferenceRisk:
        return InferenceRisk.of_arrays(
            coordinates[0], synthetic, coordinates[2], (secrets[0], guesses, secrets[2]),
            secret_kind="numeric", tolerance=tolerance, threads=2,
        )  # fmt: skip

    before = attack(coordinates[1], secrets[1])
    after = attack(coordinates[1][order], secrets[1][order])
    assert before.members_success.tolist() == after.members_success.tolist()
    assert before.control_success.tolist() == after.control_success.tolist()
    assert (before.risk, before.risk_interval) == (after.risk, after.risk_interval)


def test_copies_give_the_secrets_away_and_the_control_does_not() -> None:
    rng = np.random.default_rng(5)
    n = 400

    def people(size: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "age": rng.integers(20, 80, size),
                "sex": rng.choice(["f", "m"], size),
                "weight": rng.normal(70.0, 12.0, size),
                "ill": rng.choice(["a", "b", "c"], size),
            }
        )

    originals, holdout = people(n), people(n)
    copies = phr.inference_risk(
        originals, originals, holdout, known=["age", "sex", "weight"], secret="ill"
    )
    assert copies.members.successes == n
    assert copies.risk > 0.5
    assert copies.risk_interval[0] < copies.risk < copies.risk_interval[1]
    fresh = phr.inference_risk(
        originals, people(n), holdout, known=["age", "sex", "weight"], secret="ill"
    )
    assert fresh.risk_interval[0] == 0.0  # a set of the population gives nothing away
    assert fresh.members.successes < 0.5 * n
    numeric = phr.inference_risk(
        originals, originals, holdout, known=["age", "sex", "ill"], secret="weight"
    )
    assert numeric.secret_kind == "numeric"
    assert numeric.tolerance == 0.05
    # Records that share age, sex and illness tie: a copy is one of them, not always theirs.
    assert 0.6 * n < numeric.members.successes < n
    assert numeric.to_dict()["known"] == ["age", "sex", "ill"]
    assert numeric.to_dict()["ncp"] == "all"
    fewer = phr.inference_risk(
        originals, originals, holdout, known=["age", "sex", "ill"], secret="weight", ncp=1
    )
    assert fewer.to_dict()["ncp"] == 1
    unset = phr.inference_risk(
        originals, originals, holdout, known=["age", "sex", "ill"], secret="weight", ncp=None
    )
    assert unset.to_dict() == numeric.to_dict()  # None is the default: every component
    assert fewer.control.successes != numeric.control.successes  # another space
    assert numeric.to_dict()["members"]["records"] == n  # type: ignore[index]


def test_the_space_is_the_known_columns_standardized_ties_unsplit() -> None:
    # Integer columns: records at the same standardized distance in exact arithmetic (as
    # [3, 4, 2] and [3, 2, 2] from [3, 3, 2]) tie, though the projection's roundings can
    # make their float64 distances differ by an ulp; tie_tol keeps them tied.
    rng = np.random.default_rng(9)

    def people(size: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "a": rng.integers(0, 5, size),
                "b": rng.integers(0, 5, size),
                "c": rng.integers(0, 4, size),
                "s": rng.integers(0, 3, size),
            }
        )

    originals, synthetic, holdout = people(300), people(250), people(200)
    found = phr.inference_risk(
        originals, synthetic.lazy(), holdout, known=["a", "b", "c"], secret="s",
        secret_kind="categorical",
    )  # fmt: skip
    known = ["a", "b", "c"]
    x, y, h = (f.select(known).to_numpy() for f in (originals, synthetic, holdout))
    codes = [f["s"].to_numpy().astype(np.float64) for f in (originals, synthetic, holdout)]
    members = exact_integer_shares(x, x, y, codes[0], codes[1])
    assert found.members_success.tolist() == members
    assert found.control_success.tolist() == exact_integer_shares(x, h, y, codes[2], codes[1])
    assert any(0.0 < share < 1.0 for share in members)  # ties between secrets
    assert found.to_dict()["tie_tol"] == 1e-9
    # The literal comparison splits some of those ties: that is why tie_tol is 1e-9.
    literal = phr.inference_risk(
        originals, synthetic, holdout, known=known, secret="s", secret_kind="categorical",
        tie_tol=0.0,
    )  # fmt: skip
    assert literal.members_success.tolist() != members


def test_missing_secrets_match_missing_ones_and_categories_match_across_types() -> None:
    originals = pl.DataFrame({"k": [0.0, 1.0, 2.0], "s": ["a", None, "b"]})
    synthetic = pl.DataFrame({"k": [0.0, 1.0, 2.0], "s": ["a", None, "c"]}).with_columns(
        pl.col("s").cast(pl.Categorical)
    )
    holdout = pl.DataFrame({"k": [0.0, 1.0], "s": [None, "a"]})
    found = phr.inference_risk(originals, synthetic, holdout, known="k", secret="s")
    assert found.secret_kind == "categorical"
    assert found.members_success.tolist() == [1.0, 1.0, 0.0]
    assert found.control_success.tolist() == [0.0, 0.0]
    numbers = phr.inference_risk(
        originals.with_columns(s=pl.Series([1.0, None, 8.0])),
        synthetic.with_columns(s=pl.Series([1, None, 9], dtype=pl.Int32)),
        holdout.with_columns(s=pl.Series([None, 1.0])),
        known="k",
        secret="s",
        tolerance=0.125,
    )
    # 9 is within 0.125 * 8 = 1 of 8: a guess on the tolerance's edge is right.
    assert numbers.members_success.tolist() == [1.0, 1.0, 1.0]
    assert numbers.control_success.tolist() == [0.0, 0.0]


def test_each_set_is_read_once() -> None:
    # The secret and the known columns come from one read: a plan that gives its rows in
    # another order on a second read cannot pair a record with another's secret.
    reads = {"originals": 0, "synthetic": 0, "holdout": 0}
    frames = {
        "originals": pl.DataFrame({"k": [0.0, 1.0, 2.0, 3.0], "s": ["a", "b", "a", "b"]}),
        "synthetic": pl.DataFrame({"k": [0.0, 1.0, 2.0], "s": ["a", "b", "b"]}),
        "holdout": pl.DataFrame({"k": [0.5, 2.5], "s": ["a", "a"]}),
    }

    def reader(role: str) -> pl.LazyFrame:
        def read() -> pl.DataFrame:
            reads[role] += 1
            return frames[role].sample(fraction=1.0, shuffle=True, seed=reads[role])

        return pl.defer(read, schema=frames[role].schema)

    phr.inference_risk(
        reader("originals"), reader("synthetic"), reader("holdout"), known="k", secret="s"
    )
    assert reads == {"originals": 1, "synthetic": 1, "holdout": 1}


def test_bad_requests_are_refused_before_anything_is_read() -> None:
    def never() -> pl.DataFrame:
        raise AssertionError("read")

    schema = {"k": pl.Float64, "j": pl.Float64, "s": pl.String}
    unread = pl.defer(never, schema=schema)
    cases: list[tuple[dict[str, object], type[Exception], str]] = [
        (
            {"known": "z", "secret": "s"},
            ColumnNotFoundError,
            "known column 'z' not found in originals",
        ),
        ({"known": "k", "secret": "t"}, ColumnNotFoundError, "secret 't' not found in originals"),
        ({"known": ["k", "s"], "secret": "s"}, ValueError, "secret 's' is among the known"),
        ({"known": [], "secret": "s"}, ColumnNotFoundError, "`known` selects no column"),
        ({"known": ["k", "k"], "secret": "s"}, DuplicateError, "names a column twice"),
        ({"known": cs.all(), "secret": "s"}, ValueError, "secret 's' is among the known"),
        ({"known": "k", "secret": "s", "coords": ["k"]}, ValueError, "takes no `coords`"),
        ({"known": "k", "secret": "s", "features": ["k"]}, ValueError, "takes no `features`"),
        ({"known": "k", "secret": "s", "on": "j"}, ValueError, "takes no `on`: the attack"),
        ({"known": "k", "secret": "s", "tie_tol": -1.0}, ValueError, "`tie_tol` must"),
        ({"known": "k", "secret": "s", "secret_kind": "numeric"}, SchemaError, "needs numbers"),
        ({"known": "k", "secret": "s", "secret_kind": "x"}, ValueError, "`secret_kind` must"),
    ]
    for options, error, message in cases:
        with pytest.raises(error, match=message):
            phr.inference_risk(unread, unread, unread, **options)  # type: ignore[arg-type]
    other = pl.defer(never, schema={**schema, "s": pl.Int64})
    with pytest.raises(SchemaError, match="holdout column 's' is Int64"):
        phr.inference_risk(unread, unread, other, known="k", secret="s")
    with pytest.raises(
        SchemaError, match="secret 's' is String in originals but Int64 in synthetic"
    ):
        phr.inference_risk(unread, other, unread, known="k", secret="s")


def test_bad_values_are_refused() -> None:
    frame = pl.DataFrame({"k": [0.0, 1.0], "s": ["1,5", "2,25"]})
    with pytest.raises(ComputeError, match="secret 's' of originals is text but every value"):
        phr.inference_risk(frame, frame, frame, known="k", secret="s")
    as_text = phr.inference_risk(frame, frame, frame, known="k", secret="s",
                                 secret_kind="categorical")  # fmt: skip
    assert as_text.members.successes == 2.0
    numbers = pl.DataFrame({"k": [0.0, 1.0], "s": [1.0, 2.0]})
    for tolerance in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="`tolerance` must be a finite number"):
            phr.inference_risk(numbers, numbers, numbers, known="k", secret="s",
                               tolerance=tolerance)  # fmt: skip
    with pytest.raises(ValueError, match="`confidence` must lie strictly between 0 and 1"):
        phr.inference_risk(numbers, numbers, numbers, known="k", secret="s", confidence=1.0)
    with pytest.raises(NoDataError, match="synthetic: no record"):
        phr.inference_risk(numbers, numbers.head(0), numbers, known="k", secret="s")
    huge = pl.DataFrame({"k": [0.0, 1.0], "s": [2**60, 1]})
    with pytest.raises(ComputeError, match="secret 's' of originals has 1 integer value"):
        phr.inference_risk(huge, huge, huge, known="k", secret="s")


def test_the_report_shows_the_attack_of_the_function() -> None:
    originals, avatars, holdout = release_with_holdout(integer_ages=True)
    options: phr.CountOptions = {"categorical": ["smoker"], "ncp": 3}
    report = phr.privacy_report(
        originals, avatars, holdout=holdout, known=["age", "smoker"], secret="bmi", **options
    )
    expected = phr.inference_risk(
        originals, avatars, holdout, known=["age", "smoker"], secret="bmi",
        categorical=["smoker"],
    )  # fmt: skip
    assert report.holdout is not None
    assert report.to_dict()["holdout"]["inference"] == expected.to_dict()
    assert report.holdout.inference is not None
    assert report.holdout.inference.members_success.tolist() == expected.members_success.tolist()
    labels = [label for label, _ in report.holdout.rows()]
    assert "inference risk on 'bmi'" in labels
    assert "inference risk on &#x27;bmi&#x27;" in report.to_html()
    plain = phr.privacy_report(
        originals, avatars, holdout=holdout, known=["age", "smoker"], **options
    )
    assert plain.to_dict()["holdout"]["inference"] is None
    assert plain.passed == report.passed  # the attack has no target
    assert report.to_dict()["correlation_protection_rate"]["value"] is not None


def test_the_report_refuses_an_attack_it_cannot_run() -> None:
    originals, avatars, holdout = release_with_holdout(integer_ages=True)
    with pytest.raises(ValueError, match="needs a holdout"):
        phr.privacy_report(originals, avatars, known="age", secret="bmi", ncp=3)
    with pytest.raises(ValueError, match="needs the `known` columns too"):
        phr.privacy_report(originals, avatars, holdout=holdout, secret="bmi", ncp=3)
    with pytest.raises(ColumnNotFoundError, match="known column 'weight' not found in originals"):
        phr.privacy_report(originals, avatars, holdout=holdout, known="weight", secret="bmi", ncp=3)


def test_the_attack_through_the_script(tmp_path: Path) -> None:
    originals, avatars, holdout = release_with_holdout(seed=1, integer_ages=True)
    paths = {}
    for name, frame in (("originals", originals), ("avatars", avatars), ("holdout", holdout)):
        paths[name] = tmp_path / f"{name}.csv"
        frame.write_csv(paths[name])
    script = Path(sys.executable).parent / "hidden-rate"
    if not script.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    common = [str(script), "report", str(paths["originals"]), str(paths["avatars"]), "--ncp", "3"]
    attack = ["--holdout", str(paths["holdout"]), "--known", "age,bmi", "--secret", "smoker"]
    done = subprocess.run(
        [*common, *attack, "--format", "json"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr  # some target misses
    data = json.loads(done.stdout)
    expected = phr.inference_risk(
        originals, avatars, holdout, known=["age", "bmi"], secret="smoker"
    )
    assert data["holdout"]["inference"] == expected.to_dict()
    assert data["provenance"]["settings"]["inference"] == {
        "known": ["age", "bmi"],
        "secret": "smoker",
        "secret_kind": "auto",
        "tolerance": 0.05,
        "space": "projected",
    }
    text = subprocess.run([*common, *attack], capture_output=True, text=True, check=False)
    assert "inference risk on 'smoker'" in text.stdout
    for extra, message in (
        (["--known", "age", "--secret", "smoker"], "needs a holdout"),
        (
            [*attack[:2], "--known", "age", "--secret", "nope"],
            "secret 'nope' not found in originals",
        ),
        ([*attack, "--secret-tolerance", "-1"], "`tolerance` must be a finite number"),
    ):
        refused = subprocess.run([*common, *extra], capture_output=True, text=True, check=False)
        assert refused.returncode == 2, refused.stderr
        assert message in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1


def test_the_report_on_a_cluster_gives_the_local_holdout_figures() -> None:
    from tests.helpers import local_cluster

    originals, avatars, holdout = release_with_holdout(seed=2, integer_ages=True)
    options: dict[str, object] = {
        "holdout": holdout,
        "known": ["age", "smoker"],
        "secret": "bmi",
        "categorical": ["smoker"],
        "ncp": 3,
    }
    local = phr.privacy_report(originals, avatars, **options)  # type: ignore[arg-type]
    with local_cluster(processes=False) as client:
        shared = phr.privacy_report(originals, avatars, cluster=client, **options)  # type: ignore[arg-type]
    assert shared.to_dict()["holdout"] == local.to_dict()["holdout"]
    assert shared.to_dict()["holdout"]["inference"] is not None


def test_the_report_attacks_the_known_columns_as_its_projection_takes_them() -> None:
    # An integer column the report's FAMD takes as categorical ("auto": few distinct values)
    # is categorical in the attack too, and the report's imputation fills the attack's gaps.
    rng = np.random.default_rng(4)

    def people(size: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "age": rng.normal(50, 10, size),
                "grp": rng.integers(0, 4, size),
                "bmi": rng.normal(25, 4, size),
                "ill": rng.choice(["y", "n"], size),
            }
        ).with_columns(
            pl.when(pl.int_range(pl.len()) % 17 == 0).then(None).otherwise("age").alias("age")
        )

    originals, holdout = people(400), people(200)
    avatars = people(400)
    report = phr.privacy_report(
        originals, avatars, holdout=holdout, known=["age", "grp"], secret="ill",
        categorical="auto", impute="median", ncp=3, allow_unlinked=True,
    )  # fmt: skip
    expected = phr.inference_risk(
        originals, avatars, holdout, known=["age", "grp"], secret="ill", categorical=["grp"],
        impute="median",
    )  # fmt: skip
    as_numbers = phr.inference_risk(
        originals, avatars, holdout, known=["age", "grp"], secret="ill", impute="median"
    )
    assert report.holdout is not None
    assert report.holdout.inference is not None
    assert report.holdout.inference.to_dict() == expected.to_dict()
    assert expected.categorical == ("grp",)
    assert as_numbers.to_dict() != expected.to_dict()


def test_the_report_refuses_attack_settings_without_an_attack() -> None:
    originals, avatars, holdout = release_with_holdout(integer_ages=True)
    for settings_ in ({"secret_kind": "numeric"}, {"secret_tolerance": 0.1}):
        with pytest.raises(ValueError, match="give its `secret`"):
            phr.privacy_report(originals, avatars, holdout=holdout, ncp=3, **settings_)
    frame = pl.DataFrame({"k": [0.0, 1.0, 2.0], "s": ["a", "b", "c"]})
    with pytest.raises(ValueError, match="no residual risk can be measured"):
        phr.inference_risk(frame, frame, frame, known="k", secret="s", confidence=1e-17)


def coded_secret(seed: int = 3) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Sets whose secret is a code of 20 values, 100 to 119, unrelated to the known ``k``:
    within 5 % of a code lie about half the others, so judged as a number a random guess is
    right half the time, and by equality one time in 20."""
    rng = np.random.default_rng(seed)

    def people(size: int) -> pl.DataFrame:
        return pl.DataFrame({"k": rng.normal(0, 1, size), "code": rng.integers(100, 120, size)})

    return people(600), people(600), people(600)


def test_a_secret_declared_categorical_is_judged_by_equality() -> None:
    originals, synthetic, holdout = coded_secret()
    as_number = phr.inference_risk(originals, synthetic, holdout, known="k", secret="code")
    assert as_number.secret_kind == "numeric"
    assert as_number.control.successes / 600 > 0.3  # within 5 % of 100 to 119: 94 to 125
    expected = phr.inference_risk(
        originals, synthetic, holdout, known="k", secret="code", secret_kind="categorical"
    )
    assert expected.secret_kind == "categorical"
    assert expected.control.successes / 600 < 0.1
    for categorical in (["code"], "code"):
        named = phr.inference_risk(
            originals, synthetic, holdout, known="k", secret="code", categorical=categorical
        )
        assert named.secret_kind == "categorical"
        assert named.control_success.tolist() == expected.control_success.tolist()
        assert named.categorical == ()
    # k itself taken as categorical: its continuous values in the other sets are none of the
    # originals' categories, refused as the avatars' would be.
    with pytest.raises(pl.exceptions.ComputeError, match=r"'k' holds .*: 600 of 600 synthetic"):
        phr.inference_risk(
            originals, synthetic, holdout, known="k", secret="code", categorical=["k", "code"]
        )
    # "auto" takes a number with at most 10 distinct values as categorical: the secret too.
    few = [
        frame.with_columns(code=pl.col("code") % 10) for frame in (originals, synthetic, holdout)
    ]
    auto = phr.inference_risk(*few, known="k", secret="code", categorical="auto")
    assert auto.secret_kind == "categorical"
    assert (
        auto.to_dict()
        == phr.inference_risk(*few, known="k", secret="code", secret_kind="categorical").to_dict()
    )
    many = phr.inference_risk(
        originals, synthetic, holdout, known="k", secret="code", categorical="auto"
    )
    assert many.secret_kind == "numeric"  # 20 values: a number under "auto"
    asked = phr.inference_risk(
        *few, known="k", secret="code", categorical="auto", secret_kind="numeric"
    )
    assert asked.secret_kind == "numeric"  # a kind asked for is taken as asked


@pytest.mark.parametrize("values", [["1.5", "3", "2"], ["3", "7"], ["1,5", "2,25"], ["nan", "4e3"]])
def test_a_text_secret_of_numbers_is_refused_naming_the_fixes(values: list[str]) -> None:
    frame = pl.DataFrame({"k": [float(i) for i in range(len(values))], "s": values})
    with pytest.raises(ComputeError, match="secret 's' of originals is text but every value") as e:
        phr.inference_risk(frame, frame, frame, known="k", secret="s")
    assert "pl.col('s').cast(pl.Float64)" in str(e.value)
    assert "secret_kind='categorical'" in str(e.value)
    as_text = phr.inference_risk(frame, frame, frame, known="k", secret="s",
                                 secret_kind="categorical")  # fmt: skip
    assert as_text.members.successes == len(values)
    named = phr.inference_risk(frame, frame, frame, known="k", secret="s", categorical="s")
    assert named.secret_kind == "categorical"
    mixed = frame.with_columns(s=pl.Series([*values[:-1], "x"]))
    assert phr.inference_risk(mixed, mixed, mixed, known="k", secret="s").secret_kind == (
        "categorical"
    )


@pytest.mark.parametrize("space", ["projected", "gower"])
def test_progress_counts_the_walks_without_changing_the_risk(
    capsys: pytest.CaptureFixture[str], space: Literal["projected", "gower"]
) -> None:
    rng = np.random.default_rng(5)
    originals, synthetic, holdout = (
        pl.DataFrame(
            {
                "age": rng.integers(20, 60, n).astype(float),
                "sex": rng.choice(["F", "M"], n),
                "ill": rng.choice(["y", "n"], n),
            }
        )
        for n in (80, 70, 60)
    )
    asked = {"known": ["age", "sex"], "secret": "ill", "space": space}
    quiet = phr.inference_risk(originals, synthetic, holdout, **asked)  # type: ignore[arg-type]
    capsys.readouterr()
    shown = phr.inference_risk(originals, synthetic, holdout, progress=True, **asked)  # type: ignore[arg-type]
    assert shown.to_dict() == quiet.to_dict()
    # progress=True off a terminal: the targets' walks as a stage counted in units.
    err = capsys.readouterr().err
    assert "hidden-rate: inference attack, nearest records: started\n" in err
    assert "hidden-rate: inference attack, nearest records: done in " in err


@pytest.mark.parametrize("kind", ["numeric", "categorical"])
def test_records_tied_by_the_hundred_are_searched_as_groups_with_the_same_shares(
    kind: Literal["numeric", "categorical"],
) -> None:
    # Two columns of three values each: every target ties with about a ninth of the
    # synthetic records, which are searched as groups of copies (one per point and secret).
    rng = np.random.default_rng(11)
    arrays = [rng.integers(0, 3, (n, 2)).astype(np.float64) for n in (400, 900, 300)]
    secrets = [rng.choice([1.0, 2.0, 2.5, math.nan], len(a)) for a in arrays]
    found = InferenceRisk.of_arrays(
        arrays[0], arrays[1], arrays[2], (secrets[0], secrets[1], secrets[2]),
        secret_kind=kind, tolerance=0.25, tie_tol=1e-9, threads=2,
    )  # fmt: skip
    used = 0.25 if kind == "numeric" else 0.0
    assert found.members_success.tolist() == brute_shares(
        arrays[0], arrays[1], secrets[0], secrets[1], used, 1e-9
    )
    assert found.control_success.tolist() == brute_shares(
        arrays[2], arrays[1], secrets[2], secrets[1], used, 1e-9
    )
