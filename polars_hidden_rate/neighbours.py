"""The documented import path of the nearest-two search (docs/api.md); it lives in
`polars_hidden_rate.engine.nearest`."""

from polars_hidden_rate.engine.nearest import NearestTwo, nearest_two
from polars_hidden_rate.engine.scale import canonical_scale

__all__ = ["NearestTwo", "canonical_scale", "nearest_two"]
