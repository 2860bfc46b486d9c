"""The link, the gate's options and the provenance against hostile inputs (issue 35): a
row-order link that only carries a shared sort, the own-copies digits, the link overrides
in the provenance, the tie tolerance's bound, and the link test pinned to an exact
reference."""

from __future__ import annotations

import json
import math
from decimal import Decimal, getcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate import engine
from polars_hidden_rate.avatarize import avatarize
from polars_hidden_rate.checks import MAX_TIE_TOL
from polars_hidden_rate.demo.cohort import cohort
from polars_hidden_rate.gate import OwnCopiesError, cloaking_summary
from polars_hidden_rate.link.errors import AmbiguousLinkError, SortedLinkError
from polars_hidden_rate.link.link_test import (
    ALPHA,
    PARTNERS,
    SEED,
    LinkTest,
    derangement,
    link_test,
)
from polars_hidden_rate.stats import upper_tail
from tests.helpers import noisy_linked, run_script

COORDS = ["Dim1", "Dim2", "Dim3"]


# -- a row-order link that only carries a shared sort order ------------------------------------


@pytest.fixture(scope="module")
def demo() -> tuple[pl.DataFrame, pl.DataFrame]:
    originals = cohort(400, seed=1)
    return originals, avatarize(originals, 5, ncp=5, seed=0)


def test_both_files_sorted_on_a_feature_are_refused(
    demo: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    originals, avatars = demo
    true = cloaking_summary(originals, avatars, ncp=5, max_own_copies=100)
    # Sorted on age (an integer with ties), on a float, on text, either way: the link test
    # passes each such pairing, which only carries the feature's rank.
    for name, descending in (("age", False), ("cholesterol", True), ("sex", False)):
        left = originals.sort(name, descending=descending)
        right = avatars.sort(name, descending=descending)
        measured = cloaking_summary(left, right, ncp=5, max_own_copies=100, allow_sorted_link=True)
        assert measured.evidence is not None
        assert measured.evidence.link.linked, name  # what the test alone lets through
        with pytest.raises(SortedLinkError, match=f"both frames are sorted on '{name}'") as err:
            cloaking_summary(left, right, ncp=5)
        assert err.value.column == name
        with pytest.raises(SortedLinkError):
            phr.assert_hidden_rate(left, right, 10, ncp=5)
        with pytest.raises(SortedLinkError):
            phr.privacy_report(left, right, ncp=5)
    # A key links them whatever the order; the true link is not refused.
    keyed = originals.with_row_index("row"), avatars.with_row_index("row")
    left, right = keyed[0].sort("age"), keyed[1].sort("age")
    by_key = cloaking_summary(left, right, ncp=5, on="row", max_own_copies=100)
    assert by_key.hidden_rate == true.hidden_rate
    # Originals sorted, their own avatars in the same order: a real row-order link, kept.
    order = originals.with_row_index("row").sort("age")["row"]
    again = cloaking_summary(originals[order], avatars[order], ncp=5, max_own_copies=100)
    assert again.hidden_rate == true.hidden_rate


def test_a_sort_that_chance_explains_is_not_refused() -> None:
    # Four records sorted in both files: a random order is sorted with a chance of 1/12.
    originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0, 4.0]})
    avatars = pl.DataFrame({"Dim1": [0.5, 1.5, 3.1, 4.2]})
    assert phr.assert_hidden_rate(originals, avatars, 20, coords="Dim1") == 25.0
    # A constant feature, or all but one value alike (a chance of 2/60 each): not refused.
    a, b = noisy_linked(60, seed=2)
    flag = pl.Series([0] * 59 + [1])
    a = a.with_columns(c=pl.lit(1.0), f=flag)
    b = b.with_columns(c=pl.lit(1.0), f=flag)
    cloaking_summary(a, b, coords=[*COORDS, "c", "f"], max_own_copies=100)


