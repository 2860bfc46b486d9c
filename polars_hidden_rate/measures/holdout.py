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

from dataclasses import dataclass

import polars as pl
from polars.exceptions import SchemaError

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.frames import (
    as_lazy,
)
from polars_hidden_rate.plan import CountOptions, CountPlan, plan


def check_holdout(originals: pl.Schema, holdout: pl.Schema) -> None:
    """Refuse a holdout whose columns or types are not the originals': it would not be a
    sample of the same population's records, as the control needs."""
    missing = [name for name in originals.names() if name not in holdout]
    extra = [name for name in holdout.names() if name not in originals]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"lacks {', '.join(map(repr, missing[:5]))}")
        if extra:
            parts.append(f"holds {', '.join(map(repr, extra[:5]))}, which the originals do not")
        msg = f"holdout must hold the originals' columns, and only them: it {' and '.join(parts)}"
        raise SchemaError(msg)
    for name, dtype in originals.items():
        if holdout[name] != dtype:
            msg = (
                f"holdout column {name!r} is {holdout[name]}, but the originals' is {dtype}: "
                "a holdout holds records of the same table"
            )
            raise SchemaError(msg)


@dataclass(frozen=True)
class HoldoutSpace:
    """The originals, the synthetic records and the holdout, as coordinate arrays of one
    space (the plan's), read at once."""

    originals: Float64Array
    synthetic: Float64Array
    holdout: Float64Array
    threads: int | None

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
        return cls(
            space.coordinates_of(space.originals, "originals"),
            space.coordinates_of(space.avatars, "synthetic"),
            space.coordinates_of(as_lazy(holdout, "holdout"), "holdout"),
            request.threads,
        )


def holdout_plan(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    caller: str,
) -> CountPlan:
    if options.get("cluster") is not None or options.get("device", "cpu") != "cpu":
        msg = (
            f"{caller}() runs on this machine's CPU: drop `cluster` and `device` (its exact "
            "nearest-record walks have no cluster or GPU path yet)"
        )
        raise NotImplementedError(msg)
    check_holdout(
        as_lazy(originals, "originals").collect_schema(),
        as_lazy(holdout, "holdout").collect_schema(),
    )
    return plan(originals, synthetic, options, caller=caller)
