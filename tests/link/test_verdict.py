"""The verdict beside the counts: the link test, own copies, ties-only records, a row-order
link beside a key, and the provenance every output states (issue 19)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polars_hidden_rate as phr
from polars_hidden_rate import engine
from polars_hidden_rate.avatarize import avatarize
from polars_hidden_rate.demo.cohort import cohort
from polars_hidden_rate.gate import OwnCopiesError, cloaking_summary
from polars_hidden_rate.link.errors import AmbiguousLinkError, UnlinkedAvatarsError
from polars_hidden_rate.link.link_test import ALPHA, MIN_RECORDS, SAMPLE, derangement, link_test
from polars_hidden_rate.plan import plan
from polars_hidden_rate.provenance import describe_settings, with_fit
from tests.helpers import brute_force_counts, examples, hidden_share, noisy_linked, run_script

SHARED = Path(__file__).resolve().parents[3] / "shared" / "datasets"
AIDS_CATEGORICAL = [
    "hemo",
    "homo",
    "drugs",
    "karnof",
    "oprior",
    "z30",
    "zprior",
    "race",
    "gender",
    "str2",
    "strat",
    "symptom",
    "treat",
    "offtrt",
    "r",
    "cens",
    "arms",
]
COORDS = ["Dim1", "Dim2", "Dim3"]


def brute_closer(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether some rival j != i is strictly closer to x_i than y_i, in float64."""
    d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(axis=2)
    own = np.diag(d2).copy()
    np.fill_diagonal(d2, np.inf)
    closer: np.ndarray = (d2 < own[:, None]).any(axis=1)
    return closer


@settings(max_examples=examples(200), deadline=None)
@given(
    st.integers(2, 40),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
    st.sampled_from([1.0, 2.0**600, 2.0**-600, 1e12]),
)
def test_closer_rivals_equals_a_brute_force_on_grids(
    n: int, d: int, seed: int, scale: float
) -> None:
    # Integer grids: many exact ties and zero distances; large offsets and power-of-two scales.
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, (n, d)).astype(float)
    y = x + rng.integers(-1, 2, (n, d))
    found = engine.closer_rivals(x * scale, y * scale)
    assert found.tolist() == brute_closer(x, y).tolist()
    rows = np.flatnonzero(rng.random(n) < 0.5)
    assert engine.closer_rivals(x, y, rows).tolist() == brute_closer(x, y)[rows].tolist()
    offset = engine.closer_rivals(x + 1e6, y + 1e6)
    assert offset.tolist() == brute_closer(x + 1e6, y + 1e6).tolist()


@settings(max_examples=examples(300), deadline=None)
@given(
    st.integers(2, 120),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
    st.sampled_from(["tree", "flat", "auto"]),
    st.sampled_from([None, 1, 2, 64]),
    st.sampled_from([1.0, 2.0**600, 2.0**-600]),
)
def test_the_counting_walk_flags_strictly_closer_rivals(
    n: int, d: int, seed: int, strategy: str, cap: int | None, scale: float
) -> None:
    # The flags the counting walk sets (tree) or its capped walk after a flat pass: exact on
    # every hidden record, on grids full of ties and copies, capped or not.
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, (n, d)).astype(float)
    y = x + rng.integers(-1, 2, (n, d)) * (rng.random((n, 1)) < 0.6)
    result = engine.cloaking_result(
        x * scale,
        y * scale,
        strategy=strategy,  # type: ignore[arg-type]
        cap=cap,
        closer=True,
    )
    counts, closer = result.counts, result.closer
    assert closer is not None
    expected = brute_force_counts(x, y, 1e-9)
    assert counts.tolist() == (expected if cap is None else np.minimum(expected, cap)).tolist()
    hidden = expected > 0
    assert closer[hidden].tolist() == brute_closer(x, y)[hidden].tolist()


