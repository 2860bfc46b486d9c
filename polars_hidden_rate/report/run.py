"""The report's run: the pre-checks, the read, the counts and the distances of a planned
request, each measure once (`privacy_report`, `report_of_plan`)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

import numpy as np
import polars as pl

from polars_hidden_rate._types import Float64Array
from polars_hidden_rate.checks import (
    InvariantError,
    check_confidence,
    check_count,
    check_flag,
    check_seed,
    quoted,
)
from polars_hidden_rate.frames import ColumnSpec, as_lazy, resolve_columns
from polars_hidden_rate.link.verdict import (
    DEFAULT_MAX_OWN_COPIES,
    LINK_OVERRIDES,
    Verdict,
    check_link,
)
from polars_hidden_rate.measures.baseline import DcrBaseline
from polars_hidden_rate.measures.correlation import (
    check_known,
    correlation_protection,
)
from polars_hidden_rate.measures.gower import Space, check_space
from polars_hidden_rate.measures.holdout import (
    HoldoutOverlapWarning,
    check_holdout,
    holdout_overlap,
)
from polars_hidden_rate.measures.holdout_figures import HoldoutFigures, counts_and_figures
from polars_hidden_rate.measures.inference import DEFAULT_TOLERANCE, InferenceAttack
from polars_hidden_rate.measures.linkability import LinkabilityAttack
from polars_hidden_rate.measures.overfitting import DcrOverfitting
from polars_hidden_rate.measures.row_match import row_direct_match_protection
from polars_hidden_rate.measures.sdmetrics_space import DcrSpace, check_dcr_space
from polars_hidden_rate.measures.secrets import SecretKind
from polars_hidden_rate.measures.singling_out import Mode, SinglingOutAttack
from polars_hidden_rate.measures.spaces import SpaceComparison
from polars_hidden_rate.measures.summary import hidden_rate_interval
from polars_hidden_rate.plan import CountOptions, CountPlan, plan
from polars_hidden_rate.progress import folded, stage
from polars_hidden_rate.provenance import (
    Describing,
    components_words,
    frames_described,
    stated,
    with_fit,
)
from polars_hidden_rate.report.model import LinkUse
from polars_hidden_rate.report.rendered import PrivacyReport
from polars_hidden_rate.report.targets import Targets, check_targets, meets
from polars_hidden_rate.stats import percent


def privacy_report(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    *,
    targets: Mapping[str, float | None] | None = None,
    confidence: float = 0.95,
    allow_unlinked: bool = False,
    by_row_order: bool = False,
    max_own_copies: float = DEFAULT_MAX_OWN_COPIES,
    allow_sorted_link: bool = False,
    holdout: pl.DataFrame | pl.LazyFrame | None = None,
    known: ColumnSpec | None = None,
    secret: str | None = None,
    secret_kind: SecretKind = "auto",
    secret_tolerance: float = DEFAULT_TOLERANCE,
    aux_cols: tuple[ColumnSpec, ColumnSpec] | None = None,
    n_neighbors: int = 1,
    attack_space: Space = "projected",
    singling_out: Mode | None = None,
    n_cols: int = 3,
    dcr_baseline: bool = False,
    baseline_seed: int = 0,
    dcr_space: DcrSpace = "projected",
    compare_spaces: bool = False,
    **options: Unpack[CountOptions],
) -> PrivacyReport:
    """Measure an anonymization with every metric of [`METRICS`][polars_hidden_rate.report.METRICS],
    against targets.

    The coordinates are read once (the projection fitted once) for the local
    cloaking, the DCR and the NNDR; the direct matches read the raw features.

    Parameters
    ----------
    originals, avatars
        As for [`local_cloaking`][polars_hidden_rate.local_cloaking]; LazyFrames are collected.
    targets
        Targets overriding [`DEFAULT_TARGETS`][polars_hidden_rate.report.DEFAULT_TARGETS] and
        `DEFAULT_HOLDOUT_TARGETS`, by metric name; a metric passes when its value is strictly
        above its target. The measures against a holdout (`HOLDOUT_METRICS`:
        ``membership_auc`` at most, ``dcr_overfitting_protection`` at least,
        ``inference_risk``, ``linkability_risk`` and ``singling_out_risk`` at most) are
        judged by default wherever they run, on their point estimates, unless the holdout is
        too small to judge them (`PrivacyReport.not_judged`). A target of None turns it off:
        the figure is then evidence, not judged.
    confidence
        The confidence level of the hidden rate's interval.
    allow_unlinked, by_row_order, max_own_copies, allow_sorted_link
        The verdict options of `cloaking_summary`: a link
        that looks random, or a row-order link while both frames hold a key column, is
        refused unless they say otherwise; more than ``max_own_copies`` percent of avatars
        identical to their own original fails the report (``100`` disables it). With
        ``allow_unlinked`` on a link the test refuses, the measures that need the link (the
        hidden rate, the local cloaking, the correlation protection, the own copies) are
        measured and shown but never count toward a pass. Without ``allow_unlinked``, a link
        the test refuses is not an error, with or without a ``holdout``, nor is a synthetic
        set of another height than the originals' (linked by row order: no key): those
        measures are not applicable (`PrivacyReport.link_use` ``"absent"``, "n/a" in every
        format) and the verdict is that of the measures that need no link (a CT-GAN or
        synthpop set of any size, not one record per original).
        Measured with ``allow_unlinked`` on a link the test refuses, the report fails.
        ``allow_sorted_link`` judges a row-order link that a sort of both frames may have made.
    holdout
        Real records of the same population that the generator never saw, with the
        originals' columns and types (refused otherwise, before anything is read): the
        report then adds the membership attack, the DCR overfitting protection and the
        holdout's own DCR, NNDR and row direct match protection against the originals
        (`HoldoutFigures`, `PrivacyReport.references`), in the same space. The measures are
        judged against their targets (`targets`), and a distance metric whose holdout figure
        fails its target is judged against that figure instead
        (`PrivacyReport.judged_against`).
    known
        The variables an attacker knows (names or a selector, in both frames; checked
        before anything is counted): the report then measures the
        [`correlation_protection_rate`][polars_hidden_rate.correlation_protection_rate] with
        its hidden rate, and that rate's target decides
        [`PrivacyReport.passed`][polars_hidden_rate.PrivacyReport.passed] too.
    secret, secret_kind, secret_tolerance
        With a holdout and ``known``: the attribute inference attack of
        [`inference_risk`][polars_hidden_rate.inference_risk] on the column ``secret``
        (``secret_kind`` and ``secret_tolerance`` are its ``secret_kind`` and ``tolerance``),
        added to the holdout's figures (judged by default, as `targets` says). Its space is
        the known columns' own.
    aux_cols, n_neighbors
        With a holdout: the linkability attack of
        [`linkability_risk`][polars_hidden_rate.linkability_risk], ``(A, B)`` the columns of
        the attacker's two tables (names or selectors, checked in the three sets before
        anything is counted) and ``n_neighbors`` its nearest synthetic records on each
        side; the report's ``linkability`` (judged by default). Each side's space is its
        columns' own.
    attack_space
        The space of the inference and the linkability attacks: ``"projected"`` (default)
        or ``"gower"``, anonymeter's distance (their ``space``).
    singling_out, n_cols
        With a holdout: the singling-out attack of
        [`singling_out_risk`][polars_hidden_rate.singling_out_risk], ``"univariate"`` or
        ``"multivariate"`` (its ``mode``; ``n_cols`` its columns per query) on the raw
        columns of the report's space (its features, or ``coords``); the report's
        ``singling_out``, its risk ``singling_out_risk`` among the holdout's measures.
    dcr_baseline, baseline_seed
        Also measure SDMetrics' DCR baseline protection
        ([`dcr_baseline_protection`][polars_hidden_rate.dcr_baseline_protection]) in the
        report's space, its random records drawn with ``baseline_seed``; the report's
        ``dcr_baseline_protection`` (no target). It needs no holdout; it costs about as
        much again as the report's DCR (a draw as large as the synthetic set, and its walk
        through a kd-tree of the originals), so it is measured on request.
    dcr_space
        The space of the DCR overfitting protection (with a holdout) and of the DCR baseline
        protection: ``"projected"`` (default), the report's space, or ``"sdmetrics"``,
        SDMetrics' own distance over the report's features (their ``space``; the membership
        attack and the report's own DCR stay in the report's space).
    compare_spaces
        Also read those two measures in the other space and show them side by side
        (`SpaceComparison`, the JSON's ``space_comparison``), with a warning where the DCR
        overfitting protection's verdict differs between the spaces. Needs a holdout or
        ``dcr_baseline``.
    **options
        The keyword options of [`CountOptions`][polars_hidden_rate.CountOptions]. The
        raw features of the direct matches are ``features`` (default the columns
        both frames share, less the keys), also when ``coords`` are given. With
        ``cluster``, the counts and the distances both run on the Dask cluster;
        with ``device="gpu"``, the counts run on the GPU and the distances on
        this machine's CPU (they have no GPU path), with the same results.

    Returns
    -------
    PrivacyReport

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 3.0, 4.0]})
    >>> avatars = pl.DataFrame({"Dim1": [0.5, 1.5, 3.0, 4.0]})
    >>> report = phr.privacy_report(originals, avatars, coords="Dim1")
    >>> report.hidden_rate, report.row_direct_match_protection, report.passed
    (25.0, 50.0, False)
    >>> report.to_dict()["metrics"]["distance_to_closest_median"]
    {'value': 0.25, 'target': 0.2, 'passed': True}
    """
    checked_targets = check_targets(
        targets,
        known=known,
        holdout=holdout,
        secret=secret,
        aux_cols=aux_cols,
        singling_out=singling_out,
    )
    level = check_confidence(confidence)
    with_holdout = holdout is not None

    def measures(request: CountPlan) -> ReportMeasures:
        """The attacks and the extra measures, checked in the planned frames' schemas."""
        known_names = None
        if known is not None:
            known_names = check_known(
                known, request.originals.collect_schema(), request.avatars.collect_schema()
            )
        check_space(attack_space, "privacy_report")
        attack = inference_attack(
            known_names, secret, secret_kind, secret_tolerance, with_holdout, attack_space
        )
        sides = None
        if aux_cols is not None:
            if (
                isinstance(aux_cols, str)
                or not isinstance(aux_cols, tuple | list)
                or (len(aux_cols) != 2)
            ):
                msg = f"`aux_cols` must be a pair (A, B) of column sets, got {aux_cols!r}"
                raise TypeError(msg)
            schema = request.originals.collect_schema()
            sides = [resolve_columns(side, schema, "originals", "aux_cols") for side in aux_cols]
        linking = linkability_attack(sides, n_neighbors, attack_space, with_holdout)
        if attack is None and linking is None and attack_space != "projected":
            msg = "`attack_space` sets the space of the attacks: give `secret` or `aux_cols` too"
            raise ValueError(msg)
        singling = singling_out_attack(singling_out, n_cols, with_holdout)
        seed = baseline_of(dcr_baseline, baseline_seed)
        space = check_dcr_options(dcr_space, compare_spaces, with_holdout, seed is not None)
        return ReportMeasures(known_names, attack, linking, singling, seed, space, compare_spaces)

    verdict = Verdict.of(
        {
            "allow_unlinked": allow_unlinked,
            "allow_sorted_link": allow_sorted_link,
            "by_row_order": by_row_order,
            "max_own_copies": max_own_copies,
        }
    )
    return report_run(
        originals,
        avatars,
        options,
        verdict,
        targets=checked_targets,
        confidence=level,
        holdout=None if holdout is None else as_lazy(holdout, "holdout"),
        measures=measures,
        caller="privacy_report",
        # Warned where `privacy_report` is called: this lambda, `report_run`, here, the caller.
        warn=lambda words: warnings.warn(words, HoldoutOverlapWarning, stacklevel=4),
    )


