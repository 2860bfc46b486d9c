"""Numbers written as text: their notations, and the refusal of a text feature that holds them.

A csv written with decimal commas (``-0,801931``) or with a space after each separator is read
by Polars as text. Projected as categories, such a column makes every avatar value a modality
the originals never had, and every record a tie: the hidden rate goes to 100 % silently.
`polars_hidden_rate.frames.files` reads such files as numbers; `refuse_text_numbers`
stops a text feature that still holds them (a DataFrame built in Python) before it is projected.

The patterns are written once here, in the syntax Python's ``re`` and Polars' regex share.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from polars.exceptions import ComputeError

from polars_hidden_rate.frames.problems import quotes_values

_SPECIAL = r"(?:[+-]?inf(?:inity)?|nan)"
INTEGER = r"^[+-]?[0-9]+$"
"""An integer, plainly written."""
PLAIN_NUMBER = rf"^(?i:[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|{_SPECIAL})$"
"""A number as Polars reads it: a decimal point, an optional exponent; ``inf``, ``nan``."""
DECIMAL_COMMA_NUMBER = rf"^(?i:[+-]?(?:[0-9]+,?[0-9]*|,[0-9]+)(?:e[+-]?[0-9]+)?|{_SPECIAL})$"
"""A number with a decimal comma (``-0,80``; an integer too)."""
_DIGIT_GROUPS = (
    r"^[+-]?[0-9]{1,3}(?:"
    r"(?:,[0-9]{3})+(?:\.[0-9]*)?"  # 1,234.5
    r"|(?:\.[0-9]{3})+(?:,[0-9]*)?"  # 1.234,5
    r"|(?:[ '\u00a0\u202f][0-9]{3})+(?:[.,][0-9]*)?"  # 1 234,5 and 1'234.5
    r")$"
)
"""A number with thousands separators: ``1,234.5``, ``1.234,5``, ``1 234,5``, ``1'234``."""

_PLAIN = re.compile(PLAIN_NUMBER)
_NOTATIONS = (
    ("a decimal comma", re.compile(DECIMAL_COMMA_NUMBER)),
    ("digit group separators", re.compile(_DIGIT_GROUPS)),
)


def notation(value: str) -> tuple[str, ...] | None:
    """How the text ``value`` writes a number: ``()`` plainly, else what departs from the plain
    notation (``"spaces around it"``, ``"a decimal comma"``, ``"digit group separators"``);
    None when it is no number."""
    stripped = value.strip()
    padded = ("spaces around it",) if stripped != value else ()
    if _PLAIN.fullmatch(stripped):
        return padded
    for name, pattern in _NOTATIONS:
        if pattern.fullmatch(stripped):
            return (*padded, name)
    return None


def text_numbers_example(values: Iterable[str]) -> tuple[str, tuple[str, ...]] | None:
    """An example value and its notation when every one of ``values`` is a number and some are
    written in another notation than the plain one; None otherwise (text, or plain numbers:
    codes such as postcodes, which stay categories)."""
    others: list[tuple[str, tuple[str, ...]]] = []
    for value in values:
        found = notation(value)
        if found is None:
            return None
        if found:
            others.append((value, found))
    return min(others) if others else None


def refuse_text_numbers(tallies: Mapping[str, Collection[object]], role: str) -> None:
    """Refuse a categorical feature whose modalities (its distinct values: the keys of its
    tally) are all numbers, some written in another notation: a numeric column read as text.

    Raises
    ------
    ComputeError
        Naming the first such feature, its notation and the fix, with an example value only
        of a released set (`polars_hidden_rate.frames.problems.QUOTED_ROLES`).
    """
    for name, tally in tallies.items():
        values = list(tally)
        if not values or not all(isinstance(value, str) for value in values):
            continue  # no value yet, or Booleans
        found = text_numbers_example(str(value) for value in values)
        if found is None:
            continue
        example, how = found
        if "a decimal comma" in how:
            fix = "read the file with decimal_comma=True (hidden-rate: --decimal-comma) or cast it"
        elif "digit group separators" in how:
            fix = "remove the separators and cast it to a number type"
        else:
            fix = f"cast it: pl.col({name!r}).str.strip_chars().cast(pl.Float64)"
        # The released sets' values may be quoted; the originals' never (CI logs).
        shown = f", e.g. {example!r}" if quotes_values(role) else ""
        msg = (
            f"feature {name!r} of {role} is text but every value is a number written with "
            f"{' and '.join(how)}{shown}: it would be projected as categories; {fix}"
        )
        raise ComputeError(msg)
