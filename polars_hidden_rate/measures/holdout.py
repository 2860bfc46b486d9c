"""The holdout: real records of the same population that the generator never saw, the
control that tells an attack's success from what any synthetic set of that population gives.
Its checks (the originals' columns and types) and the read of the originals, the synthetic
records and the holdout into one space.

The measures against a holdout ([`membership_risk`][polars_hidden_rate.membership_risk],
[`dcr_overfitting_protection`][polars_hidden_rate.dcr_overfitting_protection],
[`inference_risk`][polars_hidden_rate.inference_risk]) measure in the space of
[`local_cloaking`][polars_hidden_rate.local_cloaking]: the projection fitted on the originals
(the training records) or the ``coords`` given, with the synthetic records and the holdout
transformed by that same fitted model. No link is needed, and the three sets may have any
sizes.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection
from dataclasses import dataclass

import polars as pl
from polars.exceptions import SchemaError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.frames import as_lazy, common_feature_type, overlapping_rows
from polars_hidden_rate.plan import CountOptions, CountPlan, plan, require_cpu


def check_holdout(originals: pl.Schema, holdout: pl.Schema, keys: Collection[str] = ()) -> None:
    """Refuse a holdout whose columns are not the originals' (less the link's ``keys``, never
    read from a holdout), or of types the avatars' would be refused in: it would not be a
    sample of the same population's records, as the control needs. The types are the
    avatars' rule (`common_feature_type`): integers against floats, an Enum in another
    order, Categorical against String are compared by value, as they are for the avatars."""
    needed = [name for name in originals.names() if name not in keys]
    missing = [name for name in needed if name not in holdout]
    extra = [name for name in holdout.names() if name not in originals]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"lacks {', '.join(map(repr, missing[:5]))}")
        if extra:
            parts.append(f"holds {', '.join(map(repr, extra[:5]))}, which the originals do not")
        msg = f"holdout must hold the originals' columns, and only them: it {' and '.join(parts)}"
        raise SchemaError(msg)
    for name in needed:
        dtype = originals[name]
        try:
            common_feature_type(name, dtype, holdout[name], "holdout")
        except SchemaError:
            msg = (
                f"holdout column {name!r} is {holdout[name]}, but the originals' is {dtype}: "
                "a holdout holds records of the same table"
            )
            raise SchemaError(msg) from None


class HoldoutOverlapWarning(UserWarning):
    """Records of the holdout are exact copies of originals: the control is then partly the
    training set, and the membership AUC and the overfitting protection move towards "no
    risk" (half the holdout copied: an AUC of 1.0 reads 0.75, a protection of 0 reads 1.0)."""


def holdout_overlap(
    originals: pl.LazyFrame, holdout: pl.LazyFrame, keys: Collection[str] = ()
) -> str | None:
    """The warning's words when more records of ``holdout`` equal an original exactly (on
    every column but the link's ``keys``, missing values equal) than a sample of the same
    table shares by chance: a larger share than the originals' own share of records equal to
    another original (WBCD's real holdout shares 35 % with its originals, which repeat 42 %
    of theirs: no warning). None otherwise; issued as a `HoldoutOverlapWarning` by the
    measures, printed on stderr by the command line."""
    copies, rows, chance = overlapping_rows(originals, holdout, exclude=keys)
    if not copies or copies / rows <= chance:
        return None
    return (
        f"{copies} of the holdout's {rows} records ({100 * copies / rows:.1f} %) are exact "
        f"copies of originals, which repeat {100 * chance:.1f} % of theirs: a holdout must be "
        "records the generator never saw, or the holdout measures read as less risk than "
        "there is"
    )


def warn_holdout_overlap(
    originals: pl.LazyFrame, holdout: pl.LazyFrame, keys: Collection[str] = ()
) -> None:
    """Issue `HoldoutOverlapWarning` when records of ``holdout`` are copies of originals."""
    words = holdout_overlap(originals, holdout, keys)
    if words is not None:
        warnings.warn(words, HoldoutOverlapWarning, stacklevel=4)


@dataclass(frozen=True)
class HoldoutSpace:
    """The originals, the synthetic records and the holdout, as coordinate arrays of one
    space (the plan's), read at once, with the plan's threads and ``tie_tol`` (the rounding
    allowance of every comparison of two distances)."""

    originals: Float64Array
    synthetic: Float64Array
    holdout: Float64Array
    threads: int | None
    tie_tol: float

    @classmethod
    def read(
        cls,
        originals: pl.DataFrame | pl.LazyFrame,
        synthetic: pl.DataFrame | pl.LazyFrame,
        holdout: pl.DataFrame | pl.LazyFrame,
        options: CountOptions,
        caller: str,
    ) -> HoldoutSpace:
        """Check the request (the holdout's schema first, before anything is read), fit the
        projection on the originals, and read the three sets in its space."""
        request = holdout_plan(originals, synthetic, holdout, options, caller)
        space = request.fitted()
        held_out = as_lazy(holdout, "holdout")
        warn_holdout_overlap(space.originals, held_out, space.link.left)
        return cls(
            space.coordinates_of(space.originals, "originals"),
            space.coordinates_of(space.avatars, "synthetic"),
            space.coordinates_of(held_out, "holdout"),
            request.threads,
            request.tie_tol,
        )


def holdout_plan(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    caller: str,
) -> CountPlan:
    """The plan of a measure against a holdout: on this machine's CPU (`require_cpu`), the
    holdout's schema checked before the rest (`check_holdout`)."""
    require_cpu(options, caller)
    check_holdout(
        as_lazy(originals, "originals").collect_schema(),
        as_lazy(holdout, "holdout").collect_schema(),
        _named_keys(options),
    )
    return plan(originals, synthetic, options, caller=caller)


def _named_keys(options: CountOptions) -> tuple[str, ...]:
    """The originals' key columns ``options`` name (``on``, ``left_on``), read from no frame:
    a holdout need not hold them, its records being linked to nothing."""
    keys = options.get("on")
    if keys is None:
        keys = options.get("left_on")
    if isinstance(keys, str):
        return (keys,)
    if isinstance(keys, list | tuple) and all(isinstance(key, str) for key in keys):
        return tuple(keys)
    return ()