@dataclass(frozen=True)
class ReportMeasures:
    """The report's attacks and extra measures, checked: the ``known`` columns (names, in
    both frames), the attacks (`inference_attack`, `linkability_attack`,
    `singling_out_attack`), the DCR baseline's seed (`baseline_of`), the DCR measures'
    space and whether both spaces are shown (`check_dcr_options`)."""

    known: list[str] | None = None
    inference: InferenceAttack | None = None
    linkability: LinkabilityAttack | None = None
    singling_out: SinglingOutAttack | None = None
    dcr_baseline: int | None = None
    dcr_space: DcrSpace = "projected"
    compare_spaces: bool = False

    def settings(self) -> dict[str, Any]:
        """The settings the provenance states of them, none where a measure is not run."""
        more: dict[str, Any] = {}
        if self.inference is not None:
            attack = self.inference
            more["inference"] = {
                "known": list(attack.known),
                "secret": attack.secret,
                "secret_kind": attack.secret_kind,
                "tolerance": attack.tolerance,
                "space": attack.space,
            }
        if self.linkability is not None:
            linking = self.linkability
            more["linkability"] = {
                "aux_cols": [list(side) for side in linking.aux_cols],
                "n_neighbors": linking.n_neighbors,
                "space": linking.space,
            }
        if self.singling_out is not None:
            singling = self.singling_out
            more["singling_out"] = {"mode": singling.mode, "n_cols": singling.n_cols}
        if self.dcr_baseline is not None:
            more["dcr_baseline"] = {"seed": self.dcr_baseline}
        if self.dcr_space != "projected" or self.compare_spaces:
            more["dcr_space"] = {"space": self.dcr_space, "compare_spaces": self.compare_spaces}
        return more