def test_the_command_line_refuses_a_shared_sort(
    demo: tuple[pl.DataFrame, pl.DataFrame], tmp_path: Path
) -> None:
    originals, avatars = demo
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.sort("age").write_csv(o)
    avatars.sort("age").write_csv(a)
    features = ",".join(originals.columns)
    common = ["check", str(o), str(a), "--features", features, "--ncp", "5"]
    done = run_script(*common, "--min-rate", "10")
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("\n") == 1
    assert "both frames are sorted on 'age'" in done.stderr
    assert "--on" in done.stderr
    # --by-row-order says the row order is the link beside a key, not beside a sort.
    ko, ka = tmp_path / "ko.csv", tmp_path / "ka.csv"
    originals.with_row_index("row").sort("age").write_csv(ko)
    avatars.with_row_index("row").sort("age").write_csv(ka)
    keyed = ["check", str(ko), str(ka), "--features", features, "--ncp", "5"]
    beside = run_script(*keyed, "--by-row-order")
    assert beside.returncode == 2
    assert "sorted on 'age'" in beside.stderr
    by_key = run_script(*keyed, "--on", "row", "--max-own-copies", "100", "--format", "json")
    assert by_key.returncode == 0, by_key.stderr
    assert json.loads(by_key.stdout)["link_test"]["linked"] is True
    report = run_script("report", str(o), str(a), "--features", features, "--ncp", "5")
    assert report.returncode == 2
    assert "sorted on 'age'" in report.stderr


# -- keys beside a row-order link ---------------------------------------------------------------


def test_a_text_key_beside_a_row_order_link_is_refused() -> None:
    originals, avatars = noisy_linked(80, seed=3)
    ids = (pl.int_range(80) + 500).cast(pl.String).str.zfill(6)
    originals = originals.with_columns(pid=ids)
    avatars = avatars.with_columns(pid=ids)
    with pytest.raises(AmbiguousLinkError, match="both frames hold 'pid', unique per row"):
        cloaking_summary(originals, avatars, coords=COORDS)
    cloaking_summary(originals, avatars, coords=COORDS, by_row_order=True)


@pytest.mark.parametrize("rows", [20, 49, 50])
def test_a_key_is_never_projected_beside_by_row_order(rows: int, tmp_path: Path) -> None:
    originals = cohort(rows, seed=4).drop("sex", "smoker", "diabetes", "region")
    avatars = avatarize(originals, 3, ncp=3, seed=1)
    ids = pl.int_range(rows) + 1000
    originals, avatars = originals.with_columns(pid=ids), avatars.with_columns(pid=ids)
    with pytest.raises(pl.exceptions.ComputeError, match="'pid' is unique per row"):
        cloaking_summary(originals, avatars, ncp=3, by_row_order=True, max_own_copies=100)
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    done = run_script("check", str(o), str(a), "--ncp", "3", "--by-row-order")
    assert done.returncode == 2, done.stdout
    assert "'pid' is unique per row" in done.stderr
    features = [c for c in originals.columns if c != "pid"]
    named = run_script(
        "check", str(o), str(a), "--ncp", "3", "--by-row-order", "--features", ",".join(features)
    )
    assert named.returncode == 0, named.stderr


