"""The public functions' integer options and flags, each checked by one rule (`checks`): a
numpy integer is an integer like any other and a bool is none; a flag is True or False (a
numpy bool too), never ``"no"`` (which is true), ``1`` or None where None means nothing."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.checks import OptionTypeError
from polars_hidden_rate.demo.cohort import cohort
from polars_hidden_rate.namespace import AvatarNamespace
from tests.helpers import quarter_hidden_pair, without_provenance


def _sets(n: int = 80) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Originals, their avatars (row ``i`` of ``i``) and a holdout, two numeric columns."""
    rng = np.random.default_rng(3)
    points = rng.normal(size=(n, 2))
    originals = pl.DataFrame(points, schema=["x", "y"])
    avatars = pl.DataFrame(points + rng.normal(scale=0.5, size=(n, 2)), schema=["x", "y"])
    holdout = pl.DataFrame({"x": rng.normal(size=n), "y": rng.normal(size=n)})
    return originals, avatars, holdout


# --- integers: numpy integers accepted, bools refused


def _numpy(k: int) -> Any:
    """``k`` as a numpy integer, which the annotations (``int``) do not name."""
    return np.int64(k)


def test_numpy_integers_are_integer_options_like_any_other() -> None:
    originals, avatars, holdout = _sets()
    sides = (["x"], ["y"])
    integers: tuple[Any, ...] = (np.int64(2), np.int32(2), np.uint8(2))
    two_, three_, four_, five_ = (_numpy(k) for k in (2, 3, 4, 5))
    for k in integers:
        found = phr.linkability_risk(originals, avatars, holdout, aux_cols=sides, n_neighbors=k)
        two = phr.linkability_risk(originals, avatars, holdout, aux_cols=sides, n_neighbors=2)
        assert found.to_dict() == two.to_dict()
        assert type(found.n_neighbors) is int
    baseline = phr.dcr_baseline_protection(originals, avatars, seed=five_)
    assert baseline.to_dict() == phr.dcr_baseline_protection(originals, avatars, seed=5).to_dict()
    assert type(baseline.seed) is int
    json.dumps(baseline.to_dict())
    report = phr.privacy_report(
        originals,
        avatars,
        holdout=holdout,
        aux_cols=sides,
        n_neighbors=two_,
        dcr_baseline=True,
        baseline_seed=five_,
    )
    expected = phr.privacy_report(
        originals,
        avatars,
        holdout=holdout,
        aux_cols=sides,
        n_neighbors=2,
        dcr_baseline=True,
        baseline_seed=5,
    )
    # The same report and the same settings stated (the time measured may differ by a second).
    assert without_provenance(report.to_dict()) == without_provenance(expected.to_dict())
    stated = report.to_dict()["provenance"]
    assert stated["settings"] == expected.to_dict()["provenance"]["settings"]
    json.dumps(report.to_dict())
    made = phr.avatarize(originals, three_, ncp=two_, seed=four_)
    assert made.equals(phr.avatarize(originals, 3, ncp=2, seed=4))
    assert cohort(10, seed=five_).equals(cohort(10, seed=5))


def _integer_calls() -> dict[str, Callable[[Any], object]]:
    originals, avatars, holdout = _sets(20)
    sides = (["x"], ["y"])
    return {
        "seed": lambda v: phr.dcr_baseline_protection(originals, avatars, seed=v),
        "n_neighbors": lambda v: phr.linkability_risk(
            originals, avatars, holdout, aux_cols=sides, n_neighbors=v
        ),
        "baseline_seed": lambda v: phr.privacy_report(
            originals, avatars, dcr_baseline=True, baseline_seed=v
        ),
        "avatarize seed": lambda v: phr.avatarize(originals, 3, seed=v),
        "report n_neighbors": lambda v: phr.privacy_report(
            originals, avatars, holdout=holdout, aux_cols=sides, n_neighbors=v
        ),
        # Without the attack it sets, a bool is refused as a bool, not taken for 1.
        "report n_neighbors alone": lambda v: phr.privacy_report(originals, avatars, n_neighbors=v),
        "cohort seed": lambda v: cohort(10, seed=v),
    }


INTEGER_CALLS = (
    "seed",
    "n_neighbors",
    "baseline_seed",
    "avatarize seed",
    "report n_neighbors",
    "report n_neighbors alone",
    "cohort seed",
)