def report_run(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    verdict: Verdict,
    *,
    targets: Targets,
    confidence: float,
    holdout: pl.LazyFrame | None,
    measures: Callable[[CountPlan], ReportMeasures],
    caller: str,
    warn: Callable[[str], None],
    inputs: Describing = frames_described,
    note: Callable[[str], None] | None = None,
) -> PrivacyReport:
    """The report's run, under `privacy_report` and ``hidden-rate report`` alike: the
    request planned once, its ``measures`` checked in its schemas (each caller in its own
    words), its projection fitted, its link checked (`check_link`), the ``holdout``
    pre-checked (`check_holdout_and_attack`; the words of a copied holdout to ``warn``);
    every measure once (`report_of_plan`), ``note`` told why the measures that need the
    link are absent, where they are; the report with its provenance (`stated`: the
    ``inputs`` as the caller describes them, the settings). The ``targets`` and the
    ``confidence`` come checked."""
    with stage("planning", enabled=options.get("progress")):  # schemas, fit, link, holdout
        request = plan(originals, avatars, options, caller=caller)
        checked = measures(request)
        request = with_fit(request)
        check_link(request, verdict)
        if holdout is not None:
            overlap = check_holdout_and_attack(
                request, holdout, checked.inference, checked.linkability
            )
            if overlap is not None:
                warn(overlap)
        described = inputs(request, holdout)
    measured, strategy = report_of_plan(
        request,
        verdict,
        targets=targets,
        confidence=confidence,
        holdout=holdout,
        known=checked.known,
        inference=checked.inference,
        linkability=checked.linkability,
        singling_out=checked.singling_out,
        dcr_baseline=checked.dcr_baseline,
        dcr_space=checked.dcr_space,
        compare_spaces=checked.compare_spaces,
    )
    if measured.link_use == "absent" and note is not None:
        note(measured.override_notes[0])
    synthetic = measured.n if measured.n_synthetic is None else measured.n_synthetic
    rows = {"originals": measured.n, "avatars": synthetic}
    if measured.holdout is not None:
        rows["holdout"] = len(measured.holdout.membership.holdout)
    with stage("writing the report", enabled=request.progress):  # the inputs' hashes awaited
        block = stated(
            request,
            described(rows),
            strategy=strategy,
            verdict=verdict,
            evidence=measured.evidence,
            **checked.settings(),
        )
        return measured.with_provenance(block)