def test_by_row_order_beside_a_key_is_a_contradiction(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(60, seed=5)
    originals = originals.with_columns(pid=pl.int_range(60))
    avatars = avatars.with_columns(pid=pl.int_range(60))
    with pytest.raises(ValueError, match=r"--by-row-order \(by_row_order=True\) links by row"):
        cloaking_summary(originals, avatars, coords=COORDS, on="pid", by_row_order=True)
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    common = ["check", str(o), str(a), "--coords", ",".join(COORDS), "--on", "pid"]
    done = run_script(*common, "--by-row-order")
    assert done.returncode == 2
    assert "--by-row-order" in done.stderr
    assert "--on" in done.stderr
    assert run_script(*common).returncode == 0


# -- own copies: the digits that decide --------------------------------------------------------


def test_own_copies_print_the_digits_that_decide(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(120, seed=6)
    copied = pl.concat([originals[:1], avatars[1:]])  # one own copy in 120: 0.8333... %
    share = 100 * 1 / 120
    assert share == 0.8333333333333334
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    copied.write_csv(a)
    common = ["check", str(o), str(a), "--coords", ",".join(COORDS)]
    above = run_script(*common, "--max-own-copies", "0.8333333333333333")
    assert above.returncode == 1, above.stderr
    assert "own copies 0.8333333333333334 % > 0.8333333333333333 %" in above.stdout
    at = run_script(*common, "--max-own-copies", "0.8333333333333334")
    assert at.returncode == 0, at.stderr
    assert "own copies 0.8333333333333334 % <= 0.8333333333333334 %" in at.stdout
    plenty = run_script(*common, "--max-own-copies", "5")
    assert "own copies 0.83 % <= 5 %" in plenty.stdout
    summary = cloaking_summary(originals, copied, coords=COORDS, max_own_copies=0.8333333333333333)
    assert summary.failures == [
        "own copies 0.8333333333333334 % > 0.8333333333333333 % (--max-own-copies)"
    ]
    with pytest.raises(OwnCopiesError) as raised:
        phr.assert_hidden_rate(
            originals, copied, 0, coords=COORDS, max_own_copies=0.8333333333333333
        )
    assert "(0.8333333333333334 %)" in str(raised.value)
    assert "above the maximum of 0.8333333333333333 %" in str(raised.value)


def test_own_copies_error_is_exported() -> None:
    assert phr.OwnCopiesError is OwnCopiesError
    assert "OwnCopiesError" in phr.__all__


def test_the_link_errors_are_exported_and_caught_from_the_package() -> None:
    from polars_hidden_rate.link import errors

    for name in ("UnlinkedAvatarsError", "AmbiguousLinkError", "SortedLinkError"):
        assert getattr(phr, name) is getattr(errors, name)
        assert name in phr.__all__
    originals, avatars = noisy_linked(200, seed=3)
    unlinked = avatars.sample(fraction=1.0, shuffle=True, seed=2)  # row order carries nothing
    with pytest.raises(phr.UnlinkedAvatarsError):
        phr.assert_hidden_rate(originals, unlinked, 0, coords=COORDS)


# -- the provenance states the link overrides and the link test --------------------------------


def test_the_provenance_states_the_link_overrides_and_the_link_test(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(200, seed=7)
    o, a, s = tmp_path / "o.parquet", tmp_path / "a.parquet", tmp_path / "s.parquet"
    originals.write_parquet(o)
    avatars.write_parquet(a)
    avatars.sample(fraction=1.0, shuffle=True, seed=1).write_parquet(s)
    coords = ["--coords", ",".join(COORDS)]
    done = run_script("check", str(o), str(s), *coords, "--allow-unlinked", "--format", "json")
    assert done.returncode == 1, done.stderr  # measured on a refused link: never a pass
    settings = json.loads(done.stdout)["provenance"]["settings"]
    assert (settings["allow_unlinked"], settings["by_row_order"]) == (True, False)
    assert settings["max_own_copies"] == 10.0
    assert settings["link_test"]["linked"] is False
    assert settings["link_test"]["n"] == 200
    out = tmp_path / "out.parquet"
    written = run_script("check", str(o), str(a), *coords, "--by-row-order", "--output", str(out))
    assert written.returncode == 0, written.stderr
    block = json.loads(pl.read_parquet_metadata(out)["polars_hidden_rate"])
    assert (block["settings"]["allow_unlinked"], block["settings"]["by_row_order"]) == (
        False,
        True,
    )
    assert block["settings"]["link_test"]["linked"] is True
    assert block["settings"]["link_test"]["own_closer"] > 0
    report = run_script("report", str(o), str(s), *coords, "--allow-unlinked", "--format", "json")
    assert report.returncode == 1, report.stderr  # every target met, but a refused link
    settings = json.loads(report.stdout)["provenance"]["settings"]
    assert settings["allow_unlinked"] is True
    assert settings["link_test"]["linked"] is False


# -- the tie tolerance is a rounding allowance -------------------------------------------------


def test_the_tie_tolerance_is_bounded(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(100, seed=8, noise=1.0)
    for value in (1e300, MAX_TIE_TOL, 0.5):
        with pytest.raises(ValueError, match=r"`tie_tol` must be below 0.001"):
            phr.hidden_rate(originals, avatars, coords=COORDS, tie_tol=value)
        with pytest.raises(ValueError, match=r"`tie_tol` must be below"):
            phr.count_cloaking(originals.to_numpy(), avatars.to_numpy(), tie_tol=value)
    assert 0 <= phr.hidden_rate(originals, avatars, coords=COORDS, tie_tol=9.99e-4) <= 100
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    done = run_script("check", str(o), str(a), "--coords", ",".join(COORDS), "--tie-tol", "1e300")
    assert done.returncode == 2
    assert "--tie-tol" in done.stderr
    assert "below 0.001" in done.stderr


# -- the report's options named as the command line gives them ---------------------------------


def test_the_reports_options_are_named_as_given(tmp_path: Path) -> None:
    originals, avatars = noisy_linked(60, seed=9)
    o, a = tmp_path / "o.csv", tmp_path / "a.csv"
    originals.write_csv(o)
    avatars.write_csv(a)
    common = ["report", str(o), str(a), "--coords", ",".join(COORDS)]
    cases = [
        (["--secret", "Dim1"], ["--secret 'Dim1'", "(--known A,B) and a holdout", "--holdout"]),
        (["--secret", "Dim1", "--known", "Dim2"], ["needs a holdout", "--holdout FILE"]),
        (["--secret-tolerance", "0.1"], ["--secret-tolerance", "--secret COLUMN"]),
        (["--secret-kind", "numeric"], ["--secret-kind", "--secret COLUMN"]),
        (["--target", "hidden_rate=nan"], ["--target", "finite number"]),
        (["--target", "hidden_rate=inf"], ["--target", "finite number"]),
    ]
    for extra, words in cases:
        done = run_script(*common, *extra)
        assert done.returncode == 2, (extra, done.stdout)
        assert done.stderr.count("\n") == 1
        assert "`" not in done.stderr, done.stderr
        for word in words:
            assert word in done.stderr, (extra, done.stderr)


# -- the counting walk flags a rival exactly at the strict threshold ---------------------------


@pytest.mark.parametrize("copies", [1, 8])
def test_a_rival_at_the_strict_threshold_is_strictly_closer(copies: int) -> None:
    # Own avatar at d2 = a * a, a rival avatar at the float64 just below (b * b): strictly
    # closer, so the record is not hidden by ties only. With copies of the rival, a box of
    # them (lower = upper) lies exactly at the strict threshold too.
    a, b = 1.6369616873214545, 1.6369616873214543
    assert b * b == np.nextafter(a * a, -np.inf)
    groups = 40
    rng = np.random.default_rng(10)
    x = np.zeros((groups * (1 + copies), 2))
    y = np.zeros_like(x)
    for k in range(groups):
        first = k * (1 + copies)
        x[first], y[first] = (0.0, 100.0 * k), (a, 100.0 * k)
        for c in range(1, copies + 1):
            x[first + c], y[first + c] = (b - 0.5, 100.0 * k), (b, 100.0 * k)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(axis=2)
    own = np.diag(d2).copy()
    np.fill_diagonal(d2, np.inf)
    expected = (d2 < own[:, None]).any(axis=1)
    assert expected.sum() == groups
    for strategy in ("tree", "flat", "auto"):
        for cap in (None, 1):
            found = engine.cloaking_result(
                x, y, tie_tol=0.0, strategy=strategy, cap=cap, closer=True
            )
            counts, closer = found.counts, found.closer
            assert closer is not None
            hidden = counts > 0
            assert closer[hidden].tolist() == expected[hidden].tolist(), (strategy, cap)
    assert engine.closer_rivals(x, y).tolist() == expected.tolist()
    frames = pl.DataFrame(x, schema=["u", "v"]), pl.DataFrame(y, schema=["u", "v"])
    summary = cloaking_summary(*frames, coords=["u", "v"], tie_tol=0.0, max_own_copies=100)
    assert summary.evidence is not None
    assert summary.evidence.hidden_by_ties_only == (0 if copies == 1 else groups * copies)


# -- the link test against an exact reference ---------------------------------------------------

getcontext().prec = 80
_PI = Decimal(
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899863"
)


def exact_upper_tail(z2: Fraction, positive: bool) -> Decimal:
    """P(Z >= z) for z = +-sqrt(z2), to some 60 digits: the series of erf near 0, the
    continued fraction of erfc beyond."""
    x = (Decimal(z2.numerator) / Decimal(z2.denominator) / 2).sqrt()  # z / sqrt(2)
    if x < 3:
        term, total, k = x, x, 0
        while abs(term) > Decimal(10) ** -70:
            k += 1
            term = -term * x * x / k
            total += term / (2 * k + 1)
        erfc = 1 - 2 / _PI.sqrt() * total
    else:
        fraction = x
        for k in range(4000, 0, -1):
            fraction = x + Decimal(k) / 2 / fraction
        erfc = (-x * x).exp() / _PI.sqrt() / fraction
    return erfc / 2 if positive else 1 - erfc / 2


def reference(x: np.ndarray, y: np.ndarray) -> tuple[int, int, int, Fraction]:
    """The wins, losses and ties of every record's own avatar against its partners' (the
    same derangements, each pair compared one by one in float64), and z squared exactly."""
    n = len(x)
    m = PARTNERS
    closer = farther = ties = 0
    for k in range(m):
        partner = derangement(n, (SEED, k))
        for i in range(n):
            own = float(((x[i] - y[i]) ** 2).sum())
            other = float(((x[i] - y[partner[i]]) ** 2).sum())
            closer += own < other
            farther += own > other
            ties += own == other
    # z = (closer + ties / 2 - n m / 2) / sqrt(n m (m + 2) / 12): the rank of the own avatar
    # among its m + 1 is uniform, its variance ((m + 1)^2 - 1) / 12.
    numerator = Fraction(closer) + Fraction(ties, 2) - Fraction(n * m, 2)
    return closer, farther, ties, numerator * numerator / Fraction(n * m * (m + 2), 12)


def test_the_rank_variance_of_one_record_is_exact() -> None:
    # Enumerated: the own avatar's wins among m + 1 distinct distances in uniform order.
    m = PARTNERS
    wins = [Fraction(w) for w in range(m + 1)]
    mean = sum(wins) / (m + 1)
    variance = sum((w - mean) ** 2 for w in wins) / (m + 1)
    assert (mean, variance) == (Fraction(m, 2), Fraction(m * (m + 2), 12))


@pytest.mark.parametrize(
    ("n", "noise", "grid", "seed"),
    [
        (60, 3.0, False, 0),  # z near 0..3
        (80, 1.5, False, 1),
        (200, 1.2, True, 2),  # integer grid: many ties, counted half
        (120, 2.0, True, 3),
        (300, 0.3, False, 4),  # far tail, z >= 8
        (500, 0.5, True, 5),
    ],
)
def test_the_link_statistic_and_its_p_value_match_an_exact_reference(
    n: int, noise: float, grid: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = x + rng.normal(scale=noise, size=x.shape)
    if grid:
        x, y = np.round(x * 2), np.round(y * 2)
    closer, farther, ties, z2 = reference(x, y)
    test = link_test(x, y)
    assert (test.closer, test.farther, test.ties) == (closer, farther, ties)
    if grid:
        assert ties > 0
    positive = 2 * closer + ties >= n * PARTNERS
    exact = exact_upper_tail(z2, positive)
    z = math.sqrt(float(z2)) * (1 if positive else -1)
    if z < 8:
        assert abs(Decimal(test.p_value) - exact) <= Decimal("2e-16") + exact * Decimal("1e-9"), z
    else:
        # The asymptotic form exp(-z^2/2) / (z sqrt(2 pi)) is the tail times 1 + O(1/z^2).
        ratio = Decimal(test.p_value) / exact
        assert abs(ratio - 1) <= Decimal(2) / Decimal(z * z), (z, ratio)
    assert test.linked == (exact <= Decimal(ALPHA))


def test_the_far_normal_tail_matches_the_exact_tail() -> None:
    for z in (8.0, 9.5, 12.0, 20.0, 37.0):
        exact = exact_upper_tail(Fraction(z) ** 2, True)
        ratio = Decimal(upper_tail(z)) / exact
        assert abs(ratio - 1) <= Decimal("1.5") / Decimal(z * z), (z, ratio)
    for z in (-2.0, 0.0, 1.0, 3.0, 5.0, 7.5):
        exact = exact_upper_tail(Fraction(z) ** 2, z >= 0)
        assert abs(Decimal(upper_tail(z)) - exact) <= Decimal("2e-16"), z


def test_the_level_is_one_in_a_thousand() -> None:
    assert ALPHA == 1e-3
    for p, linked_ in ((1e-3, True), (1.0001e-3, False), (5e-3, False), (9e-3, False)):
        assert LinkTest(200, 1000, 600, 0, p, PARTNERS).linked is linked_, p
