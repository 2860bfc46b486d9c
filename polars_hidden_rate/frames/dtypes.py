"""The type questions about columns, each answered once: which types hold text, which hold
categories (text stored as codes), which type the two sides of a key or of a feature meet in,
and where float64 does not hold a value exactly.
"""

from __future__ import annotations

import polars as pl
from polars.exceptions import SchemaError

TEXT_TYPES = (pl.String, pl.Categorical, pl.Enum)
"""The types whose values are text."""
CATEGORY_TYPES = (pl.Categorical, pl.Enum)
"""Text stored as codes: hashed, compared and joined as their text, never as their codes."""
# Float64 holds every integer up to this magnitude exactly; beyond, distinct values may merge.
EXACT_INTEGER_LIMIT = 2**53
# Decimals of at most this many digits come back from their nearest float64 (DBL_DIG).
_FLOAT64_DIGITS = 15
# Integer types whose every value float64 holds exactly.
_SMALL_INTEGERS = (pl.Int8, pl.Int16, pl.Int32, pl.UInt8, pl.UInt16, pl.UInt32)
# Integer types with values that Int64 does not hold.
_WIDER_THAN_INT64: frozenset[pl.DataType] = frozenset({pl.UInt64(), pl.Int128(), pl.UInt128()})


def is_text(dtype: pl.DataType) -> bool:
    """Whether a column of ``dtype`` holds text: String, Categorical or Enum."""
    return isinstance(dtype, TEXT_TYPES)


def is_category(dtype: pl.DataType) -> bool:
    """Whether a column of ``dtype`` holds text as codes (Categorical, Enum)."""
    return isinstance(dtype, CATEGORY_TYPES)


def as_text_if_category(column: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """``column`` as its text when ``dtype`` is a category, so that hashes and joins do not
    depend on codes; as it is otherwise."""
    return column.cast(pl.String) if is_category(dtype) else column


def common_key_type(
    lname: str, ltype: pl.DataType, rname: str, rtype: pl.DataType
) -> pl.DataType | None:
    """None for equal types; Int64 for two integer types (csv reads UInt32 ids as Int64);
    String for two text types; otherwise a SchemaError naming both keys."""
    if ltype == rtype:
        return None
    if ltype.is_integer() and rtype.is_integer() and pl.UInt64 not in (ltype, rtype):
        return pl.Int64()
    if is_text(ltype) and is_text(rtype):
        return pl.String()
    msg = f"key {lname!r} of originals is {ltype} but key {rname!r} of avatars is {rtype}"
    raise SchemaError(msg)


def common_feature_type(
    name: str, left: pl.DataType, right: pl.DataType, role: str = "avatars"
) -> pl.DataType | None:
    """The type both sides of feature ``name`` are compared in (None: as they are).

    Unlike a key (`common_key_type`), a feature is compared by value: text as String
    (categories by their text), integers as Int64 where it holds both, other numbers as
    Float64 (where `inexact_values` guards the comparison). ``right`` is of the ``role`` set
    (the avatars, a synthetic set, a holdout), which the message names.
    """
    if is_text(left) and is_text(right):
        return None if left == right == pl.String else pl.String()
    if left == right:
        return None
    if left.is_integer() and right.is_integer() and not {left, right} & _WIDER_THAN_INT64:
        return pl.Int64()
    if left.is_numeric() and right.is_numeric():
        return pl.Float64()
    msg = (
        f"feature {name!r} is {left} in originals but {right} in {role}; "
        "cast one side to the other's type first"
    )
    raise SchemaError(msg)


def inexact_values(column: pl.Expr, dtype: pl.DataType) -> pl.Expr | None:
    """Where float64 does not hold a value of ``dtype`` faithfully (a boolean expression of
    ``column``), or None when it holds every value of that type.

    The one exact-number rule, for every numeric type: an integer (of any width, signed or
    not, or a Decimal of scale 0) must lie within 2^53 in magnitude, where float64 holds every
    integer exactly; a decimal fraction is read as its nearest float64, as a decimal text is,
    and must come back from it, so that no two values of its type become one float64. Floats
    are float64 already (Float32 widens exactly).
    """
    if isinstance(dtype, pl.Decimal):
        digits = 38 if dtype.precision is None else dtype.precision
        if digits <= _FLOAT64_DIGITS:
            return None
        if dtype.scale != 0:
            back = column.cast(pl.Float64).cast(dtype, strict=False)
            return back.ne_missing(column)
    elif not dtype.is_integer() or dtype in _SMALL_INTEGERS:
        return None
    # Two comparisons, not abs(): abs of Int64's smallest value overflows.
    return (column > EXACT_INTEGER_LIMIT) | (column < -EXACT_INTEGER_LIMIT)