def check_dcr_options(
    dcr_space: object, compare_spaces: bool, with_holdout: bool, with_baseline: bool
) -> DcrSpace:
    """``dcr_space`` and ``compare_spaces`` checked: either needs a DCR measure to act on (a
    holdout's overfitting protection, or the baseline protection)."""
    space = check_dcr_space(dcr_space, "privacy_report")
    if (space != "projected" or check_flag(compare_spaces, "compare_spaces")) and not (
        with_holdout or with_baseline
    ):
        option = "compare_spaces" if compare_spaces else "dcr_space"
        msg = (
            f"`{option}` sets the space of the DCR overfitting and baseline protections: give "
            "`holdout` or `dcr_baseline=True` too"
        )
        raise ValueError(msg)
    return space


def check_holdout_and_attack(
    request: CountPlan,
    holdout: pl.LazyFrame,
    attack: InferenceAttack | None,
    linkability: LinkabilityAttack | None = None,
) -> str | None:
    """The report's pre-check of a ``holdout``, before anything is counted: the originals'
    columns and types less the link's keys (`check_holdout`), and the columns the inference
    ``attack`` (`inference_attack`, None without one) and the ``linkability`` attack
    (`linkability_attack`) need in the three sets. Returns the words of a
    `HoldoutOverlapWarning` when the holdout copies originals (`holdout_overlap`), for the
    caller to warn or print; None otherwise."""
    keys = request.link.left
    check_holdout(request.originals.collect_schema(), holdout.collect_schema(), keys)
    schemas = {
        "originals": request.originals.collect_schema(),
        "synthetic": request.avatars.collect_schema(),
        "holdout": holdout.collect_schema(),
    }
    if attack is not None:
        attack.check(schemas)
    if linkability is not None:
        linkability.check(schemas)
    with stage("checking the holdout", enabled=request.progress):  # it reads both sets
        return holdout_overlap(request.originals, holdout, keys)