def test_derangement_moves_every_record() -> None:
    for n in (2, 3, 50, 1001):
        partner = derangement(n)
        assert sorted(partner.tolist()) == list(range(n))
        assert (partner != np.arange(n)).all()


def test_the_rank_statistic_under_a_random_link() -> None:
    # Shuffled links many times over: a p-value below 1e-2 comes about as often as it should
    # (4 expected of 400; the normal tail holds at n = 50), and none passes for linked at
    # ALPHA (0.4 expected). The counts are pinned for these seeds: the level, the ties and
    # the variance of the statistic each move them (tests/link/test_link_test.py pins the
    # statistic itself against an exact reference).
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 2))
    tests = [
        link_test(x, rng.permutation(x + rng.normal(scale=0.1, size=x.shape))) for _ in range(400)
    ]
    p_values = [test.p_value for test in tests]
    assert sum(p < 1e-2 for p in p_values) == 3
    assert sum(p < 0.5 for p in p_values) == 202
    assert sum(test.linked for test in tests) == 0
    assert sorted(p_values)[:3] == pytest.approx(
        [0.005022214712804063, 0.00797671385009957, 0.009256195044654802], rel=1e-9
    )


def test_large_data_is_tested_on_a_seeded_sample() -> None:
    x, y = (frame.to_numpy() for frame in noisy_linked(SAMPLE + 5000, seed=13))
    test = link_test(x, y)
    assert (test.n, test.population) == (SAMPLE, SAMPLE + 5000)
    assert test == link_test(x, y)
    assert not link_test(x, np.random.default_rng(1).permutation(y)).linked


def test_a_shuffled_link_is_refused_and_a_real_one_is_not() -> None:
    originals, avatars = noisy_linked(800)
    summary = cloaking_summary(originals, avatars, coords=COORDS)
    assert summary.evidence is not None
    assert summary.evidence.link.linked
    shuffled = avatars.sample(fraction=1.0, shuffle=True, seed=3)
    with pytest.raises(UnlinkedAvatarsError, match=r"closer than a random one for \d+\.\d %"):
        cloaking_summary(originals, shuffled, coords=COORDS)
    with pytest.raises(UnlinkedAvatarsError):
        phr.assert_hidden_rate(originals, shuffled, 10, coords=COORDS)
    # The report judges it on the measures that need no link (a synthetic set's own).
    report = phr.privacy_report(originals, shuffled, coords=COORDS)
    assert report.link_use == "absent"
    assert "hidden_rate" not in report.verdicts
    # allow_unlinked measures it anyway; measuring functions never judge.
    unlinked = cloaking_summary(originals, shuffled, coords=COORDS, allow_unlinked=True)
    assert unlinked.hidden_rate == phr.hidden_rate(originals, shuffled, coords=COORDS)
    assert unlinked.hidden_rate > 99  # the mark of a random link


def test_a_wrong_key_is_refused() -> None:
    originals, avatars = noisy_linked(300, seed=1)
    originals = originals.with_columns(id=pl.int_range(300))
    avatars = avatars.with_columns(id=pl.int_range(300).shuffle(seed=2))
    with pytest.raises(UnlinkedAvatarsError, match="by key 'id'"):
        cloaking_summary(originals, avatars, coords=COORDS, on="id")


def test_the_link_test_is_not_run_below_fifty_records() -> None:
    originals, avatars = noisy_linked(MIN_RECORDS - 1)
    shuffled = avatars.reverse()
    summary = cloaking_summary(originals, shuffled, coords=COORDS)
    assert summary.evidence is not None
    assert not summary.evidence.link.tested
    originals, avatars = noisy_linked(MIN_RECORDS)
    with pytest.raises(UnlinkedAvatarsError):
        cloaking_summary(originals, avatars.reverse(), coords=COORDS)


def test_the_link_test_does_not_move_with_scale() -> None:
    x, y = (frame.to_numpy() for frame in noisy_linked(400, seed=4))
    base = link_test(x, y)
    for factor in (2.0**600, 2.0**-600, 2.0**1000):
        assert link_test(x * factor, y * factor) == base


