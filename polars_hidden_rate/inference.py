"""The attribute inference attack's figures, from coordinate arrays and secret values.

An attacker holds the synthetic set and the ``known`` attributes of a target, a real
record, and guesses its ``secret`` attribute: the secret of the synthetic record nearest
to the target on the known attributes (anonymeter's inference evaluator, Giomi et al.,
PoPETs 2023). The guess is right when it equals the secret (a categorical secret) or lies
within ``tolerance * |secret|`` of it (a numeric one). Run against the originals (the
generator's training records, the members) and against a holdout of the same population
that the generator never saw (the control), the excess of the first success over the
second is what the synthetic set gives away about its own training records; what it
gives about any record of the population is the control's.

- Ties are shared: when several synthetic records are nearest, a guess drawn at random
  among them is right with probability ``matching / tied``, and that is the target's
  success, whatever the records' order (anonymeter takes the first). A record is tied
  nearest when its squared distance is at most the nearest's times ``1 + tie_tol``; both
  counts are exact in float64 (`tied_matches`), and the successes sum fractions (correctly
  rounded, `math.fsum`).
- Rates are Wilson's centres with their normal errors at ``confidence`` (anonymeter's
  ``success_rate``); the risk is ``(members - control) / (1 - control)``, its error
  propagated to first order (anonymeter's ``residual_success``), then both cut to [0, 1]
  (``bind_value``).

Arrays in, values out: no frames here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import invariant
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import KdTree
from polars_hidden_rate.engine.nearest import tied_matches
from polars_hidden_rate.engine.scale import canonical_scale

SecretKind = Literal["auto", "categorical", "numeric"]
"""How a secret is guessed: ``"categorical"`` (right when equal), ``"numeric"`` (right within
the tolerance), or ``"auto"``: numeric for number columns, categorical otherwise."""

DEFAULT_TOLERANCE = 0.05
"""A numeric guess is right within this share of the secret's magnitude (anonymeter's)."""


@dataclass(frozen=True)
class SuccessRate:
    """An attack's success rate on ``records`` targets, as anonymeter estimates it.

    Attributes
    ----------
    successes
        The expected number of right guesses (ties shared), a sum of fractions.
    records
        The number of targets.
    rate, error
        Wilson's centre and half-width at ``confidence``:
        ``(s + z^2/2) / (n + z^2)`` and ``z / (n + z^2) * sqrt(s (n - s) / n + z^2 / 4)``.
    """

    successes: float
    records: int
    rate: float
    error: float

    @classmethod
    def wilson(cls, successes: float, records: int, confidence: float) -> SuccessRate:
        z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
        z2 = z * z
        denominator = records + z2
        rate = (successes + 0.5 * z2) / denominator
        spread = successes * (records - successes) / records
        return cls(successes, records, rate, z / denominator * math.sqrt(spread + 0.25 * z2))

    def to_dict(self) -> dict[str, float | int]:
        return {
            "successes": self.successes,
            "records": self.records,
            "share": self.successes / self.records,
            "rate": self.rate,
            "error": self.error,
        }


@dataclass(frozen=True)
class InferenceRisk:
    """The attribute inference attack on a synthetic set, with the holdout as its control.

    Attributes
    ----------
    risk
        ``(members.rate - control.rate) / (1 - control.rate)``, cut to [0, 1]: 0 when the
        synthetic set tells no more about its training records than about any record of the
        population, 1 when it gives every training record's secret away.
    risk_interval
        The risk plus and minus its propagated error, cut to [0, 1].
    members, control
        The attack's success on the originals and on the holdout (`SuccessRate`).
    members_success, control_success
        Each target's chance of a right guess (``matching / tied``), in its set's order.
    synthetic
        The size of the synthetic set.
    secret_kind
        ``"categorical"`` or ``"numeric"``: how the guesses were judged.
    tolerance
        The share of a numeric secret's magnitude a right guess may miss it by (0 when
        categorical).
    confidence
        The level of the rates' errors and of ``risk_interval``.
    known, secret
        The attributes the attacker knows and the one guessed (empty when computed from
        arrays).
    ncp
        The components of the known attributes' projection the distances used: ``"all"``
        (the default of [`inference_risk`][polars_hidden_rate.inference_risk]) or a number.
    categorical
        The known attributes projected as categories (empty when computed from arrays).
    tie_tol
        The relative tolerance within which a record ties with the nearest.
    """

    risk: float
    risk_interval: tuple[float, float]
    members: SuccessRate
    control: SuccessRate
    members_success: Float64Array
    control_success: Float64Array
    synthetic: int
    secret_kind: Literal["categorical", "numeric"]
    tolerance: float
    confidence: float = 0.95
    known: tuple[str, ...] = ()
    secret: str = ""
    ncp: int | str = "all"
    categorical: tuple[str, ...] = ()
    tie_tol: float = 1e-9

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        secrets: tuple[Float64Array, Float64Array, Float64Array],
        *,
        secret_kind: Literal["categorical", "numeric"],
        tolerance: float = DEFAULT_TOLERANCE,
        tie_tol: float = 1e-9,
        threads: int | None = None,
        confidence: float = 0.95,
    ) -> InferenceRisk:
        """Attack the originals and the holdout from the synthetic set: one scale for the
        three coordinate arrays (the known attributes' space), one kd-tree of the synthetic
        records. ``secrets`` are the three sets' secret values as float64 (categories as
        codes shared by the three, a missing value as NaN)."""
        if not 0.0 < confidence < 1.0:
            msg = f"`confidence` must lie in (0, 1), got {confidence!r}"
            raise ValueError(msg)
        if secret_kind == "categorical":
            tolerance = 0.0
        elif not (math.isfinite(tolerance) and tolerance >= 0.0):
            msg = f"`tolerance` must be a finite number at least 0, got {tolerance!r}"
            raise ValueError(msg)
        (points, members, others), _ = canonical_scale(
            synthetic, originals, holdout, names=("synthetic", "originals", "holdout")
        )
        for name, values, rows in zip(
            ("originals", "synthetic", "holdout"),
            secrets,
            (originals, synthetic, holdout),
            strict=True,
        ):
            invariant(values.shape == (len(rows),), f"one secret per record of {name}")
        for name, rows in (("synthetic", points), ("originals", members), ("holdout", others)):
            if len(rows) == 0:
                msg = f"there are no {name} records to attack with or to attack"
                raise ValueError(msg)
        threads = threads or usable_cores()
        tree = KdTree.build(points, threads=threads)
        shares = [
            _success(
                *tied_matches(
                    tree, secrets[1], queries, values, tolerance, tie_tol=tie_tol, threads=threads
                )
            )
            for queries, values in ((members, secrets[0]), (others, secrets[2]))
        ]
        attack, control = (
            SuccessRate.wilson(math.fsum(share), len(share), confidence) for share in shares
        )
        if control.rate >= 1.0:  # only where z rounds to 0: a confidence near 0
            msg = (
                f"the control guessed every secret at confidence={confidence!r}: no residual "
                "risk can be measured; use a usual confidence level such as 0.95"
            )
            raise ValueError(msg)
        residual = (attack.rate - control.rate) / (1.0 - control.rate)
        error = math.hypot(
            attack.error / (1.0 - control.rate),
            control.error * (attack.rate - 1.0) / (1.0 - control.rate) ** 2,
        )
        return cls(
            _unit(residual),
            (_unit(residual - error), _unit(residual + error)),
            attack,
            control,
            shares[0],
            shares[1],
            len(points),
            secret_kind,
            tolerance,
            confidence,
            tie_tol=tie_tol,
        )

    def to_dict(self) -> dict[str, object]:
        """The figures as JSON values."""
        low, high = self.risk_interval
        return {
            "risk": self.risk,
            "risk_interval": [low, high],
            "confidence": self.confidence,
            "members": self.members.to_dict(),
            "control": self.control.to_dict(),
            "synthetic": self.synthetic,
            "known": list(self.known),
            "secret": self.secret,
            "ncp": self.ncp,
            "categorical": list(self.categorical),
            "tie_tol": self.tie_tol,
            "secret_kind": self.secret_kind,
            "tolerance": self.tolerance,
        }


def _success(tied: np.ndarray, matching: np.ndarray) -> Float64Array:
    share: Float64Array = matching / tied
    return share


def _unit(value: float) -> float:
    return min(max(value, 0.0), 1.0)