def inference_attack(
    known: Sequence[str] | None,
    secret: str | None,
    secret_kind: SecretKind,
    tolerance: float,
    with_holdout: bool,
    space: Space = "projected",
) -> InferenceAttack | None:
    """The report's attribute inference attack, checked (None without a ``secret``): it
    needs the ``known`` columns (resolved to names) and a holdout to control it."""
    if secret is None:
        if secret_kind != "auto" or tolerance != DEFAULT_TOLERANCE:
            msg = (
                "`secret_kind` and `secret_tolerance` set the attribute inference attack: give "
                "its `secret` (and `known`, and a holdout)"
            )
            raise ValueError(msg)
        return None
    if known is None:
        msg = "the attribute inference attack on `secret` needs the `known` columns too"
        raise ValueError(msg)
    if not with_holdout:
        msg = (
            "the attribute inference attack (`known`, `secret`) needs a holdout to control it: "
            "pass `holdout`"
        )
        raise ValueError(msg)
    return InferenceAttack.of(known, secret, secret_kind, tolerance, space)


def linkability_attack(
    aux_cols: Sequence[Sequence[str]] | None,
    n_neighbors: int,
    space: Space,
    with_holdout: bool,
    *,
    names: tuple[str, str] = ("aux_cols", "aux_cols"),
) -> LinkabilityAttack | None:
    """The report's linkability attack, checked (None without ``aux_cols``, the columns
    ``(A, B)`` resolved to names): it needs a holdout to control it. ``names``: how the
    errors name ``A`` and ``B`` (the command line's flags)."""
    n_neighbors = check_count(n_neighbors, "n_neighbors")
    if aux_cols is None:
        if n_neighbors != 1:
            msg = "`n_neighbors` sets the linkability attack: give its `aux_cols` (and a holdout)"
            raise ValueError(msg)
        return None
    if not with_holdout:
        msg = "the linkability attack (`aux_cols`) needs a holdout to control it: pass `holdout`"
        raise ValueError(msg)
    return LinkabilityAttack.of(aux_cols, n_neighbors, space, names=names)


def singling_out_attack(
    mode: object, n_cols: object, with_holdout: bool, *, name: str = "singling_out"
) -> SinglingOutAttack | None:
    """The report's singling-out attack, checked (None without a ``mode``): it needs a
    holdout to control it. ``name``: how the errors name the mode (the command line's
    flag)."""
    if mode is None:
        if n_cols != 3:
            msg = f"`n_cols` sets the multivariate singling-out attack: pass {name}='multivariate'"
            raise ValueError(msg)
        return None
    attack = SinglingOutAttack.of(mode, n_cols, name=name)
    if not with_holdout:
        msg = f"the singling-out attack (`{name}`) needs a holdout to control it: pass `holdout`"
        raise ValueError(msg)
    return attack


def baseline_of(measured: bool, seed: int) -> int | None:
    """The seed of the report's DCR baseline protection, checked; None when not asked."""
    seed = check_seed(seed, "baseline_seed")
    if not check_flag(measured, "dcr_baseline"):
        if seed != 0:
            msg = "`baseline_seed` seeds the DCR baseline protection: pass `dcr_baseline=True`"
            raise ValueError(msg)
        return None
    return seed


