"""The DCR measures read in two spaces (`SpaceComparison`): the package's projected space and
SDMetrics' own distance (`polars_hidden_rate.measures.sdmetrics_space`), side by side, with
a flag where their verdicts differ."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from polars_hidden_rate.measures.baseline import DcrBaseline
from polars_hidden_rate.measures.overfitting import DcrOverfitting

SPACE_WORDS = {"projected": "the package's space", "sdmetrics": "SDMetrics' space"}
SHORT_WORDS = {"projected": "package", "sdmetrics": "SDMetrics"}


@dataclass(frozen=True)
class SpaceComparison:
    """The DCR overfitting protection (with a holdout) and the DCR baseline protection (when
    asked) in the projected space and in SDMetrics', and their verdicts.

    Attributes
    ----------
    overfitting
        By space (``"projected"``, ``"sdmetrics"``); empty without a holdout.
    baseline
        By space; empty unless the DCR baseline protection was asked.
    target
        The DCR overfitting protection's target (at least), None without one.
    passed
        Its verdict by space: the score against ``target``; without one, whether the
        score is 1 (no more synthetic records closer to the training set than chance).
    """

    overfitting: dict[str, DcrOverfitting]
    baseline: dict[str, DcrBaseline]
    target: float | None
    passed: dict[str, bool]

    @classmethod
    def of(
        cls,
        overfitting: dict[str, DcrOverfitting],
        baseline: dict[str, DcrBaseline],
        target: float | None,
        meets: Callable[[float, float], bool],
    ) -> SpaceComparison:
        """The comparison, each space's overfitting score judged by ``meets(score, target)``
        (or read as 1 or not, without a target)."""
        passed = {
            space: found.score == 1.0 if target is None else meets(found.score, target)
            for space, found in overfitting.items()
        }
        return cls(overfitting, baseline, target, passed)

    @property
    def differs(self) -> bool:
        """Whether the overfitting's verdict differs between the two spaces."""
        return len(set(self.passed.values())) > 1

    def message(self) -> str | None:
        """The flag's words where the verdicts differ; None where they agree."""
        if not self.differs:
            return None
        words = {
            space: ("passes" if ok else "fails")
            if self.target is not None
            else ("reads no overfitting" if ok else "reads overfitting")
            for space, ok in self.passed.items()
        }
        against = "" if self.target is None else f" (target at least {self.target:g})"
        return (
            f"the DCR overfitting protection{against} "
            + " but ".join(f"{words[space]} in {SPACE_WORDS[space]}" for space in words)
            + ": the verdict depends on the distance"
        )

    def rows(self) -> list[tuple[str, str]]:
        """One line per measure and space, then the flag where the verdicts differ."""
        rows = []
        for space, found in self.overfitting.items():
            rows.append(
                (
                    f"DCR overfitting ({SHORT_WORDS[space]})",
                    f"{found.score:.4f} ({100 * found.closer_to_training:.2f} % of synthetic "
                    "records closer to the originals; SDMetrics' rule "
                    f"{found.sdmetrics_score:.4f})",
                )
            )
        for space, baseline in self.baseline.items():
            score = "undefined" if math.isnan(baseline.score) else f"{baseline.score:.4f}"
            rows.append((f"DCR baseline ({SHORT_WORDS[space]})", score))
        flag = self.message()
        if flag is not None:
            rows.append(("  warning", flag))
        return rows

    def to_dict(self) -> dict[str, Any]:
        """``dcr_overfitting_protection`` and ``dcr_baseline_protection`` by space (each
        measure's own entry, None where not measured), the overfitting's ``target``,
        ``passed`` by space and ``differs``."""
        return {
            "dcr_overfitting_protection": {
                space: found.to_dict() for space, found in self.overfitting.items()
            }
            or None,
            "dcr_baseline_protection": {
                space: found.to_dict() for space, found in self.baseline.items()
            }
            or None,
            "target": self.target,
            "passed": self.passed or None,
            "differs": self.differs,
        }
