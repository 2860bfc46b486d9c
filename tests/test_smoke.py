import numpy as np
import polars as pl

import polars_hidden_rate as phr
from tests.conftest import brute_force_counts


def test_counts_match_reference_on_integer_grid() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, (300, 3)).astype(float)
    y = x + rng.integers(-1, 2, x.shape)
    frame = phr.local_cloaking(
        pl.DataFrame(x, schema=["a", "b", "c"]),
        pl.DataFrame(y, schema=["a", "b", "c"]),
        coords=["a", "b", "c"],
    )
    np.testing.assert_array_equal(
        frame["local_cloaking"].to_numpy(), brute_force_counts(x, y, 1e-9)
    )