def report_of_plan(
    request: CountPlan,
    verdict: Verdict,
    *,
    targets: Targets,
    confidence: float = 0.95,
    holdout: pl.LazyFrame | None = None,
    known: Sequence[str] | None = None,
    inference: InferenceAttack | None = None,
    linkability: LinkabilityAttack | None = None,
    singling_out: SinglingOutAttack | None = None,
    dcr_baseline: int | None = None,
    dcr_space: DcrSpace = "projected",
    compare_spaces: bool = False,
) -> tuple[PrivacyReport, str | None]:
    """[`privacy_report`][polars_hidden_rate.privacy_report] of a planned request whose link
    `check_link` passed, its evidence taken from the read it counts, and the strategy that
    counted (None where nothing was counted); ``holdout`` checked beforehand (`check_holdout`),
    and the ``inference`` attack (`inference_attack`) and the ``linkability`` attack
    (`linkability_attack`) and the ``singling_out`` attack (`singling_out_attack`) run on it;
    with ``dcr_baseline``, the DCR baseline protection with that seed (`baseline_of`), in
    ``dcr_space`` (the overfitting protection too), read in both spaces with ``compare_spaces``.
    A link the link test refuses, and a synthetic set of another height, are judged on the
    measures that need no link (`PrivacyReport.link_use`) rather than refused.

    Its callers, the entry points, check what they take once, before anything is read: the
    ``targets`` (`check_targets`), the ``confidence`` (`check_confidence`) and the ``known``
    columns, resolved to names (`check_known`); this run takes them as checked."""
    checked_targets, level, known_names = targets, confidence, known
    request, space = _with_space(request)
    # The attack first: its reads can refuse values (a secret of text that holds numbers)
    # before the longer count runs.
    attacked = None
    if holdout is not None and inference is not None:
        # The known columns as the report's projection takes them (categorical or not, gaps
        # filled or not), on this machine.
        # A secret the projection takes as categorical (named, or by `categorical="auto"`)
        # is judged by equality: named to the attack too, where it is a number (text is).
        secret = inference.secret
        judged = [*inference.known, *([secret] if _is_number(request, secret) else [])]
        if (
            inference.space == "gower"
            and inference.secret_kind == "auto"
            and "categorical" in request.options_for([secret])
        ):
            # anonymeter's space takes no projection options: the secret's kind says it.
            inference = replace(inference, secret_kind="categorical")
        with stage("inference attack", enabled=request.progress), folded():
            attacked = inference.run(
                request.originals,
                request.avatars,
                holdout,
                confidence=level,
                space=inference.space,
                **_attack_options(request, judged, inference.space),
            )
    linked = None
    if holdout is not None and linkability is not None:
        with stage("linkability attack", enabled=request.progress), folded():
            linked = linkability.run(
                request.originals,
                request.avatars,
                holdout,
                confidence=level,
                **_attack_options(request, linkability.columns, linkability.space),
            )
    singled = None
    if holdout is not None and singling_out is not None:
        with stage("singling-out attack", enabled=request.progress), folded():
            singled = singling_out.run(
                request.originals,
                request.avatars,
                holdout,
                columns=list(request.projection.features if request.projection else request.coords),
                confidence=level,
                threads=request.threads,
                progress=request.progress,
            )
    asked = verdict
    heights = _other_heights(request)
    evidence = None
    strategy = None
    if heights is not None:  # another size: no link to test, the distances alone
        link_use: LinkUse = "absent"
        counts = np.zeros(0, dtype=np.int64)
        dcr, nndr, figures = _distances_of_any_size(request, holdout, level)
    else:
        # A refused link, with or without a holdout: the measures that need none are judged.
        read = request.read_judged(replace(asked, allow_unlinked=True))
        aligned, taken = read.aligned, read.evidence
        linked_by = taken.link
        del read  # its arrays are let go below, with ``aligned``
        link_use = (
            "judged" if linked_by.linked else "not judged" if asked.allow_unlinked else "absent"
        )
        figures = None
        if holdout is None:  # the read's arrays are needed by nothing else: taken in place
            result, found = request.result_and_nearest_two(aligned)
        else:
            with stage("reading the holdout", enabled=request.progress):
                held_out = request.coordinates_of(holdout, "holdout")
            if request.walks_here:
                # The avatars' walk through the originals' tree also gives the DCR overfitting's
                # distances to the training records: walked once, in one scale for all three,
                # the count's tree of the avatars walked again.
                result, found, figures = counts_and_figures(
                    request, aligned, held_out, confidence=level
                )
            else:
                result = request.result(aligned, closer=True)
                found = request.nearest_two(aligned)
                figures = HoldoutFigures.of_arrays(
                    aligned.originals,
                    aligned.avatars,
                    held_out,
                    threads=request.threads,
                    confidence=level,
                    tie_tol=request.tie_tol,
                )
        counts, strategy, evidence = result.counts, result.strategy, taken.counted(result)
        del result  # with the count's tree, where it kept one
        # The read's arrays (taken in place) and the scaled distances are let go before the
        # direct-match pass reads the frames again: at 1e8 records they are 100 bytes each.
        del aligned
        dcr, nndr = found.nearest, found.ratio
        del found
    if figures is not None:
        figures = replace(figures, inference=attacked)
        with stage("membership AUC and its interval", enabled=request.progress):
            _ = figures.membership.auc  # sorted once here (cached), not while it is written
    link = request.link
    with stage("direct matches", enabled=request.progress):
        protection = row_direct_match_protection(
            request.originals,
            request.avatars,
            features=list(request.projection.features) if request.projection else None,
            left_on=list(link.left) or None,
            right_on=list(link.right) or None,
        )
        reference = None
        if holdout is not None:
            # The holdout's own, on the release's raw features (it has the originals' columns
            # less the keys): real records the generator never saw, by the same rule.
            shared = request.avatars.collect_schema()
            features = (
                list(request.projection.features)
                if request.projection
                else [
                    name
                    for name in request.originals.collect_schema()
                    if name in shared and name not in link.left and name not in link.right
                ]
            )
            reference = row_direct_match_protection(request.originals, holdout, features=features)
    baseline = None
    if dcr_baseline is not None and (dcr_space == "projected" or compare_spaces):
        with stage("DCR baseline protection", enabled=request.progress):
            baseline = DcrBaseline.of_plan(request, seed=dcr_baseline)
    comparison = None
    if dcr_space == "sdmetrics" or compare_spaces:
        # SDMetrics' distance: brute force over the raw columns, O(s (n + h) d).
        with stage("DCR measures in SDMetrics' space", enabled=request.progress):
            overfitting = {}
            baselines = {}
            if figures is not None and holdout is not None:
                overfitting = {
                    "projected": figures.overfitting,
                    "sdmetrics": DcrOverfitting.of_sdmetrics(request, holdout),
                }
            if dcr_baseline is not None:
                baselines["sdmetrics"] = DcrBaseline.of_sdmetrics(request, seed=dcr_baseline)
                if baseline is not None:
                    baselines = {"projected": baseline, **baselines}
        if dcr_space == "sdmetrics":
            if figures is not None:
                figures = replace(figures, overfitting=overfitting["sdmetrics"])
            baseline = baselines.get("sdmetrics")
        if compare_spaces:
            target = checked_targets.get("dcr_overfitting_protection")
            comparison = SpaceComparison.of(
                overfitting,
                baselines,
                target,
                lambda score, limit: meets("dcr_overfitting_protection", score, limit),
            )
    n, n_hidden = len(counts), int(np.count_nonzero(counts))
    rate = cloaking = low = high = math.nan  # another size: no value where the link is needed
    if heights is None:
        rate, cloaking = percent(n_hidden, n), float(np.median(counts))
        low, high = hidden_rate_interval(n_hidden, n, level)
    else:
        n = heights[0]
    linkable = None
    if known_names is not None and heights is None:
        with stage("correlation protection", enabled=request.progress):
            linkable = correlation_protection(
                request.originals, request.avatars, known_names, hidden_rate=rate
            )
    report = PrivacyReport(
        n=n,
        n_hidden=n_hidden,
        hidden_rate=rate,
        hidden_rate_low=low,
        hidden_rate_high=high,
        confidence=level,
        local_cloaking_median=cloaking,
        distance_to_closest_median=float(np.median(dcr)),
        closest_distances_ratio_median=float(np.median(nndr)),
        row_direct_match_protection=protection,
        targets=checked_targets,
        space=space,
        local_cloaking=counts,
        distance_to_closest=dcr,
        closest_distances_ratio=nndr,
        evidence=evidence,
        n_synthetic=len(dcr),
        holdout=figures,
        correlation_protection=linkable,
        linkability=linked,
        singling_out=singled,
        dcr_baseline=baseline,
        space_comparison=comparison,
        max_own_copies=asked.max_own_copies,
        link_use=link_use,
        overrides={name: getattr(asked, name) for name in LINK_OVERRIDES},
        reference_row_direct_match_protection=reference,
    )
    return report, strategy


