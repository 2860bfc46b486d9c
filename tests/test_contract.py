"""The contract other code is written against: defaults, the projected space, ordered joins."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import polars as pl
import pytest

import polars_hidden_rate as phr
from polars_hidden_rate.projection import DEFAULT_NCP
from tests.helpers import brute_force_counts, hidden_share

FEATURES = ["a", "b", "c", "d", "e", "f", "g"]


def raw_pair(n: int = 400, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Seven correlated numeric features and a categorical one; avatars = originals + noise."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 3))
    x = latent @ rng.normal(size=(3, 7)) + 0.3 * rng.normal(size=(n, 7))
    y = x + 0.4 * rng.normal(size=(n, 7))
    group = rng.choice(["u", "v", "w"], n)
    originals = pl.DataFrame(x, schema=FEATURES).with_columns(
        id=pl.int_range(n), group=pl.Series(group)
    )
    avatars = pl.DataFrame(y, schema=FEATURES).with_columns(
        id=pl.int_range(n), group=pl.Series(np.where(rng.random(n) < 0.2, "u", group))
    )
    return originals, avatars


def projected_reference(
    originals: pl.DataFrame, avatars: pl.DataFrame, features: list[str], ncp: int
) -> np.ndarray:
    """The float64 brute force on the coordinates the fitted projection gives."""
    projection = phr.Projection.fit(originals, features=features, ncp=ncp)
    dims = projection.coordinate_columns()
    x = projection.transform(originals).select(dims).to_numpy()
    y = projection.transform(avatars).select(dims).to_numpy()
    assert x.shape[1] == ncp
    return brute_force_counts(x, y, 1e-9)


@pytest.mark.parametrize("ncp", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("features", [FEATURES, [*FEATURES[:4], "group"]])
def test_features_count_in_the_first_ncp_components(features: list[str], ncp: int) -> None:
    originals, avatars = raw_pair()
    expected = projected_reference(originals, avatars, features, ncp)
    got = phr.local_cloaking(originals, avatars, features=features, ncp=ncp, on="id")
    np.testing.assert_array_equal(got["local_cloaking"].to_numpy(), expected)
    rate = phr.hidden_rate(originals, avatars, features=features, ncp=ncp, on="id")
    assert rate == hidden_share(expected)


def test_default_ncp_is_five() -> None:
    assert DEFAULT_NCP == 5
    originals, avatars = raw_pair(seed=1)
    assert phr.Projection.fit(originals, features=FEATURES).ncp == 5
    expected = projected_reference(originals, avatars, FEATURES, 5)
    choices: list[phr.CountOptions] = [{"features": FEATURES, "on": "id"}, {"on": "id"}]
    for options in choices:
        got = phr.local_cloaking(originals.drop("group"), avatars.drop("group"), **options)
        np.testing.assert_array_equal(got["local_cloaking"].to_numpy(), expected)
    # Fewer dimensions than five: all of them.
    narrow = phr.Projection.fit(originals, features=["a", "b", "c"])
    assert narrow.ncp == 3


def test_coords_default_to_all_given_columns() -> None:
    originals, avatars = raw_pair(seed=2)
    expected = brute_force_counts(
        originals.select(FEATURES).to_numpy(), avatars.select(FEATURES).to_numpy(), 1e-9
    )
    got = phr.local_cloaking(originals, avatars, coords=FEATURES)
    np.testing.assert_array_equal(got["local_cloaking"].to_numpy(), expected)
    first_two = brute_force_counts(
        originals.select(FEATURES[:2]).to_numpy(), avatars.select(FEATURES[:2]).to_numpy(), 1e-9
    )
    got = phr.local_cloaking(originals, avatars, coords=FEATURES, ncp=2)
    np.testing.assert_array_equal(got["local_cloaking"].to_numpy(), first_two)


def test_every_join_asks_to_keep_the_left_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Polars 2 keeps no join order unless asked; eager joins keep it today only by accident.
    calls: list[dict[str, Any]] = []
    for frame_type in (pl.DataFrame, pl.LazyFrame):
        real = frame_type.join

        def recording(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            calls.append(kwargs)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(frame_type, "join", recording)
    originals, avatars = raw_pair(seed=3)
    shuffled = avatars.sample(fraction=1.0, shuffle=True, seed=0)
    phr.local_cloaking(originals.lazy(), shuffled.lazy(), coords=FEATURES, on="id").collect()
    phr.local_cloaking(originals, shuffled, features=FEATURES, on="id")
    phr.hidden_rate(originals, shuffled, coords=FEATURES, on="id")
    ordered = [call for call in calls if call.get("how") != "anti"]
    assert ordered, "the keyed paths join"
    assert all(call.get("maintain_order") == "left" for call in ordered), ordered


def test_faiss_is_loaded_when_the_flat_band_is_used() -> None:
    # The FAISS band (flat.py) is its own module, imported by the flat strategy and the GPU
    # path only: the tree path and `import polars_hidden_rate` never load FAISS.
    script = (
        "import sys, numpy as np, polars_hidden_rate as phr\n"
        "x = np.arange(12.0).reshape(6, 2)\n"
        "phr.count_cloaking(x, x[::-1].copy(), strategy='tree')\n"
        "assert 'faiss' not in sys.modules, 'tree'\n"
        "phr.count_cloaking(x, x[::-1].copy(), strategy='flat')\n"
        "assert 'faiss' in sys.modules and 'polars_hidden_rate.engine.flat' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
