"""Project raw records as the avatar method does: PCA, MCA or FAMD fitted on the originals.

The conventions are those of Octopize's saiph library:

- numeric columns (integers, floats, decimals; temporal columns as seconds) are
  z-scored with the originals' mean and population standard deviation; a constant
  column is divided by 1;
- categorical columns (String, Categorical, Enum, Boolean) are one-hot encoded and
  each dummy scaled as ``(dummy - p) / sqrt(p)``, ``p`` the modality's share among
  the originals (FAMD);
- all-categorical data gives MCA, whose correspondence-analysis coordinates are
  those of the same dummies divided by ``sqrt(q)`` (``q`` categorical columns),
  each row taken as a profile over the modalities the originals know.

The components are the eigenvectors of the Gram matrix of the originals' scaled
rows, found by an exact (LAPACK) eigendecomposition, each oriented so that its
largest loading is positive. The fit takes two streaming passes over the
originals (statistics, then the Gram matrix) and holds O(p^2) numbers, ``p``
the scaled width; [`Projection.transform`][polars_hidden_rate.Projection.transform] is a set of
Polars expressions, so a LazyFrame stays lazy and each row's coordinates depend on that row alone.

Modules, one job each: `types` (which columns, of which kind),
`passes` (the two streaming passes), `partitioned` (those passes as a
task per parquet file, merged in file order), `scaling` (the scaling rule and
its forms), `model` (the fitted [`Projection`][polars_hidden_rate.Projection]) and
`coordinates` (the hook into the metric).
"""

from polars_hidden_rate.projection.coordinates import ProjectedCoordinates
from polars_hidden_rate.projection.model import DEFAULT_NCP, Projection
from polars_hidden_rate.projection.scaling import (
    CategoricalFeature,
    Model,
    NumericFeature,
    Scaling,
)

__all__ = [
    "DEFAULT_NCP",
    "CategoricalFeature",
    "Model",
    "NumericFeature",
    "ProjectedCoordinates",
    "Projection",
    "Scaling",
]
