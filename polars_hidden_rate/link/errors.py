"""The link errors: a link a verdict cannot trust, each carrying what refused it."""

from __future__ import annotations

from polars.exceptions import ComputeError

from polars_hidden_rate.link.link_test import LinkTest


class UnlinkedAvatarsError(ComputeError):
    """The avatars do not look linked to the originals: the link test cannot reject a
    random link. ``.test`` holds the `LinkTest`."""

    def __init__(self, message: str, test: LinkTest) -> None:
        super().__init__(message)
        self.test = test


class AmbiguousLinkError(ComputeError):
    """Linked by row order while both frames hold a key column (``.column``)."""

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column


class SortedLinkError(ComputeError):
    """Linked by row order while both frames are sorted on one feature (``.column``) and,
    within its equal values, the rows pair up no better than at random (``.test``, the link
    test within them): the rows may pair up by that feature's rank rather than by record."""

    def __init__(self, message: str, column: str, test: LinkTest | None = None) -> None:
        super().__init__(message)
        self.column = column
        self.test = test