def test_avatarized_cohorts_are_never_refused() -> None:
    # The false-alarm side: the package's own avatarization, small n, large k.
    for n in (50, 60, 120, 400):
        originals = cohort(n, seed=n)
        for k in (2, 5, 20, 50):
            if k >= n:
                continue
            avatars = avatarize(originals, k, ncp=5, seed=k)
            summary = cloaking_summary(originals, avatars, ncp=5, max_own_copies=100)
            assert summary.evidence is not None
            # the weakest, k = 50 of 60 records: p = 3e-5 (docs/guarantees.md)
            assert summary.evidence.link.p_value <= ALPHA / 10, (n, k)


@pytest.mark.parametrize("profile", ["gaussian", "discrete", "isotropic"])
def test_benchmark_profiles_are_never_refused(profile: str) -> None:
    from benchmarks.data import make_case

    for n in (50, 2000):
        x, y = make_case(n, 5, profile=profile, k=20, seed=0, neighbours="tree")  # type: ignore[arg-type]
        test = link_test(x, y)
        assert test.linked
        assert test.closer_share > 89  # where 50 records need 74 %


needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/datasets is absent")


def _aids() -> tuple[pl.DataFrame, pl.DataFrame]:
    originals = pl.read_csv(SHARED / "aids" / "originals.csv", separator=";", null_values="NA")
    avatars = pl.read_csv(SHARED / "aids" / "avatars_k20_ncp5.csv", null_values="")
    return originals, avatars


@needs_shared
def test_the_papers_releases_pass_the_link_test_and_their_shuffles_fail() -> None:
    originals, avatars = _aids()
    features = [c for c in originals.columns if c != "pidnum"]
    options = {"features": features, "categorical": AIDS_CATEGORICAL, "impute": "median"}
    summary = cloaking_summary(originals, avatars, ncp=5, **options)  # type: ignore[arg-type]
    assert summary.hidden_rate == 93.12762973352034
    assert summary.evidence is not None
    assert summary.evidence.link.closer_share > 98
    shuffled = avatars.sample(fraction=1.0, shuffle=True, seed=1)
    with pytest.raises(UnlinkedAvatarsError):
        cloaking_summary(originals, shuffled, ncp=5, **options)  # type: ignore[arg-type]
    wbcd = pl.read_csv(SHARED / "wbcd" / "originals.csv")
    wbcd_avatars = pl.read_csv(SHARED / "wbcd" / "avatars_k20.csv")
    found = cloaking_summary(wbcd, wbcd_avatars, features=wbcd_avatars.columns, ncp=2)
    assert found.evidence is not None
    assert found.evidence.link.linked
    # The published WBCD release: 281 of 683 avatars copy their own original.
    assert found.evidence.own_copies == 281
    assert not found.passed
    assert found.failures == ["own copies 41.14 % > 10 % (--max-own-copies)"]
    # Copies are hidden by the other copies of the same values: by ties only.
    ties_only = found.evidence.hidden_by_ties_only
    assert ties_only is not None
    assert 0 < ties_only <= found.evidence.own_copies
    with pytest.raises(OwnCopiesError, match="281 of 683 avatars"):
        phr.assert_hidden_rate(wbcd, wbcd_avatars, 90, features=wbcd_avatars.columns, ncp=2)
    rate = phr.assert_hidden_rate(
        wbcd, wbcd_avatars, 90, features=wbcd_avatars.columns, ncp=2, max_own_copies=100
    )
    assert rate == found.hidden_rate


