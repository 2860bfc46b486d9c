"""A short demonstration on data the package makes itself: ``python -m polars_hidden_rate.demo``."""

from __future__ import annotations

import numpy as np
import polars as pl

from polars_hidden_rate.api import hidden_rate, local_cloaking


def example_frames(n: int = 2000, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals in 3 projected dimensions, and avatars that average 10 nearest neighbours."""
    rng = np.random.default_rng(seed)
    coords = rng.normal(size=(n, 3)) * np.array([3.0, 2.0, 1.0])
    squared = ((coords[:, None, :] - coords[None, :, :]) ** 2).sum(axis=2)
    neighbours = np.argsort(squared, axis=1)[:, 1:11]
    weights = rng.exponential(size=neighbours.shape)
    weights /= weights.sum(axis=1, keepdims=True)
    avatars = (coords[neighbours] * weights[..., None]).sum(axis=1)
    names = ["Dim1", "Dim2", "Dim3"]
    originals = pl.DataFrame(coords, schema=names).with_row_index("id")
    return originals, pl.DataFrame(avatars, schema=names).with_row_index("id")


def main() -> None:
    originals, avatars = example_frames()
    rate = hidden_rate(originals, avatars, coords=["Dim1", "Dim2", "Dim3"], on="id")
    print(f"hidden rate: {rate:.2f} %  ({originals.height} records)")
    print(local_cloaking(originals, avatars, coords=["Dim1", "Dim2", "Dim3"], on="id").head())


if __name__ == "__main__":
    main()
