"""What a report shows of a holdout (`HoldoutFigures`): the membership attack, the DCR
overfitting protection, the holdout's own DCR and NNDR (the Avatar paper's "Reference") and
the inference attack, from the walks they share, and their lines (`HoldoutFigures.rows`);
and the report's count with them (`counts_and_figures`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import check_tie_tol, quoted
from polars_hidden_rate.engine import CountResult
from polars_hidden_rate.engine.nearest import (
    NearestTwo,
    nearest_two,
)
from polars_hidden_rate.engine.scale import (
    canonical_scale,
    exponent_for,
    largest_magnitude,
)
from polars_hidden_rate.frames import (
    Aligned,
)
from polars_hidden_rate.measures.inference import InferenceRisk
from polars_hidden_rate.measures.membership import MembershipRisk
from polars_hidden_rate.measures.overfitting import DcrOverfitting
from polars_hidden_rate.measures.walks import LinkedCloaking, SharedWalks, in_rows
from polars_hidden_rate.plan import CountPlan
from polars_hidden_rate.progress import stage
from polars_hidden_rate.stats import percent


@dataclass(frozen=True)
class HoldoutFigures:
    """What a report shows of a holdout: the membership attack, the DCR overfitting
    protection, and the holdout's own DCR and NNDR against the originals (the Avatar paper's
    "Reference": what real records the generator never saw look like from the originals)."""

    membership: MembershipRisk
    overfitting: DcrOverfitting
    reference_distance_to_closest_median: float
    reference_closest_distances_ratio_median: float
    inference: InferenceRisk | None = None

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
        confidence: float = 0.95,
        tie_tol: float = 1e-9,
    ) -> HoldoutFigures:
        """The figures from the three sets' coordinates (`with_nearest`, less the synthetic
        records' nearest originals)."""
        walks = SharedWalks.of(originals, synthetic, holdout, threads)
        return _figures_of(walks, originals, holdout, confidence, tie_tol)

    @classmethod
    def with_nearest(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
        confidence: float = 0.95,
        overwrite_input: bool = False,
        cloaking: LinkedCloaking | None = None,
        exponent: int = 0,
        tie_tol: float | None = None,
    ) -> tuple[NearestTwo, HoldoutFigures]:
        """The figures and each synthetic record's two nearest originals (a report's DCR and
        NNDR: `nearest_two` of the originals and the synthetic records), from walks they
        share.

        The three arrays are brought to one canonical scale once and each set gets one
        kd-tree (its scaled copy reordered in place, no other copy). The walk of the
        synthetic records through the originals' tree gives both the DCR and the DCR
        overfitting's distances to the training records, and the originals' tree serves
        the holdout's reference DCR too, wherever the scale of the pair that `nearest_two`
        would take is that of the three (else those walk on their own, as before): every
        number is the one the separate functions give, bit for bit.

        With ``overwrite_input``, the caller no longer needs the three arrays: where every
        walk is shared they are scaled and become the trees' points in place (no copy).

        With ``cloaking``, the synthetic records are the originals' avatars (row ``i`` of
        one linked to row ``i`` of the other) and their local cloaking is known: an original
        that no rival hides has its own avatar nearest, so its membership score is that
        ``d2``, and the others' walks start from it (`LinkedCloaking`); with its ``tree``,
        the synthetic records are its points (`counts_and_figures`).

        ``exponent``: the power of two the three arrays were multiplied by already (one
        for all three, as `canonical_scale` gives it); the distances come back in the units
        before it.

        ``tie_tol``: the tie rule of the membership scores and the DCR overfitting's
        comparisons; None: the count's (``cloaking.tie_tol``), else 1e-9.
        """
        if tie_tol is None:
            tie_tol = 1e-9 if cloaking is None else cloaking.tie_tol
        walks = SharedWalks.of(
            originals, synthetic, holdout, threads, overwrite_input, cloaking, given=exponent
        )
        if walks.same_as_dcr:
            found = NearestTwo.from_squared(
                in_rows(walks.synthetic_to_originals(), walks.synthetic), walks.units
            )
        else:
            found = walks.in_units(nearest_two(originals, synthetic, threads=walks.threads))
        return found, _figures_of(walks, originals, holdout, confidence, tie_tol)

    def rows(self) -> list[tuple[str, str]]:
        """The figures as (label, value) lines, for the text and the page of a report."""
        risk = self.membership
        low, high = risk.auc_interval
        level = f"{100 * risk.confidence:g} %"
        return [
            ("holdout records", f"{len(risk.holdout):,}"),
            (
                "membership AUC",
                f"{risk.auc:.4f} ({low:.4f} to {high:.4f}, DeLong {level}; random 0.5)",
            ),
            *(("  warning", why) for why in risk.interval_warnings),
            ("membership TPR at 10 % FPR", f"{100 * risk.tpr_at_fpr(0.1):.2f} % (random 10 %)"),
            *self.overfitting.rows(),
            ("holdout DCR median", f"{self.reference_distance_to_closest_median:.4g}"),
            ("holdout NNDR median", f"{self.reference_closest_distances_ratio_median:.4g}"),
            *([] if self.inference is None else inference_rows(self.inference)),
        ]

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON values: ``membership``, ``dcr_overfitting_protection``,
        ``reference`` (the holdout's ``records``, ``distance_to_closest_median`` and
        ``closest_distances_ratio_median``) and ``inference`` (None unless asked)."""
        return {
            "membership": self.membership.to_dict(),
            "inference": None if self.inference is None else self.inference.to_dict(),
            "dcr_overfitting_protection": self.overfitting.to_dict(),
            "reference": {
                "records": len(self.membership.holdout),
                "distance_to_closest_median": self.reference_distance_to_closest_median,
                "closest_distances_ratio_median": self.reference_closest_distances_ratio_median,
            },
        }


def inference_rows(found: InferenceRisk) -> list[tuple[str, str]]:
    """The attribute inference attack's lines of the holdout's section: the risk, what the
    attacker knows, the right guesses."""
    low, high = found.risk_interval
    level = f"{100 * found.confidence:g} %"
    judged = (
        "equal"
        if found.secret_kind == "categorical"
        else f"within {100 * found.tolerance:g} % of the secret"
    )
    members, control = found.members, found.control
    return [
        (
            f"inference risk on {quoted(found.secret)}",
            f"{found.risk:.4f} ({low:.4f} to {high:.4f}, {level}; 0: no more than on the holdout)",
        ),
        (
            "  attacker knows",
            f"{quoted(found.known)}; a guess is right when {judged}",
        ),
        (
            "  right guesses",
            f"{percent(members.successes, members.records):.2f} % of originals, "
            f"{percent(control.successes, control.records):.2f} % of the holdout (Wilson rates "
            f"{100 * members.rate:.2f} % and {100 * control.rate:.2f} %, which the risk compares)",
        ),
    ]


def counts_and_figures(
    request: CountPlan,
    aligned: Aligned,
    holdout: Float64Array,
    *,
    confidence: float,
) -> tuple[CountResult, NearestTwo, HoldoutFigures]:
    """`CountPlan.result` (with the ``closer`` flags) and `HoldoutFigures.with_nearest` of
    ``aligned`` and the ``holdout`` coordinates, arrays the caller no longer needs, on this
    machine's CPU: the same counts and figures as the two, from fewer copies and trees.

    Where the count's canonical scale is that of the three sets and of each pair the
    separate walks take (``tie_tol`` below 1 and no set with a larger power of two), the
    three arrays are scaled in place once; the count takes them as they are, builds its
    kd-tree of the avatars on their array, and the holdout's walks take that tree rather
    than building it again. Elsewhere the count copies the arrays and the figures scale
    them on their own."""
    originals, avatars = aligned.originals, aligned.avatars
    o_largest, s_largest, h_largest = (
        largest_magnitude(array, name)
        for array, name in ((originals, "originals"), (avatars, "avatars"), (holdout, "holdout"))
    )
    dim = originals.shape[1] if originals.ndim == 2 else 0
    three = exponent_for(max(o_largest, s_largest, h_largest), dim)
    scales = {
        exponent_for(max(o_largest, s_largest), dim, request.tie_tol),  # the count's
        exponent_for(max(o_largest, s_largest), dim),  # the avatars' nearest originals'
        exponent_for(max(o_largest, h_largest), dim),  # the holdout's nearest originals'
    }
    options: dict[str, Any] = {"threads": request.threads, "confidence": confidence}
    if not request.runs_on_cpu or scales != {three}:
        result = request.result(aligned, closer=True)
        cloaking = LinkedCloaking(result.counts, request.tie_tol)
        with stage("nearest records, with the holdout", enabled=request.progress):
            found, figures = HoldoutFigures.with_nearest(
                originals, avatars, holdout, overwrite_input=True, cloaking=cloaking, **options
            )
        return result, found, figures
    (originals, avatars, holdout), _ = canonical_scale(
        originals, avatars, holdout, overwrite_input=True
    )
    # With the count's tree of the avatars, their array reordered into it.
    scaled = replace(aligned, originals=originals, avatars=avatars)
    counted = request.result(scaled, overwrite_input=True, keep_tree=True, closer=True)
    cloaking = LinkedCloaking(counted.counts, request.tie_tol, counted.tree)
    with stage("nearest records, with the holdout", enabled=request.progress):
        found, figures = HoldoutFigures.with_nearest(
            originals,
            avatars,
            holdout,
            overwrite_input=True,
            cloaking=cloaking,
            exponent=three,
            **options,
        )
    return counted, found, figures


def _figures_of(
    walks: SharedWalks,
    originals: Float64Array,
    holdout: Float64Array,
    confidence: float,
    tie_tol: float,
) -> HoldoutFigures:
    """The figures from ``walks``, the arrays as given for a pair that walks on its own."""
    if walks.same_as_reference:
        reference = NearestTwo.from_squared(
            walks.walk(walks.originals, walks.holdout, two=True), walks.units
        )  # in the holdout's tree order: the medians do not depend on it
    else:
        reference = walks.in_units(nearest_two(originals, holdout, threads=walks.threads))
    membership = MembershipRisk(
        in_rows(walks.members_scores(), walks.originals),
        in_rows(walks.walk(walks.synthetic, walks.holdout), walks.holdout),
        len(walks.synthetic.points),
        confidence,
        walks.units,
        check_tie_tol(tie_tol),
    )
    to_training = walks.to_training()
    in_order = np.arange(len(to_training), dtype=np.int64)  # the synthetic tree's own
    overfitting = DcrOverfitting.of_nearest(
        to_training,
        walks.holdout,
        walks.synthetic.points,
        len(walks.originals.points),
        walks.threads,
        rows=in_order,
        tie_tol=tie_tol,
    )
    return HoldoutFigures(
        membership,
        overfitting,
        float(np.median(reference.nearest)),
        float(np.median(reference.ratio)),
    )
