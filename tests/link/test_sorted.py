"""The sorted-link rule against a genuine release sorted on a category its avatars keep, the two
link overrides apart, one rule for a link the link test refuses in every entry point, what the
outputs say of the rule, and the link test's and the rule's own figures pinned (issue 49)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.avatarize import avatarize
from polars_hidden_rate.demo.cohort import cohort
from polars_hidden_rate.gate import cloaking_summary
from polars_hidden_rate.link import link_test as link_test_module
from polars_hidden_rate.link.errors import SortedLinkError, UnlinkedAvatarsError
from polars_hidden_rate.link.link_test import (
    ALPHA,
    PARTNERS,
    SAMPLE,
    LinkTest,
    link_test,
    link_test_of_sample,
    link_test_within,
    sampled_rows,
)
from polars_hidden_rate.stats import upper_tail
from tests.helpers import SHARED_DATASETS, local_cluster, run_script, write_files

COORDS = ["Dim1", "Dim2", "Dim3"]


def hospitals(n: int = 300, seed: int = 7) -> pl.DataFrame:
    """Two hospitals' records merged and ordered by ``site`` (the second hospital's
    patients older and of higher pressure: its avatars keep their site)."""
    north = cohort(n, seed=seed).with_columns(site=pl.lit("north"))
    south = cohort(n, seed=seed + 1).with_columns(
        site=pl.lit("south"),
        age=pl.col("age") + 60,
        systolic_bp=pl.col("systolic_bp") + 80,
        cholesterol=pl.col("cholesterol") + 5,
    )
    return pl.concat([north, south]).sample(fraction=1.0, shuffle=True, seed=seed).sort("site")


@pytest.fixture(scope="module")
def release() -> tuple[pl.DataFrame, pl.DataFrame]:
    originals = hospitals()
    avatars = avatarize(originals, 10, seed=0)
    assert originals["site"].to_list() == avatars["site"].to_list()  # each keeps its site
    return originals, avatars


def linked(n: int, seed: int = 0, noise: float = 0.3) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = x + rng.normal(scale=noise, size=x.shape)
    return pl.DataFrame(x, schema=COORDS), pl.DataFrame(y, schema=COORDS)


# -- a genuine release sorted on a category its avatars keep ------------------------------------


def test_a_release_sorted_on_a_category_its_avatars_keep_is_judged(
    release: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    originals, avatars = release
    summary = cloaking_summary(originals, avatars, max_own_copies=100)
    shuffle = np.random.default_rng(0).permutation(originals.height)
    shuffled = cloaking_summary(originals[shuffle], avatars[shuffle], max_own_copies=100)
    assert summary.hidden_rate == shuffled.hidden_rate  # the same link, rows in another order
    assert summary.evidence is not None
    assert summary.evidence.sorted_link is not None
    sort = summary.evidence.sorted_link
    assert (sort.checked, sort.column, sort.direction) == (True, "site", "ascending")
    assert sort.within is not None
    assert sort.within.p_value <= ALPHA
    assert shuffled.evidence is not None
    assert shuffled.evidence.sorted_link is not None
    assert shuffled.evidence.sorted_link.column is None
    assert phr.assert_hidden_rate(originals, avatars, 50) == summary.hidden_rate
    report = phr.privacy_report(originals, avatars)
    assert report.link_use == "judged"
    assert report.hidden_rate == summary.hidden_rate


def test_the_same_sort_made_after_the_avatars_is_refused(
    release: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    originals, avatars = release
    # Within each site the rows in another order in each file: the sort pairs them at random.
    order = np.random.default_rng(1).permutation(originals.height)
    left = originals[order].sort("site")
    right = avatars[np.random.default_rng(2).permutation(originals.height)].sort("site")
    with pytest.raises(SortedLinkError, match="no better than at random") as err:
        cloaking_summary(left, right, max_own_copies=100)
    assert err.value.column == "site"
    assert err.value.test is not None
    assert err.value.test.p_value > ALPHA
    # One avatar in the other hospital, both files sorted on their own: rows shift.
    moved = avatars.with_columns(
        site=pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("south")).otherwise("site")
    ).sort("site")
    with pytest.raises(SortedLinkError, match="do not hold their own row's value"):
        cloaking_summary(originals, moved, max_own_copies=100)


def test_the_command_line_judges_the_release_and_refuses_a_resort(
    release: tuple[pl.DataFrame, pl.DataFrame], tmp_path: Path
) -> None:
    originals, avatars = release
    o, a, r = tmp_path / "o.csv", tmp_path / "a.csv", tmp_path / "r.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    order = np.random.default_rng(2).permutation(originals.height)
    avatars[order].sort("site").write_csv(r)
    features = ["--features", ",".join(originals.columns)]
    done = run_script("check", str(o), str(a), *features, "--min-rate", "50", "--format", "json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["sorted_link"]["column"] == "site"
    assert got["sorted_link"]["within"]["linked"] is True
    report = run_script("report", str(o), str(a), *features, "--format", "json")
    assert report.returncode in (0, 1), report.stderr  # judged, on its targets
    assert json.loads(report.stdout)["link_use"] == "judged"
    for command in ("check", "report"):
        refused = run_script(command, str(o), str(r), *features)
        assert refused.returncode == 2, refused.stdout
        assert "both frames are sorted on 'site'" in refused.stderr
        assert "--allow-sorted-link" in refused.stderr
        assert refused.stderr.count("\n") == 1


@pytest.mark.slow
def test_every_path_judges_the_sort_alike(
    release: tuple[pl.DataFrame, pl.DataFrame], tmp_path: Path
) -> None:
    originals, avatars = release
    write_files(originals, tmp_path / "o", 2)
    write_files(avatars, tmp_path / "a", 3)
    order = np.random.default_rng(2).permutation(originals.height)
    write_files(avatars[order].sort("site"), tmp_path / "r", 3)
    options = {"features": originals.columns, "ncp": 5, "max_own_copies": 100.0}
    local = phr.local_cloaking_to_parquet(
        tmp_path / "o",
        tmp_path / "a",
        tmp_path / "local",
        **options,  # type: ignore[arg-type]
    )
    assert local.evidence is not None
    assert local.evidence.sorted_link is not None
    assert local.evidence.sorted_link.column == "site"
    with local_cluster(processes=False) as client:
        remote = phr.local_cloaking_to_parquet(
            tmp_path / "o",
            tmp_path / "a",
            tmp_path / "remote",
            cluster=client,
            **options,  # type: ignore[arg-type]
        )
        assert remote.evidence is not None
        assert remote.evidence.sorted_link == local.evidence.sorted_link
        with pytest.raises(SortedLinkError, match="'site'"):
            phr.local_cloaking_to_parquet(
                tmp_path / "o",
                tmp_path / "r",
                tmp_path / "no",
                cluster=client,
                **options,  # type: ignore[arg-type]
            )
    with pytest.raises(SortedLinkError, match="'site'"):
        phr.local_cloaking_to_parquet(
            tmp_path / "o",
            tmp_path / "r",
            tmp_path / "no",
            **options,  # type: ignore[arg-type]
        )
    assert not (tmp_path / "no").exists()


# -- the two overrides apart --------------------------------------------------------------------


def test_each_override_leaves_the_other_rule_in_force() -> None:
    originals = cohort(400, seed=1)
    avatars = avatarize(originals, 5, ncp=5, seed=0)
    left, right = originals.sort("age"), avatars.sort("age")
    with pytest.raises(SortedLinkError, match="--allow-sorted-link"):
        cloaking_summary(left, right, ncp=5, allow_unlinked=True)
    with pytest.raises(SortedLinkError):
        phr.assert_hidden_rate(left, right, 10, ncp=5, allow_unlinked=True)
    with pytest.raises(SortedLinkError):
        phr.privacy_report(left, right, ncp=5, allow_unlinked=True)
    measured = cloaking_summary(left, right, ncp=5, allow_sorted_link=True, max_own_copies=100)
    assert measured.evidence is not None
    assert measured.evidence.sorted_link is not None
    assert not measured.evidence.sorted_link.checked
    report = phr.privacy_report(left, right, ncp=5, allow_sorted_link=True)
    assert report.overrides["allow_sorted_link"] is True
    assert any("--allow-sorted-link" in note for note in report.override_notes)
    assert "Sorted-link check" in report.to_html()
    shuffled = avatars.sample(fraction=1.0, shuffle=True, seed=3)
    with pytest.raises(UnlinkedAvatarsError):
        cloaking_summary(originals, shuffled, ncp=5, allow_sorted_link=True)
    unlinked = phr.privacy_report(originals, shuffled, ncp=5, allow_sorted_link=True)
    assert unlinked.link_use == "absent"
    with pytest.raises(TypeError, match="allow_sorted_link"):
        cloaking_summary(left, right, ncp=5, allow_sorted_link="yes")  # type: ignore[arg-type]


def test_each_flag_leaves_the_other_rule_in_force(tmp_path: Path) -> None:
    originals = cohort(400, seed=1)
    avatars = avatarize(originals, 5, ncp=5, seed=0)
    o, a, s = tmp_path / "o.csv", tmp_path / "a.csv", tmp_path / "s.csv"
    originals.sort("age").write_csv(o)
    avatars.sort("age").write_csv(a)
    avatars.sample(fraction=1.0, shuffle=True, seed=3).write_csv(s)
    features = ["--features", ",".join(originals.columns), "--ncp", "5"]
    sorted_ = run_script("check", str(o), str(a), *features, "--allow-unlinked")
    assert sorted_.returncode == 2
    assert "sorted on 'age'" in sorted_.stderr
    allowed = run_script(
        "check", str(o), str(a), *features, "--allow-sorted-link", "--format", "json"
    )
    assert allowed.returncode in (0, 1), allowed.stderr
    got = json.loads(allowed.stdout)
    assert got["provenance"]["settings"]["allow_sorted_link"] is True
    assert got["provenance"]["settings"]["allow_unlinked"] is False
    assert got["sorted_link"]["checked"] is False
    # The shuffle against the originals in their own order (age-sorted: no shared sort).
    plain = tmp_path / "p.csv"
    originals.write_csv(plain)
    random_link = run_script("check", str(plain), str(s), *features, "--allow-sorted-link")
    assert random_link.returncode == 2
    assert "do not look linked" in random_link.stderr
    report = run_script("report", str(o), str(a), *features, "--allow-unlinked")
    assert report.returncode == 2
    assert "sorted on 'age'" in report.stderr


# -- a link the link test refuses never passes, in every entry point ---------------------------


def test_a_refused_link_measured_anyway_never_passes(tmp_path: Path) -> None:
    # 2,000 exact copies linked at random: every record hidden by its own copy elsewhere.
    originals = linked(2000, seed=4)[0]
    copies = originals.sample(fraction=1.0, shuffle=True, seed=5)
    summary = cloaking_summary(originals, copies, coords=COORDS, min_rate=90, allow_unlinked=True)
    assert summary.hidden_rate == 100.0
    assert summary.evidence is not None
    assert not summary.evidence.link.linked
    assert not summary.passed
    assert summary.failures[0].startswith("the link test refuses the link")
    assert not cloaking_summary(originals, copies, coords=COORDS, allow_unlinked=True).passed
    with pytest.raises(UnlinkedAvatarsError, match="never passes"):
        phr.assert_hidden_rate(originals, copies, 90, coords=COORDS, allow_unlinked=True)
    report = phr.privacy_report(originals, copies, coords=COORDS, allow_unlinked=True)
    assert report.link_use == "not judged"
    assert not report.passed
    assert report.verdicts["link_test"] is False
    # The dataset path: a gate judges the link, as `check` does.
    (tmp_path / "o").mkdir()
    (tmp_path / "a").mkdir()
    originals.write_parquet(tmp_path / "o" / "x.parquet")
    copies.write_parquet(tmp_path / "a" / "x.parquet")
    o, a = tmp_path / "o", tmp_path / "a"
    with pytest.raises(UnlinkedAvatarsError):
        phr.local_cloaking_to_parquet(o, a, tmp_path / "out", coords=COORDS, min_rate=90)
    assert not (tmp_path / "out").exists()
    measured = phr.local_cloaking_to_parquet(
        o, a, tmp_path / "out", coords=COORDS, min_rate=90, allow_unlinked=True
    )
    assert measured.hidden_rate == 100.0
    assert not measured.passed
    # Without a gate it measures and judges nothing, as documented.
    plain = phr.local_cloaking_to_parquet(o, a, tmp_path / "out2", coords=COORDS)
    assert plain.evidence is None
    # The command line: the same exit code for check (file and directory) and report.
    fo, fa = tmp_path / "o.parquet", tmp_path / "a.parquet"
    originals.write_parquet(fo)
    copies.write_parquet(fa)
    coords = ["--coords", ",".join(COORDS)]
    checked = run_script("check", str(fo), str(fa), *coords, "--min-rate", "90", "--allow-unlinked")
    assert checked.returncode == 1, checked.stderr
    gate = next(line for line in checked.stdout.splitlines() if line.startswith("gate"))
    assert "FAIL: the link test refuses the link" in gate
    as_json = run_script("check", str(fo), str(fa), *coords, "--allow-unlinked", "--format", "json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["failures"][0].startswith("the link test refuses")
    out = tmp_path / "parts"
    on_dirs = run_script("check", str(o), str(a), *coords, "--allow-unlinked", "--output", str(out))
    assert on_dirs.returncode == 1, on_dirs.stderr
    reported = run_script(
        "report", str(fo), str(fa), *coords, "--allow-unlinked", "--format", "json"
    )
    assert reported.returncode == 1, reported.stderr
    assert json.loads(reported.stdout)["passed"] is False


# -- what the outputs say of the rule ------------------------------------------------------------


def test_the_outputs_say_what_the_sorted_link_check_sees(
    release: tuple[pl.DataFrame, pl.DataFrame], tmp_path: Path
) -> None:
    originals, avatars = release
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    features = ["--features", ",".join(originals.columns)]
    text = run_script("check", str(o), str(a), *features).stdout.splitlines()
    line = next(line for line in text if line.startswith("sorted-link check"))
    assert "'site'" in line
    assert "not seen" in line
    plain_o, plain_a = linked(300, seed=6)
    po, pa = tmp_path / "po.csv", tmp_path / "pa.csv"
    plain_o.write_csv(po)
    plain_a.write_csv(pa)
    coords = ["--coords", ",".join(COORDS)]
    text = run_script("check", str(po), str(pa), *coords).stdout.splitlines()
    line = next(line for line in text if line.startswith("sorted-link check"))
    assert "no compared feature is sorted in both files" in line
    assert "a sort on a column not compared, or files nearly sorted, is not seen" in line
    report = phr.privacy_report(originals, avatars)
    assert "Sorted-link check" in report.to_html()
    assert report.to_dict()["evidence"]["sorted_link"]["column"] == "site"
    # A key links whatever the order: no line.
    keyed_o = plain_o.with_row_index("id")
    keyed_a = plain_a.with_row_index("id")
    keyed_o.write_csv(po)
    keyed_a.write_csv(pa)
    keyed = run_script("check", str(po), str(pa), *coords, "--on", "id")
    assert keyed.returncode == 0, keyed.stderr
    assert "sorted-link check" not in keyed.stdout


# -- the real releases ---------------------------------------------------------------------------


def _releases() -> list[tuple[str, pl.DataFrame, pl.DataFrame, dict[str, object]]]:
    aids = SHARED_DATASETS / "aids"
    wbcd = SHARED_DATASETS / "wbcd"
    found = []
    if (aids / "originals.csv").exists():
        originals = pl.read_csv(aids / "originals.csv", separator=";", null_values="NA")
        avatars = pl.read_csv(aids / "avatars_k20_ncp5.csv", null_values="")
        features = [c for c in originals.columns if c != "pidnum"]
        options = {"features": features, "ncp": 5, "impute": "median"}
        found.append(("aids", originals, avatars, options))
    if (wbcd / "originals.csv").exists():
        avatars = pl.read_csv(wbcd / "avatars_k20.csv")
        originals = pl.read_csv(wbcd / "originals.csv")
        found.append(("wbcd", originals, avatars, {"features": avatars.columns, "ncp": 2}))
    for name in ("aids", "wbcd"):
        split = SHARED_DATASETS / name / "privacy"
        if (split / "avatar_0.csv").exists():
            # holdout_0.csv is the generator's training set, avatar_0.csv row for row its avatars.
            originals = pl.read_csv(split / "holdout_0.csv", infer_schema_length=None)
            avatars = pl.read_csv(split / "avatar_0.csv", infer_schema_length=None)
            options = {"features": avatars.columns, "ncp": 5, "impute": "median"}
            found.append((f"{name} round 0", originals, avatars, options))
    return found


@pytest.mark.skipif(not SHARED_DATASETS.is_dir(), reason="../shared/datasets is absent")
def test_no_sort_of_the_papers_releases_is_refused() -> None:
    # The originals sorted on each feature, either way, their own avatars in the same order.
    releases = _releases()
    if not releases:
        pytest.skip("no release of the paper in ../shared/datasets")
    sorts = 0
    for name, originals, avatars, options in releases:
        features = options["features"]
        assert isinstance(features, list)
        true = cloaking_summary(originals, avatars, max_own_copies=100, **options)  # type: ignore[arg-type]
        for feature in features:
            for descending in (False, True):
                order = originals.with_row_index("row").sort(
                    feature, descending=descending, nulls_last=True
                )["row"]
                again = cloaking_summary(
                    originals[order],
                    avatars[order],
                    max_own_copies=100,
                    **options,  # type: ignore[arg-type]
                )
                assert again.hidden_rate == true.hidden_rate, (name, feature, descending)
                sorts += 1
    assert sorts >= 2 * 26


# -- the link test's and the rule's figures, pinned ----------------------------------------------


def test_ties_count_half_in_the_closer_share() -> None:
    assert LinkTest(10, 3, 1, 2, 0.5).closer_share == 100.0 * 4 / 6
    # Every avatar at the same place: every comparison a tie, half the wins.
    x = np.zeros((60, 2))
    test = link_test(x, x)
    assert (test.closer, test.farther, test.ties) == (0, 0, 60 * PARTNERS)
    assert test.closer_share == 50.0
    assert test.to_dict()["own_closer_percent"] == 50.0


def test_the_sample_is_in_record_order_on_every_path() -> None:
    population = SAMPLE + 7
    rows = sampled_rows(population)
    assert rows is not None
    assert bool(np.all(np.diff(rows) > 0))
    rng = np.random.default_rng(11)
    x = rng.normal(size=(population, 2))
    y = x + rng.normal(scale=1.5, size=x.shape)
    # What a cluster gathers: the sampled records, in record order.
    mask = np.zeros(population, dtype=bool)
    mask[rows] = True
    whole = link_test(x, y)
    assert whole == link_test_of_sample(x[mask], y[mask], population)
    assert whole.n == SAMPLE
    assert whole.population == population
    # The figure itself: the 8 derangements of the sorted sample, counted here.
    xs, ys = x[mask], y[mask]
    own = ((xs - ys) ** 2).sum(axis=1)
    closer = farther = 0
    for k in range(PARTNERS):
        partner = link_test_module.derangement(SAMPLE, (link_test_module.SEED, k))
        other = ((xs - ys[partner]) ** 2).sum(axis=1)
        closer += int((own < other).sum())
        farther += int((own > other).sum())
    assert (whole.closer, whole.farther) == (closer, farther)


def test_one_record_has_one_comparison() -> None:
    test = link_test(np.zeros((1, 2)), np.ones((1, 2)))
    assert (test.n, test.partners, test.ties, test.closer, test.farther) == (1, 1, 1, 0, 0)
    assert test.p_value == 1.0
    assert not test.tested
    assert test.linked


def test_the_variance_within_groups_counts_repeated_partners() -> None:
    # Groups of five: each record meets 4 partners through 8 cycles, and the variance of its
    # wins is m^2/12 + sum_j c_j^2 / 6, counted here from the cycles themselves.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(100, 2))
    y = x + rng.normal(scale=0.5, size=x.shape)
    labels = np.repeat(np.arange(20), 5)
    test = link_test_within(x, y, labels, 100)
    m = PARTNERS
    cycles = [link_test_module._cycles(labels, (link_test_module.SEED, k)) for k in range(m)]
    assert all(bool((labels[c] == labels).all() and (c != np.arange(100)).all()) for c in cycles)
    stacked = np.stack(cycles)
    repeats = [np.unique(stacked[:, i], return_counts=True)[1] for i in range(100)]
    variance = sum(m * m / 12 + float((c.astype(float) ** 2).sum()) / 6 for c in repeats)
    z = (test.closer + 0.5 * test.ties - 100 * m / 2) / math.sqrt(variance)
    assert test.p_value == pytest.approx(upper_tail(z), rel=1e-12)
    # Records of groups below MIN_GROUP are not compared.
    small = link_test_within(x, y, np.repeat(np.arange(25), 4), 100)
    assert (small.n, small.tested) == (0, False)
    mixed = link_test_within(x, y, np.r_[np.zeros(60), np.repeat(np.arange(1, 11), 4)], 100)
    assert mixed.n == 60


def test_a_random_pairing_within_groups_passes_no_more_often_than_alpha_says() -> None:
    # A strong link shuffled within groups of five (the smallest compared): records of one
    # group win or lose together more than independent ones; the test still passes such a
    # pairing at most as often as its level says (pairs would, 9 times as often at 0.002).
    found = []
    labels = np.repeat(np.arange(60), 5)
    for seed in range(300):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(300, 3))
        y = x + rng.normal(scale=0.05, size=x.shape)
        order = np.lexsort((rng.random(300), labels))
        found.append(link_test_within(x, y[order], labels, 300).p_value)
    p = np.array(found)
    assert (p <= 0.05).mean() <= 0.05 * 1.5
    assert (p <= 0.01).mean() <= 0.01 * 2


def sorted_pair(left: list[float], right: list[float]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A link on ``COORDS`` beside a feature ``s``, the originals' and the avatars' values
    given (too few records for the link test, or for one within the values)."""
    x, y = linked(len(left), seed=9)
    return x.with_columns(s=pl.Series(left)), y.with_columns(s=pl.Series(right))


