"""The ``avatar`` namespace on DataFrame and LazyFrame: thin forwarders to the free functions."""

from __future__ import annotations

from typing import Generic, Unpack

import polars as pl

from polars_hidden_rate import api
from polars_hidden_rate.api import CountOptions, FrameT


class AvatarNamespace(Generic[FrameT]):
    """``frame.avatar``: the hidden-rate metrics with ``frame`` as the originals."""

    def __init__(self, frame: FrameT) -> None:
        self._frame: FrameT = frame

    def local_cloaking(
        self, avatars: pl.DataFrame | pl.LazyFrame, **options: Unpack[CountOptions]
    ) -> FrameT:
        """Forward to :func:`polars_hidden_rate.local_cloaking` with this frame as the originals."""
        return api.local_cloaking(self._frame, avatars, **options)

    def hidden_rate(
        self, avatars: pl.DataFrame | pl.LazyFrame, **options: Unpack[CountOptions]
    ) -> float:
        """Forward to :func:`polars_hidden_rate.hidden_rate` with this frame as the originals."""
        return api.hidden_rate(self._frame, avatars, **options)


pl.api.register_dataframe_namespace("avatar")(AvatarNamespace)
pl.api.register_lazyframe_namespace("avatar")(AvatarNamespace)
