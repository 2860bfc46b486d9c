"""Exact hidden rate and local cloaking of avatar anonymizations, for Polars.

Importing the package registers the ``avatar`` namespace on DataFrame and LazyFrame.
"""

from polars_hidden_rate import namespace as _namespace  # noqa: F401  (registers `avatar`)
from polars_hidden_rate.api import CountOptions, hidden_rate, local_cloaking
from polars_hidden_rate.avatarize import avatarize
from polars_hidden_rate.engine import count_cloaking
from polars_hidden_rate.gate import HiddenRateTooLowError, assert_hidden_rate
from polars_hidden_rate.projection import Projection

__all__ = [
    "CountOptions",
    "HiddenRateTooLowError",
    "Projection",
    "assert_hidden_rate",
    "avatarize",
    "count_cloaking",
    "hidden_rate",
    "local_cloaking",
]
__version__ = "0.1.0"