def summary_of(left: pl.DataFrame, right: pl.DataFrame) -> None:
    cloaking_summary(left, right, coords=[*COORDS, "s"], max_own_copies=100)


def test_the_sort_is_taken_as_meant_only_where_both_files_are_unlikely_so() -> None:
    # The originals sorted on 200 distinct values, the avatars on 199 zeros and a one: a file
    # in random order is so sorted with a chance of 2/200 > alpha, so no shared sort.
    x, y = linked(200, seed=9)
    left = x.with_columns(s=pl.Series(np.arange(200) * 1e-3))
    right = y.with_columns(s=pl.Series([0.0] * 199 + [1e-3]))
    summary_of(left, right)
    summary_of(right, left)


def test_the_chance_of_a_sort_counts_both_directions() -> None:
    # Eight values with two triples: 3! 3! / 8! = 8.9e-4 one way, twice that either way
    # (above alpha): not taken as meant; eight distinct values: 2 / 8! = 5e-5, refused.
    ties = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 3.0]
    assert ALPHA / 2 < math.factorial(3) ** 2 / math.factorial(8) <= ALPHA
    summary_of(*sorted_pair(ties, [v + 0.5 for v in ties]))
    distinct = [float(v) for v in range(8)]
    assert 2 / math.factorial(8) > ALPHA**2
    with pytest.raises(SortedLinkError, match="'s'"):
        summary_of(*sorted_pair(distinct, [v + 0.5 for v in distinct]))