def test_the_integer_calls_are_those_swept() -> None:
    assert tuple(_integer_calls()) == INTEGER_CALLS


@pytest.mark.parametrize("call", INTEGER_CALLS)
@pytest.mark.parametrize("value", [True, False, np.True_, 2.0, "3"])
def test_an_integer_option_refuses_a_bool_by_name(call: str, value: object) -> None:
    keyword = call.rsplit(" ", 1)[-1] if call != "report n_neighbors alone" else "n_neighbors"
    with pytest.raises(OptionTypeError, match=f"`{keyword}` must be an integer, got {value!r}"):
        _integer_calls()[call](value)


def test_seed_true_is_refused_by_the_dcr_baseline() -> None:
    """The mutation audit's survivor: ``seed=True`` is no seed 1."""
    originals, avatars, _ = _sets(20)
    with pytest.raises(TypeError, match="`seed` must be an integer, got True of type bool"):
        phr.dcr_baseline_protection(originals, avatars, seed=True)
    with pytest.raises(ValueError, match=r"`seed` must be a non-negative integer, got -1$"):
        phr.dcr_baseline_protection(originals, avatars, seed=np.int64(-1))  # type: ignore[arg-type]


# --- flags: True or False only


def _taking(
    keyword: str, function: Callable[..., object], *args: Any, **given: Any
) -> Callable[[Any], object]:
    """``function(*args, **given)`` with ``keyword`` set to the value the call takes."""
    return lambda value: function(*args, **given, **{keyword: value})


def _flag_calls(tmp_path: Path) -> dict[tuple[str, str], Callable[[Any], object]]:
    """Each public function's flags, as a call that takes the flag's value."""
    originals, avatars, holdout = _sets(60)
    o, a = tmp_path / "o.parquet", tmp_path / "a.parquet"
    originals.write_parquet(o)
    avatars.write_parquet(a)
    two = (originals, avatars)
    three = (originals, avatars, holdout)
    flags: list[tuple[tuple[str, ...], Callable[..., object], tuple[Any, ...], dict[str, Any]]] = [
        (
            (
                "allow_unlinked",
                "allow_sorted_link",
                "by_row_order",
                "dcr_baseline",
                "compare_spaces",
                "progress",
            ),
            phr.privacy_report,
            two,
            {},
        ),
        (
            ("allow_unlinked", "allow_sorted_link", "by_row_order", "progress"),
            phr.assert_hidden_rate,
            (*two, 0),
            {},
        ),
        (("overwrite", "progress"), phr.local_cloaking_to_parquet, (o, a, tmp_path / "out"), {}),
        (
            ("progress", "overwrite_input", "restore_order"),
            phr.count_cloaking,
            (originals.to_numpy(), avatars.to_numpy()),
            {},
        ),
        *(
            (("progress",), function, two, {})
            for function in (
                phr.hidden_rate,
                phr.local_cloaking,
                phr.distance_to_closest,
                phr.closest_distances_ratio,
                phr.dcr_baseline_protection,
            )
        ),
        (("progress",), phr.correlation_protection_rate, two, {"known": ["x"]}),
        (("progress",), phr.membership_risk, three, {}),
        (("progress",), phr.dcr_overfitting_protection, three, {}),
        (("progress",), phr.linkability_risk, three, {"aux_cols": (["x"], ["y"])}),
        (("progress",), phr.inference_risk, three, {"known": ["x"], "secret": "y"}),
        (("progress",), phr.singling_out_risk, three, {}),
    ]
    return {
        (function.__name__, keyword): _taking(keyword, function, *args, **given)
        for keywords, function, args, given in flags
        for keyword in keywords
    }


def test_the_sweep_holds_every_flag_of_the_public_functions(tmp_path: Path) -> None:
    """Every keyword a public function declares as a bool is swept below."""
    swept = set(_flag_calls(tmp_path))
    for name in phr.__all__:
        function = getattr(phr, name)
        if isinstance(function, type) or not callable(function):
            continue
        for keyword, parameter in inspect.signature(function).parameters.items():
            if "bool" in str(parameter.annotation):
                assert (name, keyword) in swept


