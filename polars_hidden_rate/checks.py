"""Option checks, each written once: numbers given as Python or numpy scalars, never bools;
flags as bools, never numbers or words. And how every text output quotes a name (`quoted`).

A value out of range raises ValueError naming the option; a value of the wrong type raises
`OptionTypeError`, both a TypeError and a ValueError, as the options have raised
one or the other since the first release.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Literal, TypeVar

import numpy as np

T = TypeVar("T")

AllComponents = Literal["all"]
"""``ncp="all"``: every component of the scaled space, also the directions the originals do
not span (saiph's ``nf=None``)."""


class OptionTypeError(TypeError, ValueError):
    """An option of the wrong type (a TypeError, and a ValueError for older callers)."""


class InvariantError(RuntimeError):
    """One of the package's own invariants does not hold: a bug in the package, never a
    problem of the caller's data or options. Raised in place of an ``assert``, so that
    ``python -O`` keeps the check."""


def invariant(holds: bool, what: str) -> None:
    """`InvariantError` naming ``what`` unless ``holds``: a check of the package's own
    logic, kept under ``python -O`` (an ``assert`` is not)."""
    if not holds:
        raise InvariantError(f"{what}: does not hold (a bug in polars_hidden_rate)")


def known(value: T | None, what: str) -> T:
    """``value``, which the package's own logic guarantees is set; `InvariantError`
    (naming ``what``) where it is None."""
    if value is None:
        raise InvariantError(f"{what} is missing (a bug in polars_hidden_rate)")
    return value


def check_real(value: object, option: str, *, low: float, high: float = math.inf) -> float:
    """``value`` as a finite float in ``[low, high]``; an error naming ``option`` otherwise.

    Python and numpy integers and floats are accepted; bools and strings are not.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        msg = f"{_named(option)} must be a number, got {value!r} of type {type(value).__name__}"
        raise OptionTypeError(msg)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64
        number = math.inf
    if not (math.isfinite(number) and low <= number <= high):
        bounds = f">= {low:g}" if math.isinf(high) else f"in [{low:g}, {high:g}]"
        msg = f"{_named(option)} must be a finite number {bounds}, got {value!r}"
        raise ValueError(msg)
    return number


def check_percentage(value: object, option: str) -> float:
    """A percentage in ``[0, 100]``; a value in ``(0, 1]`` is refused as a fraction given for a
    percentage (0.9 for 90 %), which would gate at almost nothing."""
    return refuse_fraction(check_real(value, option, low=0.0, high=100.0), option)


def refuse_fraction(number: float, option: str) -> float:
    """``number``, a checked percentage, unless it lies in ``(0, 1]``: a fraction given for a
    percentage (0.9 for 90 %), refused with a message naming ``option``."""
    if 0.0 < number <= 1.0:
        msg = (
            f"{_named(option)} is a percentage: {number:g} means {number:g} %; "
            f"did you mean {100 * number:g}?"
        )
        raise ValueError(msg)
    return number


def _named(option: str) -> str:
    """An option as messages name it: a command-line flag as it is, a keyword in backticks."""
    return option if option.startswith("-") else f"`{option}`"


def quoted(names: str | Iterable[str]) -> str:
    """A name from a data file (a column, a category), or several joined by ", ", as every
    text output prints it, like a path: quoted as Python's ``repr`` quotes it, so that a
    newline, a carriage return or an escape in a header shows as ``\\n``, ``\\r``, ``\\x1b``
    and never starts a line of its own (a forged ``gate ... PASS``) or redraws one.

    >>> quoted("age"), quoted(["a", "b\\nc"])
    ("'age'", "'a', 'b\\\\nc'")
    """
    return ", ".join(repr(str(name)) for name in ([names] if isinstance(names, str) else names))


def check_flag(value: object, option: str, *, or_none: bool = False) -> bool:
    """A flag: True or False, a Python or numpy bool; a number, a word (``"no"``, which is
    true) or None is refused as `OptionTypeError`. ``or_none``: the option also takes None,
    which the caller keeps before it checks (the message says so), as `check_count`'s."""
    if not isinstance(value, bool | np.bool_):
        choices = "True, False or None" if or_none else "True or False"
        msg = f"{_named(option)} must be {choices}, got {value!r}"
        raise OptionTypeError(msg)
    return bool(value)


def check_count(value: object, option: str, *, low: int = 1, or_none: bool = False) -> int:
    """``value`` as an int of at least ``low``; Python or numpy integers, never bools."""
    alternative = " or None" if or_none else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        msg = (
            f"`{option}` must be an integer{alternative}, "
            f"got {value!r} of type {type(value).__name__}"
        )
        raise OptionTypeError(msg)
    if value < low:
        bound = "a non-negative integer" if low == 0 else f"at least {low}"
        # int(): numpy's repr of a scalar differs between its releases.
        msg = f"`{option}` must be {bound}{alternative}, got {int(value)}"
        raise ValueError(msg)
    return int(value)


def check_seed(seed: object, option: str = "seed") -> int:
    """A random seed: a non-negative integer, Python or numpy, never a bool."""
    return check_count(seed, option, low=0)


def check_ncp_option(ncp: object) -> int | AllComponents | None:
    """``ncp`` as given: None (the default), ``"all"``, or an integer of at least 1."""
    if ncp is None:
        return None
    if isinstance(ncp, str) and ncp == "all":
        return "all"
    if isinstance(ncp, bool) or not isinstance(ncp, numbers.Integral):
        msg = f"`ncp` must be an integer or 'all', got {ncp!r} of type {type(ncp).__name__}"
        raise OptionTypeError(msg)
    return check_count(ncp, "ncp")


def check_tolerance(tolerance: object) -> float:
    """A tolerance (the share of a value's magnitude a match may miss it by): a finite
    number >= 0."""
    return check_real(tolerance, "tolerance", low=0.0)


MAX_TIE_TOL = 1e-3
"""The relative tie tolerance is below this: it is a rounding allowance (float64 sums of
squares round by about ``d`` units of ``2^-53``; the default is ``1e-9``), not a radius that
hides records behind rivals farther than their own avatar."""


def check_tie_tol(tie_tol: object, option: str = "tie_tol") -> float:
    """The relative tie tolerance: a finite number >= 0, below `MAX_TIE_TOL`."""
    number = check_real(tie_tol, option, low=0.0)
    if number >= MAX_TIE_TOL:
        msg = (
            f"{_named(option)} must be below {MAX_TIE_TOL:g}, got {tie_tol!r}: it is a "
            "rounding allowance for ties (default 1e-9), not a distance"
        )
        raise ValueError(msg)
    return number


def check_threads(threads: object) -> int | None:
    """Engine threads: None (all cores) or an integer >= 1."""
    return None if threads is None else check_count(threads, "threads", or_none=True)


def check_cap(cap: object) -> int | None:
    """A cap on the counts: None (full counts) or an integer >= 1."""
    return None if cap is None else check_count(cap, "cap", or_none=True)


def check_confidence(confidence: object) -> float:
    """A confidence level: a number strictly between 0 and 1, where the normal quantile of
    `polars_hidden_rate.stats.normal_quantile` is finite."""
    level = check_real(confidence, "confidence", low=0.0, high=1.0)
    if level in (0.0, 1.0):
        msg = f"`confidence` must lie strictly between 0 and 1, got {confidence!r}"
        raise ValueError(msg)
    return level