def _other_heights(request: CountPlan) -> tuple[int, int] | None:
    """The heights of the originals and of the synthetic set where no link can pair them: a
    row-order link (no key: `check_link`) between sets of different heights, neither empty
    (the read refuses an empty one); None otherwise."""
    if not request.link.by_row_order:
        return None
    frames = [frame.select(pl.len()) for frame in (request.originals, request.avatars)]
    originals, synthetic = (int(frame.item()) for frame in pl.collect_all(frames))
    return (
        None if originals == synthetic or not (originals and synthetic) else (originals, synthetic)
    )


def _distances_of_any_size(
    request: CountPlan, holdout: pl.LazyFrame | None, level: float
) -> tuple[Float64Array, Float64Array, HoldoutFigures | None]:
    """The DCR and the NNDR of each synthetic record, and the figures against a ``holdout``,
    of a synthetic set of another height than the originals: each set read on its own in
    the plan's space (`CountPlan.coordinates_of`), nothing linked."""
    originals = request.coordinates_of(request.originals, "originals")
    synthetic = request.coordinates_of(request.avatars, "avatars")
    figures = None
    if holdout is None:
        found = request.nearest_of(originals, synthetic)
    else:
        held_out = request.coordinates_of(holdout, "holdout")
        if request.walks_here:  # the synthetic records' walk serves the DCR overfitting too
            with stage("nearest records, with the holdout", enabled=request.progress):
                found, figures = HoldoutFigures.with_nearest(
                    originals,
                    synthetic,
                    held_out,
                    threads=request.threads,
                    confidence=level,
                    overwrite_input=True,
                    tie_tol=request.tie_tol,
                )
        else:
            found = request.nearest_of(originals, synthetic)
            figures = HoldoutFigures.of_arrays(
                originals,
                synthetic,
                held_out,
                threads=request.threads,
                confidence=level,
                tie_tol=request.tie_tol,
            )
    return found.nearest, found.ratio, figures


