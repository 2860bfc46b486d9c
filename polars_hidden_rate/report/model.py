"""The report's value (`ReportModel`): the metrics measured, their targets, the per-record
values behind them, and the verdicts they make. Data only: its sections
(`polars_hidden_rate.report.sections`) and its renderings
([`PrivacyReport`][polars_hidden_rate.PrivacyReport]) import it, never the reverse."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, Self

import numpy as np

from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.checks import known
from polars_hidden_rate.link.verdict import Evidence
from polars_hidden_rate.measures.baseline import DcrBaseline
from polars_hidden_rate.measures.correlation import CorrelationProtection
from polars_hidden_rate.measures.digits import p_text
from polars_hidden_rate.measures.holdout_figures import HoldoutFigures
from polars_hidden_rate.measures.linkability import LinkabilityRisk
from polars_hidden_rate.measures.membership import MIN_RECORDS
from polars_hidden_rate.measures.singling_out import SinglingOutRisk
from polars_hidden_rate.measures.spaces import SpaceComparison
from polars_hidden_rate.report.targets import (
    LINKED_METRICS,
    METRICS,
    NO_PUBLIC_DEFINITION,
    NOT_MEASURED,
    REFERENCE_METRICS,
    TARGET_OFF,
    UNDEFINED_METRICS,
    Targets,
    check_targets,
    meets,
)

LinkUse = Literal["judged", "not judged", "absent"]
"""What a report makes of the measures that need a one-avatar-per-original link
(`LINKED_METRICS`, the own copies): ``"judged"`` (the link test found the link, or had too
few records to test it), ``"not judged"`` (measured on a link the test refuses, because
``allow_unlinked`` said so: shown, never counted toward a pass, and the report never passes),
``"absent"`` (the test refuses the link, or the synthetic set has another height than the
originals' and no key: not applicable, no value, the verdict is that of the measures that
need no link)."""


def _no_counts() -> CountArray:
    return np.zeros(0, dtype=np.int64)


def _no_values() -> Float64Array:
    return np.zeros(0, dtype=np.float64)


@dataclass(frozen=True)
class ReportModel:
    """The values of a [`PrivacyReport`][polars_hidden_rate.PrivacyReport] (its attributes are
    documented there) and the verdicts they make, without its renderings."""

    n: int
    n_hidden: int
    hidden_rate: float
    hidden_rate_low: float
    hidden_rate_high: float
    confidence: float
    local_cloaking_median: float
    distance_to_closest_median: float
    closest_distances_ratio_median: float
    row_direct_match_protection: float
    targets: Targets = field(default_factory=lambda: check_targets(None))
    space: str = ""
    local_cloaking: CountArray = field(default_factory=_no_counts, repr=False, compare=False)
    distance_to_closest: Float64Array = field(default_factory=_no_values, repr=False, compare=False)
    closest_distances_ratio: Float64Array = field(
        default_factory=_no_values, repr=False, compare=False
    )
    evidence: Evidence | None = field(default=None, compare=False)
    provenance: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )
    holdout: HoldoutFigures | None = field(default=None, compare=False)
    correlation_protection: CorrelationProtection | None = None
    linkability: LinkabilityRisk | None = field(default=None, compare=False)
    singling_out: SinglingOutRisk | None = field(default=None, compare=False)
    dcr_baseline: DcrBaseline | None = field(default=None, compare=False)
    space_comparison: SpaceComparison | None = field(default=None, compare=False)
    max_own_copies: float | None = field(default=None, compare=False)
    link_use: LinkUse = field(default="judged", compare=False)
    overrides: Mapping[str, bool] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )
    reference_row_direct_match_protection: float | None = field(default=None, compare=False)
    n_synthetic: int | None = field(default=None, compare=False)

    @property
    def other_size(self) -> bool:
        """Whether the synthetic set has another height than the originals' (no link)."""
        return self.n_synthetic is not None and self.n_synthetic != self.n

    warnings: tuple[str, ...] = field(default=(), compare=False)

    def with_warnings(self, messages: Iterable[str]) -> Self:
        """This report with the warnings raised while it was measured (the command line's:
        it never prints a Python warning its own way), each once: `sections` shows those
        no measure shows already."""
        return replace(self, warnings=tuple(dict.fromkeys(messages)))

    def with_provenance(self, provenance: Mapping[str, Any]) -> Self:
        """This report, stating what it measured (`polars_hidden_rate.provenance`)."""
        return replace(self, provenance=MappingProxyType(dict(provenance)))

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", check_targets(self.targets))

    @property
    def values(self) -> dict[str, float]:
        """The value of each metric of [`METRICS`][polars_hidden_rate.report.METRICS]."""
        return {name: float(getattr(self, name)) for name in METRICS}

    @property
    def references(self) -> dict[str, float]:
        """With a holdout, the holdout's own figure against the originals of each metric of
        `REFERENCE_METRICS` (real records the generator never saw, measured as the release
        is); empty without one."""
        figures = self.holdout
        if figures is None:
            return {}
        found = {
            "distance_to_closest_median": figures.reference_distance_to_closest_median,
            "closest_distances_ratio_median": figures.reference_closest_distances_ratio_median,
            "row_direct_match_protection": self.reference_row_direct_match_protection,
        }
        return {
            name: float(value) for name in REFERENCE_METRICS if (value := found[name]) is not None
        }

    @property
    def reference_checks(self) -> dict[str, bool]:
        """Whether each reference (`references`) meets the metric's target, as the release
        must: real records the generator never saw judged by the same rule."""
        targets = self.targets
        return {
            name: meets(name, value, target)
            for name, value in self.references.items()
            if (target := targets[name]) is not None
        }

    def judged_against(self, name: str) -> float | None:
        """What the metric ``name`` of [`METRICS`][polars_hidden_rate.report.METRICS] is
        judged against: its target, or the holdout's own figure (`references`) where that
        fails the target (the release then passes when at least as protective as real
        records the generator never saw); None where its target is off."""
        if self.reference_checks.get(name) is False:
            return self.references[name]
        return self.targets[name]

    @property
    def checks(self) -> dict[str, bool]:
        """Whether each metric with a target is strictly above it, or where judged against
        the holdout's own figure (`judged_against`), at least that."""
        found, by_reference = {}, self.reference_checks
        for name, value in self.values.items():
            bound = self.judged_against(name)
            if bound is not None:
                against_reference = by_reference.get(name) is False
                found[name] = value >= bound if against_reference else value > bound
        return found

    @property
    def release_checks(self) -> dict[str, bool]:
        """Whether each metric measured beside [`METRICS`][polars_hidden_rate.report.METRICS] is
        strictly above its target: the correlation protection rate, when measured and given a
        target."""
        target = self.targets["correlation_protection_rate"]
        if self.correlation_protection is None or target is None:
            return {}
        return {"correlation_protection_rate": self.correlation_protection.rate > target}

    @property
    def own_copies_check(self) -> dict[str, bool]:
        """Whether the own copies are at most ``max_own_copies`` percent, the gate's rule
        (`Evidence.copies_exceed`): empty where not judged (no limit, not compared, or no
        link to judge them by)."""
        evidence = self.evidence
        if (
            self.max_own_copies is None
            or evidence is None
            or evidence.own_copies_percent is None
            or self.link_use != "judged"
        ):
            return {}
        return {"own_copies_percent": not evidence.copies_exceed(self.max_own_copies)}

    @property
    def holdout_values(self) -> dict[str, float]:
        """The value of each measure of `HOLDOUT_METRICS` the report took (none without a
        holdout; the inference risk only with the attack)."""
        figures = self.holdout
        if figures is None:
            return {}
        values = {
            "membership_auc": figures.membership.auc,
            "dcr_overfitting_protection": figures.overfitting.score,
        }
        if figures.inference is not None:
            values["inference_risk"] = figures.inference.risk
        linkability = getattr(figures, "linkability", None) or getattr(self, "linkability", None)
        if linkability is not None:
            values["linkability_risk"] = linkability.risk
        if self.singling_out is not None:
            values["singling_out_risk"] = self.singling_out.risk
        return {name: float(value) for name, value in values.items()}

    @property
    def not_judged(self) -> dict[str, str]:
        """Why a measure against the holdout that the report took is not judged, by name:
        its target is off, or the holdout is too small to judge it (the membership
        figures' `MembershipRisk.interval_warnings`, the DCR overfitting's small holdout,
        an attack on fewer than `MIN_RECORDS` records on a side)."""
        figures, why = self.holdout, {}
        if figures is None:
            return {}
        small = {}
        if figures.membership.interval_warnings:
            small["membership_auc"] = "its interval cannot be read at its level (the warning)"
        if figures.overfitting.small_holdout:
            small["dcr_overfitting_protection"] = (
                "it holds under half as many records as the training set (the warning)"
            )
        attacks = {
            "inference_risk": figures.inference,
            "linkability_risk": self.linkability,
            "singling_out_risk": self.singling_out,
        }
        for name, attack in attacks.items():
            sizes = () if attack is None else (attack.members.records, attack.control.records)
            if sizes and min(sizes) < MIN_RECORDS:
                small[name] = (
                    f"the attack rests on {sizes[0]:,} training and {sizes[1]:,} holdout "
                    f"records (fewer than {MIN_RECORDS} on a side): its rates' normal "
                    "interval cannot be read at its level"
                )
        for name in self.holdout_values:
            if self.targets[name] is None:
                why[name] = TARGET_OFF
            elif name in small:
                why[name] = f"not judged: the holdout is too small to judge it: {small[name]}"
        return why

    @property
    def holdout_checks(self) -> dict[str, bool]:
        """Whether each measure of `HOLDOUT_METRICS` the report took meets its target in its
        direction (``membership_auc`` at most, ``dcr_overfitting_protection`` at least, ...),
        on its point estimate; those `not_judged` are left out."""
        skipped = self.not_judged
        return {
            name: meets(name, value, known(self.targets[name], "a judged measure's target"))
            for name, value in self.holdout_values.items()
            if name not in skipped
        }

    @property
    def verdicts(self) -> dict[str, bool]:
        """Every check that decides `passed`, by name: the metrics of
        [`METRICS`][polars_hidden_rate.report.METRICS] and the measured correlation protection
        rate (those of `LINKED_METRICS` only where the link is judged, `link_use`), the own
        copies against ``max_own_copies``, and each measure against a holdout given a
        target; and ``link_test``, failed, where a link the test refuses was measured anyway
        (``"not judged"``: a measure on such a link never counts toward a pass, in every
        entry point)."""
        judged = {**self.checks, **self.release_checks}
        if self.link_use != "judged":
            judged = {k: v for k, v in judged.items() if k not in LINKED_METRICS}
        refused = {"link_test": False} if self.link_use == "not judged" else {}
        return {**judged, **self.own_copies_check, **self.holdout_checks, **refused}

    @property
    def passed(self) -> bool:
        """Every check of `verdicts` passed: the metrics of
        [`METRICS`][polars_hidden_rate.report.METRICS] above their targets and, when
        measured, the correlation protection rate, the own copies at most
        ``max_own_copies``, each measure against a holdout given a target. The metrics without
        a public definition never decide it, nor do those that need the link where it is not
        judged (`link_use`); measured on a link the test refuses (``"not judged"``), it
        fails."""
        return all(self.verdicts.values())

    @property
    def link_reason(self) -> str:
        """Why the measures that need the link are not judged (`link_use`); empty where they
        are."""
        if self.link_use == "judged":
            return ""
        link = None if self.evidence is None else self.evidence.link
        figure = (
            ""
            if link is None
            else f" (link test: own avatar closer than a random one for "
            f"{link.closer_share:.1f} %, {p_text(link.p_value)})"
        )
        if self.other_size:
            figure = f" ({self.n_synthetic:,} synthetic records for {self.n:,} originals)"
        if self.link_use == "absent":
            return f"n/a: no one-avatar-per-original link{figure}"
        return f"not judged: the link test refuses the link{figure}, measured with --allow-unlinked"

    @property
    def override_notes(self) -> tuple[str, ...]:
        """What the verdict rests on beyond the checks: a sentence per override that mattered
        (the page's banner, the terminal's first lines)."""
        notes = []
        if self.link_use == "absent":
            why = (
                f"The synthetic set holds {self.n_synthetic:,} records for {self.n:,} "
                "originals, so no one-avatar-per-original link"
                if self.other_size
                else "The link test refuses a one-avatar-per-original link"
            )
            notes.append(
                f"{why}: the hidden rate, the local cloaking, the correlation protection, the "
                "own copies and the records hidden by ties only are not applicable; the "
                "verdict is that of the measures that need no link."
            )
        elif self.link_use == "not judged":
            notes.append(
                "Measured with --allow-unlinked on a link the link test refuses: the hidden "
                "rate, the local cloaking, the correlation protection and the own copies are "
                "shown but never count toward a pass, and the report fails."
            )
        sort = None if self.evidence is None else self.evidence.sorted_link
        if sort is not None and not sort.checked:
            notes.append(
                "Linked by row order with --allow-sorted-link: whether a sort of both files "
                "made the pairing is not checked; every measure that needs the link rests on "
                "that order."
            )
        if self.overrides.get("by_row_order"):
            notes.append(
                "Linked by row order with --by-row-order, although both files hold a key "
                "column: every measure that needs the link rests on that order."
            )
        return tuple(notes)

    def release_table(self) -> dict[str, dict[str, Any]]:
        """The service's metrics beside [`METRICS`][polars_hidden_rate.report.METRICS]: for each,
        ``{"value", "target", "passed", "reason"}``, the value and verdict None (and the
        reason a sentence) where it is not computed; the correlation protection rate adds
        its counts (``known``, ``n``, ``unique``, ``singled_out``, ``hidden_rate``,
        ``tolerance``)."""
        target = self.targets["correlation_protection_rate"]
        measured = self.correlation_protection
        if self.link_use == "absent":  # measured or not: it needs the link
            protection: dict[str, Any] = {
                "value": None,
                "target": target,
                "passed": None,
                "reason": self.link_reason,
            }
        elif measured is not None and target is None:
            protection = {
                **measured.to_dict(),
                "target": None,
                "passed": None,
                "reason": TARGET_OFF,
            }
        elif measured is None:
            protection = {
                "value": None,
                "target": target,
                "passed": None,
                "reason": NOT_MEASURED,
            }
        else:
            judged = self.link_use == "judged"
            protection = {
                **measured.to_dict(),
                "target": target,
                "passed": self.release_checks["correlation_protection_rate"] if judged else None,
                "reason": None if judged else self.link_reason,
            }
        undefined = {
            name: {"value": None, "target": value, "passed": None, "reason": NO_PUBLIC_DEFINITION}
            for name, value in UNDEFINED_METRICS.items()
        }
        return {"correlation_protection_rate": protection, **undefined}