@pytest.mark.parametrize("value", ["no", "False", 1, 0, 1.0, None, [False]])
def test_a_flag_is_true_or_false_in_every_public_function(tmp_path: Path, value: object) -> None:
    for (function, keyword), call in _flag_calls(tmp_path).items():
        if value is None and keyword == "progress":
            call(None)  # None: on a terminal only
            continue
        choices = "True, False or None" if keyword == "progress" else "True or False"
        message = f"`{keyword}` must be {choices}, got {value!r}"
        with pytest.raises(OptionTypeError) as raised:
            call(value)
        assert str(raised.value) == message, function


def test_numpy_bools_are_flags(tmp_path: Path) -> None:
    originals, avatars, _ = _sets(60)
    measured = phr.privacy_report(originals, avatars, dcr_baseline=np.True_)  # type: ignore[arg-type]
    assert (
        measured.dcr_baseline
        == phr.privacy_report(originals, avatars, dcr_baseline=True).dcr_baseline
    )
    unasked = phr.privacy_report(originals, avatars, dcr_baseline=np.False_)  # type: ignore[arg-type]
    assert unasked.dcr_baseline is None
    rate = phr.hidden_rate(originals, avatars, progress=np.False_)  # type: ignore[arg-type]
    assert rate == phr.hidden_rate(originals, avatars)


@pytest.mark.parametrize(
    "option",
    [{"tie_tol": np.float32(0.0)}, {"tie_tol": np.int64(0)}, {"threads": np.int64(1)},
     {"threads": np.int32(2)}],
)  # fmt: skip
def test_numpy_scalars_are_options_like_any_number(option: dict[str, object]) -> None:
    originals, avatars = quarter_hidden_pair()
    assert phr.hidden_rate(originals, avatars, coords="d1", **option) == 25.0  # type: ignore[arg-type]
    frame = phr.local_cloaking(originals, avatars, coords="d1", **option)  # type: ignore[arg-type]
    assert frame["local_cloaking"].to_list() == [0, 1, 0, 0]


@pytest.mark.parametrize("min_rate", [np.float32(20.0), np.int64(20), np.float64(20.0)])
def test_numpy_scalars_are_minimum_rates(min_rate: object) -> None:
    originals, avatars = quarter_hidden_pair()
    # Two of the four avatars copy their original: own copies are not gated here.
    rate = phr.assert_hidden_rate(originals, avatars, min_rate, coords="d1", max_own_copies=100)  # type: ignore[arg-type]
    assert rate == 25.0
    with pytest.raises(phr.HiddenRateTooLowError):
        phr.assert_hidden_rate(originals, avatars, min_rate * 3, coords="d1", max_own_copies=100)  # type: ignore[operator]


@pytest.mark.parametrize(
    "option",
    [{"tie_tol": np.float64(np.nan)}, {"tie_tol": -1e-9}, {"tie_tol": np.inf},
     {"threads": 0}, {"threads": np.int64(-1)}, {"threads": np.float64(2.0)},
     {"threads": True}, {"tie_tol": True}],
)  # fmt: skip
def test_bad_numbers_are_refused_by_name(option: dict[str, object]) -> None:
    originals, avatars = quarter_hidden_pair()
    (name,) = option
    with pytest.raises(ValueError, match=f"`{name}`"):
        phr.hidden_rate(originals, avatars, coords="d1", **option)  # type: ignore[arg-type]


@pytest.mark.parametrize("entry", ["local_cloaking", "hidden_rate", "namespace", "gate"])
def test_a_misspelt_option_is_named(entry: str) -> None:
    originals, avatars = quarter_hidden_pair()
    calls: dict[str, Callable[..., object]] = {
        # mypy sees the typo too: each call needs its ignore.
        "local_cloaking": lambda: phr.local_cloaking(originals, avatars, coord="d1"),  # type: ignore[call-arg]
        "hidden_rate": lambda: phr.hidden_rate(originals, avatars, coord="d1"),  # type: ignore[call-arg]
        "namespace": lambda: AvatarNamespace(originals.lazy()).local_cloaking(avatars, coord="d1"),  # type: ignore[call-arg]
        "gate": lambda: phr.assert_hidden_rate(originals, avatars, 10, coord="d1"),  # type: ignore[call-arg]
    }
    with pytest.raises(TypeError, match="unexpected keyword argument 'coord'"):
        calls[entry]()
