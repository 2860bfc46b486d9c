"""The inference attack's secret: how it is judged (by equality or within a tolerance) and its
values in the three sets as float64, categories coded alike in all three."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import polars as pl
from polars.exceptions import ComputeError, SchemaError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.frames import (
    common_feature_type,
    inexact_counts,
    is_text,
    raise_inexact,
    raise_unseen,
)
from polars_hidden_rate.frames.text_numbers import notation, text_numbers_example

SecretKind = Literal["auto", "categorical", "numeric"]
"""How a guessed secret is judged: by equality, within a tolerance, or by its type."""


def check_attack(names: Sequence[str], secret: object) -> None:
    """The secret against the known names, which `resolve_columns` (or `check_known`) has
    already checked: present, none twice, at least one."""
    if not isinstance(secret, str):
        msg = f"`secret` must be one column name, got {secret!r}"
        raise TypeError(msg)
    if secret in names:
        msg = f"secret {secret!r} is among the known columns: the attacker would know it"
        raise ValueError(msg)


def secret_kind_of(
    secret: str,
    originals: pl.DataType,
    synthetic: pl.DataType,
    asked: SecretKind,
    *,
    declared: bool = False,
) -> Literal["categorical", "numeric"]:
    """How the secret is judged; a SchemaError where its types cannot be compared so.

    Under ``"auto"``, a secret ``declared`` categorical (named in ``categorical``, or chosen
    by ``categorical="auto"``) is judged by equality, as any column that is not a number; a
    ``secret_kind`` asked for is taken as asked."""
    try:
        common_feature_type(secret, originals, synthetic)
    except SchemaError:
        msg = (
            f"secret {secret!r} is {originals} in originals but {synthetic} in synthetic; "
            "cast one side to the other's type first"
        )
        raise SchemaError(msg) from None
    numbers = originals.is_numeric() and synthetic.is_numeric()
    if asked == "numeric" and not numbers:
        msg = (
            f"secret {secret!r} is {originals} in originals and {synthetic} in synthetic: "
            "secret_kind='numeric' needs numbers"
        )
        raise SchemaError(msg)
    if asked == "auto":
        return "numeric" if numbers and not declared else "categorical"
    return asked


def secret_values(
    read: dict[str, pl.DataFrame],
    secret: str,
    kind: Literal["categorical", "numeric"],
    *,
    chosen: bool,
) -> tuple[Float64Array, Float64Array, Float64Array]:
    """The three sets' secrets as float64, in the order of their coordinates: numbers as
    they are, categories as codes shared by the three sets; a missing value as NaN. Text
    whose every value is a number (``'1.5'``, ``'3'``, ``'1,5'``) is refused unless the kind
    was ``chosen``: judged as text, ``'3'`` and ``'3.0'`` differ and no tolerance applies."""
    columns = [frame.get_column(secret) for frame in read.values()]
    dtypes = [column.dtype for column in columns]
    if kind == "numeric" or (len(set(dtypes)) > 1 and not all(map(is_text, dtypes))):
        # Compared as float64, which must hold every value.
        for (role, frame), column in zip(read.items(), columns, strict=True):
            wanted = {secret: column.dtype}
            raise_inexact(inexact_counts(frame, wanted), wanted, "secret", role)
    if kind == "numeric":
        return tuple(  # type: ignore[return-value]
            column.cast(pl.Float64).fill_null(float("nan")).to_numpy() for column in columns
        )
    if all(is_text(dtype) for dtype in dtypes):
        columns = [column.cast(pl.String) for column in columns]
        if not chosen:
            _refuse_text_numbers(secret, columns[0].drop_nulls().unique().sort().to_list())
    elif len(set(dtypes)) > 1:
        columns = [column.cast(pl.Float64) for column in columns]
    # Coded as the originals are (the rule of recoded categories): a holdout's secret written
    # YES/NO against yes/no would make the control never right.
    known = columns[0].drop_nulls().unique()
    for role, column in zip(list(read)[1:], columns[1:], strict=True):
        values = column.drop_nulls()
        unseen = values.filter(~values.is_in(known.implode()))
        examples = unseen.unique().sort().head(3).to_list()
        raise_unseen(secret, role, unseen.len(), len(column), examples, what="secret")
    codes = pl.concat(columns).rank("dense").cast(pl.Float64).fill_null(float("nan")).to_numpy()
    ends = np.cumsum([len(column) for column in columns])
    return codes[: ends[0]], codes[ends[0] : ends[1]], codes[ends[1] :]


def _refuse_text_numbers(secret: str, values: list[str]) -> None:
    """Refuse a text secret whose every value is a number, in any notation (ComputeError
    naming an example and both fixes)."""
    if not values or any(notation(value) is None for value in values):
        return
    found = text_numbers_example(values)
    if found is None:
        example, written = values[0], ""
    else:
        example, how = found
        written = f" written with {' and '.join(how)}"
    msg = (
        f"secret {secret!r} of originals is text but every value is a number{written}, e.g. "
        f"{example!r}: cast it to a number (pl.col({secret!r}).cast(pl.Float64)) to judge it "
        "within the tolerance, or pass secret_kind='categorical' to compare the texts"
    )
    raise ComputeError(msg)