def test_own_copies_and_ties_only_against_a_brute_force() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (300, 3)).astype(float)
    y = x + rng.integers(-1, 2, x.shape) * (rng.random((300, 1)) < 0.7)
    originals, avatars = pl.DataFrame(x, schema=COORDS), pl.DataFrame(y, schema=COORDS)
    summary = cloaking_summary(originals, avatars, coords=COORDS, max_own_copies=100)
    assert summary.evidence is not None
    copies = int((x == y).all(axis=1).sum())
    assert summary.evidence.own_copies == copies
    assert summary.evidence.own_copies_percent == 100 * copies / 300
    counts = phr.local_cloaking(originals, avatars, coords=COORDS)["local_cloaking"].to_numpy()
    expected = int(((counts > 0) & ~brute_closer(x, y)).sum())
    assert summary.evidence.hidden_by_ties_only == expected
    assert expected > 0
    # Own copies gate: just above, just at the limit.
    limit = 100 * copies / 300
    assert cloaking_summary(originals, avatars, coords=COORDS, max_own_copies=limit).passed
    below = cloaking_summary(originals, avatars, coords=COORDS, max_own_copies=limit - 0.01)
    assert not below.passed


def test_own_copies_follow_the_key_and_match_missing_values() -> None:
    originals = pl.DataFrame(
        {"id": range(60), "a": [float(i) for i in range(60)], "b": ["x", None] * 30}
    )
    avatars = originals.with_columns(a=pl.col("a") + 0.25 * (pl.col("id") % 3 != 0))
    shuffled = avatars.sample(fraction=1.0, shuffle=True, seed=1).with_columns(
        a=pl.when(pl.col("id") == 0).then(-0.0).otherwise(pl.col("a"))
    )
    summary = cloaking_summary(
        originals,
        shuffled,
        features=["a", "b"],
        impute="mode",
        on="id",
        max_own_copies=100,
        allow_unlinked=True,
    )
    assert summary.evidence is not None
    assert summary.evidence.own_copies == 20  # ids 0, 3, 6, ...: -0.0 matches 0.0, null null


def test_row_order_beside_a_key_is_refused() -> None:
    originals, avatars = noisy_linked(100, seed=6)
    originals = originals.with_columns(pidnum=pl.int_range(100) + 10_000)
    avatars = avatars.with_columns(pidnum=pl.int_range(100) + 10_000)
    with pytest.raises(AmbiguousLinkError, match="both frames hold 'pidnum', unique per row"):
        cloaking_summary(originals, avatars, coords=COORDS)
    by_row = cloaking_summary(originals, avatars, coords=COORDS, by_row_order=True)
    by_key = cloaking_summary(originals, avatars, coords=COORDS, on="pidnum")
    assert by_row.hidden_rate == by_key.hidden_rate
    # Not a key: values shared by no avatar, or repeated.
    other = avatars.with_columns(pidnum=pl.int_range(100) + 20_000)
    cloaking_summary(originals, other, coords=COORDS)
    repeated = avatars.with_columns(pidnum=pl.lit(1))
    cloaking_summary(originals, repeated, coords=COORDS)


