"""Numbers for people beside the threshold they are judged by, printed so that they never
contradict the verdict.

A rate of 89.995 % rounded to two decimals reads "90.00" next to a threshold of 90 and a
FAIL. `decisive` rounds a value as usual, and keeps more digits only where fewer
would put it on the threshold or across it; `exact` prints the threshold itself
without rounding.
"""

from __future__ import annotations

import math
from typing import Literal

Style = Literal["f", "g"]
"""Python's formats: ``"f"`` counts decimals, ``"g"`` significant digits."""

# 17 significant digits print every float64 exactly; a fixed format may need many more
# decimals for a tiny value.
_MOST_DIGITS = {"f": 40, "g": 17}


def decisive(value: float, bound: float | None, precision: int, style: Style = "g") -> str:
    """``value`` with ``precision`` decimals (``"f"``) or significant digits (``"g"``), or as
    many more as it takes to print it on the side of ``bound`` it lies on (on it only when
    equal to it). Without a bound, or for a value that is not finite, the plain rounding.

    Examples
    --------
    >>> decisive(89.995, 90.0, 2, "f"), decisive(93.127, 90.0, 2, "f")
    ('89.995', '93.13')
    >>> decisive(0.20001, 0.2, 4), decisive(5.0, 5.0, 4)
    ('0.20001', '5')
    """
    plain = f"{value:.{precision}{style}}"
    if bound is None or not (math.isfinite(value) and math.isfinite(bound)):
        return plain
    side = _side(value, bound)
    for digits in range(precision, _MOST_DIGITS[style] + 1):
        text = f"{value:.{digits}{style}}"
        if _side(float(text), bound) == side:
            return text
    return repr(value)


def exact(bound: float) -> str:
    """``bound`` as the shortest text that reads back as it, without a trailing ``.0``.

    Examples
    --------
    >>> exact(90.0), exact(90.125), exact(0.2)
    ('90', '90.125', '0.2')
    """
    text = repr(float(bound))
    return text.removesuffix(".0")


SMALLEST_P = 1e-300
"""Below it a p-value is printed as a bound: a float64 tail that small has underflowed or
lost its digits, and ``p = 0`` would claim a certainty no test gives."""


def p_text(p_value: float) -> str:
    """A p-value for people: ``"p = 0.56"``, ``"p = 3e-05"``, or ``"p < 1e-300"`` below
    `SMALLEST_P` (an underflowed tail is not 0).

    Examples
    --------
    >>> p_text(0.5612), p_text(3.1e-5), p_text(0.0)
    ('p = 0.56', 'p = 3.1e-05', 'p < 1e-300')
    """
    if p_value < SMALLEST_P:
        return f"p < {SMALLEST_P:g}"
    return f"p = {p_value:.2g}"


def _side(value: float, bound: float) -> int:
    return (value > bound) - (value < bound)