def _attack_options(request: CountPlan, columns: Sequence[str], space: Space) -> CountOptions:
    """An attack's options on ``columns``: in the projected space the plan's own
    (`CountPlan.options_for`: the columns as the report's projection takes them, categorical
    or not, gaps filled or not, on this machine); anonymeter's takes the columns by their
    types, so only the threads and the tie tolerance."""
    if space == "gower":
        return {"threads": request.threads, "tie_tol": request.tie_tol}
    return request.options_for(columns)


def _is_number(request: CountPlan, name: str) -> bool:
    return request.originals.collect_schema()[name].is_numeric()


def _with_space(request: CountPlan) -> tuple[CountPlan, str]:
    """The request, its projection fitted (once: the read uses that fit), and the words for
    its space: ``"FAMD, 5 of 47 components (the originals span 28)"``, ``"PCA, 3 of 3
    components"``, or ``"coords 'Dim1', 'Dim2' (2 columns)"``."""
    if request.projection is None:
        columns = len(request.coords)
        return request, f"coords {quoted(request.coords)} ({_plural(columns, 'column')})"
    request = request.fitted()
    projection = request.projection
    if projection is None or projection.fitted is None:
        raise InvariantError(
            "a fitted plan holds its fitted projection (a bug in polars_hidden_rate)"
        )
    fitted = projection.fitted
    words = components_words(fitted.ncp, fitted.max_ncp, fitted.n_components)
    return request, f"{fitted.model}, {words}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
