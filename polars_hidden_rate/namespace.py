"""The ``avatar`` namespace on DataFrame and LazyFrame: thin forwarders to the free functions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, Unpack

import polars as pl

from polars_hidden_rate import api, report
from polars_hidden_rate.frames import ColumnSpec
from polars_hidden_rate.measures import correlation, distances, row_match
from polars_hidden_rate.measures.distances import AvatarsT
from polars_hidden_rate.plan import CountOptions, FrameT, Keys


class AvatarNamespace(Generic[FrameT]):
    """``frame.avatar``: the hidden-rate metrics with ``frame`` as the originals."""

    def __init__(self, frame: FrameT) -> None:
        self._frame: FrameT = frame

    def local_cloaking(
        self, avatars: pl.DataFrame | pl.LazyFrame, **options: Unpack[CountOptions]
    ) -> FrameT:
        """Forward to [`polars_hidden_rate.local_cloaking`][polars_hidden_rate.local_cloaking] with
        this frame as the originals."""
        return api.local_cloaking(self._frame, avatars, **options)

    def hidden_rate(
        self, avatars: pl.DataFrame | pl.LazyFrame, **options: Unpack[CountOptions]
    ) -> float:
        """Forward to [`polars_hidden_rate.hidden_rate`][polars_hidden_rate.hidden_rate] with this
        frame as the originals."""
        return api.hidden_rate(self._frame, avatars, **options)

    def distance_to_closest(self, avatars: AvatarsT, **options: Unpack[CountOptions]) -> AvatarsT:
        """Forward to
        [`polars_hidden_rate.distance_to_closest`][polars_hidden_rate.distance_to_closest] with this
        frame as the originals: the avatars come back, with ``distance_to_closest``."""
        return distances.distance_to_closest(self._frame, avatars, **options)

    def closest_distances_ratio(
        self, avatars: AvatarsT, **options: Unpack[CountOptions]
    ) -> AvatarsT:
        """Forward to
        [`polars_hidden_rate.closest_distances_ratio`][polars_hidden_rate.closest_distances_ratio]
        with this frame as the originals: the avatars come back, with
        ``closest_distances_ratio``."""
        return distances.closest_distances_ratio(self._frame, avatars, **options)

    def row_direct_match_protection(
        self,
        avatars: pl.DataFrame | pl.LazyFrame,
        *,
        features: ColumnSpec | None = None,
        on: Keys | None = None,
        left_on: Keys | None = None,
        right_on: Keys | None = None,
    ) -> float:
        """Forward to
        [`polars_hidden_rate.row_direct_match_protection`][polars_hidden_rate.row_direct_match_protection]
        with this frame as the originals."""
        return row_match.row_direct_match_protection(
            self._frame, avatars, features=features, on=on, left_on=left_on, right_on=right_on
        )

    def correlation_protection_rate(
        self,
        avatars: pl.DataFrame | pl.LazyFrame,
        known: ColumnSpec,
        *,
        tolerance: float = correlation.CORRELATION_TOLERANCE,
        hidden_rate: float | None = None,
        **options: Unpack[CountOptions],
    ) -> float:
        """Forward to
        [`polars_hidden_rate.correlation_protection_rate`][polars_hidden_rate.correlation_protection_rate]
        with this frame as the originals."""
        return correlation.correlation_protection_rate(
            self._frame, avatars, known, tolerance=tolerance, hidden_rate=hidden_rate, **options
        )

    def privacy_report(
        self,
        avatars: pl.DataFrame | pl.LazyFrame,
        *,
        targets: Mapping[str, float] | None = None,
        confidence: float = 0.95,
        known: ColumnSpec | None = None,
        **options: Unpack[CountOptions],
    ) -> report.PrivacyReport:
        """Forward to [`polars_hidden_rate.privacy_report`][polars_hidden_rate.privacy_report] with
        this frame as the originals."""
        return report.privacy_report(
            self._frame, avatars, targets=targets, confidence=confidence, known=known, **options
        )


pl.api.register_dataframe_namespace("avatar")(AvatarNamespace)
pl.api.register_lazyframe_namespace("avatar")(AvatarNamespace)