def test_verdict_options_are_checked() -> None:
    originals, avatars = noisy_linked(60)
    with pytest.raises(TypeError, match="allow_unlinked"):
        cloaking_summary(originals, avatars, coords=COORDS, allow_unlinked=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_own_copies"):
        cloaking_summary(originals, avatars, coords=COORDS, max_own_copies=101)


def test_the_script_refuses_a_shuffled_release_and_states_what_it_measured(
    tmp_path: Path,
) -> None:
    originals, avatars = noisy_linked(500, seed=8)
    o, a, s = tmp_path / "o.csv", tmp_path / "a.csv", tmp_path / "s.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    avatars.sample(fraction=1.0, shuffle=True, seed=2).write_csv(s)
    done = run_script("check", str(o), str(s), "--coords", ",".join(COORDS), "--min-rate", "90")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "do not look linked" in done.stderr
    # No key in the files: the way out is the report (with a holdout), never --on.
    assert "--on" not in done.stderr
    assert "hidden-rate report" in done.stderr
    assert "--holdout" in done.stderr
    allowed = run_script("check", str(o), str(s), "--coords", ",".join(COORDS), "--allow-unlinked")
    assert allowed.returncode == 1, allowed.stderr  # measured, never passed
    assert "the link test refuses the link" in allowed.stdout
    done = run_script("check", str(o), str(a), "--coords", ",".join(COORDS), "--format", "json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["link_test"]["linked"] is True
    assert got["own_copies"] == 0
    assert (
        got["provenance"]["inputs"]["originals"]["sha256"]
        == hashlib.sha256(o.read_bytes()).hexdigest()
    )
    assert got["provenance"]["settings"]["space"] == {"coords": COORDS, "ncp": 3}
    # The strategy that counted, not the option: what "auto" chose.
    engine_settings = got["provenance"]["settings"]["engine"]
    assert engine_settings == {"strategy": "tree", "device": "cpu", "cluster": False}
    report = run_script("report", str(o), str(a), "--coords", ",".join(COORDS), "--format", "json")
    assert json.loads(report.stdout)["provenance"]["settings"]["engine"]["strategy"] == "tree"
    text = run_script("check", str(o), str(a), "--coords", ",".join(COORDS))
    for label in ("own copies", "hidden by ties only", "link test", "sha256", "versions"):
        assert label in text.stdout
    version = run_script("--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"hidden-rate {phr.__version__}"


def test_the_per_record_file_carries_the_provenance(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(200, seed=9)
    o, a, out = tmp_path / "o.parquet", tmp_path / "a.parquet", tmp_path / "out.parquet"
    originals.write_parquet(o)
    avatars.write_parquet(a)
    done = run_script("check", str(o), str(a), "--coords", ",".join(COORDS), "--output", str(out))
    assert done.returncode == 0, done.stderr
    metadata = pl.read_parquet_metadata(out)
    block = json.loads(metadata["polars_hidden_rate"])
    assert block["inputs"]["avatars"]["rows"] == 200
    assert block["settings"]["link"] == {"by": "row order"}
    # The file is described once counted (its footer is written last), as the printed output.
    assert block["settings"]["engine"]["strategy"] == "tree"
    assert block["settings"]["link_test"]["linked"] is True
    assert "own copies            0 (0.00 %)" in done.stdout


def test_the_script_fails_a_release_of_copies(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(200, seed=10)
    copied = pl.concat([originals[:50], avatars[50:]])
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    copied.write_csv(a)
    done = run_script("check", str(o), str(a), "--coords", ",".join(COORDS))
    assert done.returncode == 1
    assert "FAIL" in done.stdout
    assert "own copies 25.00 % > 10 %" in done.stdout
    assert (
        run_script(
            "check", str(o), str(a), "--coords", ",".join(COORDS), "--max-own-copies", "100"
        ).returncode
        == 0
    )


def coded(n: int = 300, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Numbers, an integer code with 3 values, text categories; avatars close to them."""
    rng = np.random.default_rng(seed)
    age = rng.normal(50, 10, n)
    stage = rng.integers(0, 3, n)
    sex = rng.choice(["F", "M"], n)
    originals = pl.DataFrame({"age": age, "stage": stage, "sex": sex})
    avatars = pl.DataFrame(
        {
            "age": age + rng.normal(0, 2, n),
            "stage": np.where(rng.random(n) < 0.2, rng.integers(0, 3, n), stage),
            "sex": np.where(rng.random(n) < 0.1, "F", sex),
        }
    )
    return originals, avatars


def test_categorical_auto_takes_integer_codes_with_few_values() -> None:
    originals, avatars = coded()
    auto = phr.hidden_rate(originals, avatars, categorical="auto", ncp=3)
    named = phr.hidden_rate(originals, avatars, categorical=["stage"], ncp=3)
    assert auto == named

    def categorical(**options: Any) -> list[str]:
        request = with_fit(plan(originals, avatars, options))  # type: ignore[arg-type]
        return describe_settings(request)["space"]["categorical"]  # type: ignore[no-any-return]

    assert categorical(categorical="auto", ncp=3) == ["stage", "sex"]
    assert categorical(ncp=3) == ["sex"]  # stage is read as a number otherwise
    many = originals.with_columns(stage=pl.int_range(300) % 11)
    many_avatars = avatars.with_columns(stage=pl.int_range(300) % 11)
    assert phr.hidden_rate(many, many_avatars, categorical="auto", ncp=3) == phr.hidden_rate(
        many, many_avatars, ncp=3
    )


@needs_shared
def test_categorical_auto_on_the_aids_release() -> None:
    originals, avatars = _aids()
    rate = phr.hidden_rate(originals, avatars, categorical="auto", impute="median", ncp=5)
    assert rate == 93.12762973352034
    done = run_script(
        "check",
        str(SHARED / "aids" / "originals.csv"),
        str(SHARED / "aids" / "avatars_k20_ncp5.csv"),
        "--categorical",
        "auto",
        "--impute",
        "median",
        "--ncp",
        "5",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["hidden_rate"] == 93.12762973352034
    space = got["provenance"]["settings"]["space"]
    assert space["categorical"] == AIDS_CATEGORICAL
    assert space["categorical_rule"].startswith("auto")


@pytest.mark.parametrize("name", ["Unnamed: 0", "index", ""])
def test_an_index_column_is_never_projected(name: str) -> None:
    originals, avatars = coded(60)
    originals = originals.with_columns(pl.int_range(60).alias(name))
    avatars = avatars.with_columns(pl.int_range(60).alias(name))
    with pytest.raises(pl.exceptions.ComputeError, match="named like an index"):
        phr.hidden_rate(originals, avatars, ncp=3)
    features = ["age", "stage", "sex", name]
    named = phr.hidden_rate(originals, avatars, ncp=3, features=features)
    # The rate of the brute force on the projection's own coordinates: the index is projected.
    projection = phr.Projection.fit(originals.select(features), ncp=3)
    assert name in projection.scaling.column_names
    x, y = (
        projection.transform(frame.select(features)).select(projection.coordinate_columns())
        for frame in (originals, avatars)
    )
    assert named == hidden_share(brute_force_counts(x.to_numpy(), y.to_numpy(), 1e-9))


@pytest.mark.parametrize("as_text", [False, True])
def test_an_identifier_is_never_projected_by_default(as_text: bool) -> None:
    originals, avatars = coded(80)
    ids = pl.int_range(80) + 10_000
    originals = originals.with_columns(pidnum=ids.cast(pl.String) if as_text else ids)
    avatars = avatars.with_columns(pidnum=ids.cast(pl.String) if as_text else ids)
    with pytest.raises(pl.exceptions.ComputeError, match="'pidnum' is unique per row"):
        phr.hidden_rate(originals, avatars, ncp=3)
    linked_rate = phr.hidden_rate(originals, avatars, ncp=3, on="pidnum")
    assert linked_rate == phr.hidden_rate(originals.drop("pidnum"), avatars.drop("pidnum"), ncp=3)
    # Fewer than 50 records: distinct integers say little, and are projected.
    phr.hidden_rate(originals.head(49), avatars.head(49), ncp=3)


def test_recoded_categories_are_refused_and_fewer_unseen_counted() -> None:
    originals, avatars = coded()
    recoded = avatars.with_columns(pl.col("sex").str.to_lowercase())
    with pytest.raises(pl.exceptions.ComputeError, match=r"avatars' 'sex' holds 'f', 'm'"):
        phr.hidden_rate(originals, recoded, ncp=3)
    some = avatars.with_columns(
        sex=pl.when(pl.int_range(300) < 30).then(pl.lit("x")).otherwise(pl.col("sex"))
    )
    summary = cloaking_summary(originals, some, ncp=3)
    assert summary.evidence is not None
    assert summary.evidence.unseen_modalities == {"sex": 30}
    half = avatars.with_columns(
        sex=pl.when(pl.int_range(300) < 150).then(pl.lit("x")).otherwise(pl.col("sex"))
    )
    cloaking_summary(originals, half, ncp=3)  # exactly half: counted, not refused
    more = avatars.with_columns(
        sex=pl.when(pl.int_range(300) < 151).then(pl.lit("x")).otherwise(pl.col("sex"))
    )
    with pytest.raises(pl.exceptions.ComputeError, match="151 of 300 avatar values"):
        cloaking_summary(originals, more, ncp=3)


def test_the_report_states_its_evidence_and_inputs(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(300, seed=12)
    o, a, page = tmp_path / "o.csv", tmp_path / "a.csv", tmp_path / "r.html"
    originals.write_csv(o)
    avatars.write_csv(a)
    args = ["report", str(o), str(a), "--coords", ",".join(COORDS)]
    done = run_script(*args, "--html", str(page), "--title", "Trial <7>")
    assert done.returncode == 1, done.stderr  # some target misses
    text = page.read_text("utf-8")
    assert "<title>Trial &lt;7&gt;</title>" in text
    assert hashlib.sha256(o.read_bytes()).hexdigest() in text
    assert "What was measured" in text
    assert "Link test" in text
    assert "sha256" in done.stdout
    assert "link test" in done.stdout
    shuffled = tmp_path / "s.csv"
    avatars.sample(fraction=1.0, shuffle=True, seed=4).write_csv(shuffled)
    # Not refused: judged on the measures that need no link, the link's figures n/a.
    judged = run_script("report", str(o), str(shuffled), "--coords", ",".join(COORDS))
    assert judged.returncode in (0, 1), judged.stderr
    assert "n/a: no one-avatar-per-original link" in judged.stdout
    assert "the link test refuses" in judged.stderr.lower()


def test_a_previous_output_can_be_checked_again(tmp_path: Path) -> None:
    # Issue 20 item 13: the per-record file of one check is the originals of the next one.
    originals, avatars = noisy_linked(200, seed=14)
    o, a, out = tmp_path / "o.parquet", tmp_path / "a.parquet", tmp_path / "out.parquet"
    originals.write_parquet(o)
    avatars.write_parquet(a)
    coords = ",".join(COORDS)
    first = run_script(
        "check", str(o), str(a), "--coords", coords, "--format", "json", "--output", str(out)
    )
    assert first.returncode == 0, first.stderr
    again = run_script("check", str(out), str(a), "--coords", coords, "--format", "json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["hidden_rate"] == json.loads(first.stdout)["hidden_rate"]
    summary = cloaking_summary(pl.read_parquet(out), avatars, coords=COORDS)
    assert summary.hidden_rate == json.loads(first.stdout)["hidden_rate"]


def test_own_copies_are_a_share_of_every_record_when_the_link_test_samples(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from polars_hidden_rate.link import link_test as linkage

    monkeypatch.setattr(linkage, "SAMPLE", 100)
    originals, avatars = noisy_linked(400, seed=15)
    avatars = pl.concat([originals[:40], avatars[40:]])
    summary = cloaking_summary(originals, avatars, coords=COORDS, max_own_copies=100)
    assert summary.evidence is not None
    assert (summary.evidence.link.n, summary.evidence.n) == (100, 400)
    assert summary.evidence.own_copies_percent == 10.0


@pytest.mark.parametrize("strategy", ["tree", "flat", "auto"])
def test_the_engine_says_which_strategy_counted(strategy: str) -> None:
    rng = np.random.default_rng(4)
    originals = rng.integers(-2, 3, (300, 3)).astype(float)
    avatars = originals + rng.integers(-1, 2, originals.shape)
    result = engine.cloaking_result(originals, avatars, strategy=strategy)  # type: ignore[arg-type]
    np.testing.assert_array_equal(result.counts, brute_force_counts(originals, avatars, 1e-9))
    assert result.strategy == ("tree" if strategy == "auto" else strategy)  # small: no probe
