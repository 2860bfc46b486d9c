"""The peers as oracles: run anonymeter's and SDMetrics' own code on a case given as JSON on
stdin, print their figures as JSON. Run by the peers' venv (``make peers``: .venv-peers,
whose pins conflict with the package's), never imported by the suite's own venv: the
tests call it through a subprocess (`tests/measures/test_linkability.py`,
`tests/measures/test_baseline.py`).

The input: a list of cases, ``{"peer": "linkability" | "inference" | "baseline" |
"sdmetrics_dcr", "originals": {column: values}, "synthetic": {...}, "holdout": {...},
"casts": {column: type}, ...}`` (``casts`` optional, `_frame`), in JSON, so
floats travel exactly (Python's repr round-trips); the output, their figures in order. One
process for all (importing the peers and compiling anonymeter's kernels take most of it).
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any


def _frame(columns: dict[str, list[Any]], casts: dict[str, str] | None = None) -> Any:
    """A pandas frame of JSON columns; ``casts`` gives a column a type JSON does not carry:
    a numpy dtype's name (``"int8"``), or ``"decimal"`` (texts to `decimal.Decimal`)."""
    import decimal

    import pandas as pd

    frame = pd.DataFrame(columns)
    for name, kind in (casts or {}).items():
        if kind == "decimal":
            frame[name] = [None if v is None else decimal.Decimal(v) for v in columns[name]]
        else:
            frame[name] = frame[name].astype(kind)
    return frame


def linkability(case: dict[str, Any]) -> dict[str, Any]:
    from anonymeter.evaluators import LinkabilityEvaluator

    casts = case.get("casts")
    originals, synthetic = _frame(case["originals"], casts), _frame(case["synthetic"], casts)
    evaluator = LinkabilityEvaluator(
        ori=originals,
        syn=synthetic,
        aux_cols=(case["aux_cols"][0], case["aux_cols"][1]),
        n_attacks=len(originals),  # every record: the sample is then a permutation
        n_neighbors=case["n_neighbors"],
        control=_frame(case["holdout"], casts),
    ).evaluate(n_jobs=1)
    return _results(evaluator.results(confidence_level=case["confidence"]))


def inference(case: dict[str, Any]) -> dict[str, Any]:
    from anonymeter.evaluators import InferenceEvaluator

    casts = case.get("casts")
    originals, holdout = _frame(case["originals"], casts), _frame(case["holdout"], casts)
    evaluator = InferenceEvaluator(
        ori=originals,
        syn=_frame(case["synthetic"], casts),
        aux_cols=case["known"],
        secret=case["secret"],
        regression=case["regression"],
        n_attacks=max(len(originals), len(holdout)),
        control=holdout,
    ).evaluate(n_jobs=1)
    return _results(evaluator.results(confidence_level=case["confidence"]))


def _results(results: Any) -> dict[str, Any]:
    risk = results.risk()
    return {
        "risk": risk.value,
        "interval": list(risk.ci),
        "n_success": int(results.n_success),
        "n_control": int(results.n_control),
        "attack_rate": [results.attack_rate.value, results.attack_rate.error],
        "control_rate": [results.control_rate.value, results.control_rate.error],
    }


def singling_out(case: dict[str, Any]) -> dict[str, Any]:
    """anonymeter's singling-out risk. ``univariate``: its evaluator, ``n_attacks`` the
    number of queries its generator keeps (``case["queries"]``: then every one is attacked).
    ``multivariate``: its own query of every (synthetic record, column set) pair, those that
    single out a synthetic record kept by its own collection, counted by its own code."""
    from itertools import combinations

    import polars as pl
    from anonymeter.evaluators import SinglingOutEvaluator
    from anonymeter.evaluators import singling_out_evaluator as so
    from anonymeter.stats.confidence import EvaluationResults

    originals, synthetic = _frame(case["originals"]), _frame(case["synthetic"])
    holdout = _frame(case["holdout"])
    if case["mode"] == "univariate":
        evaluator = SinglingOutEvaluator(
            ori=originals, syn=synthetic, n_attacks=case["queries"], control=holdout, seed=0
        ).evaluate(mode="univariate")
        results = evaluator.results(confidence_level=case["confidence"])
        found = _results(results)
        found["queries"] = len(
            so.univariate_singling_out_queries(
                pl.DataFrame(synthetic).unique(), 10**9, __import__("numpy").random.default_rng(0)
            )
        )
        return found
    ori, syn, control = (
        pl.DataFrame(f).unique(maintain_order=True) for f in (originals, synthetic, holdout)
    )
    medians = syn.median().to_dicts()[0]
    dtypes = {col: syn[col].dtype for col in syn.columns}
    queries = [
        so._query_from_record(record, dtypes, list(columns), medians, None)
        for record in syn.to_dicts()
        for columns in combinations(syn.columns, case["n_cols"])
    ]
    kept = so.UniqueSinglingOutQueries()
    kept.check_and_extend(queries, syn)
    n_success = len(so._evaluate_queries_and_return_successful(ori, kept.queries))
    n_control = len(so._evaluate_queries_and_return_successful(control, kept.queries))
    results = EvaluationResults(
        n_attacks=len(kept),
        n_success=n_success,
        n_baseline=0,
        n_control=n_control,
        confidence_level=case["confidence"],
    )
    found = _results(results)
    found["queries"] = len(kept)
    return found


def baseline(case: dict[str, Any]) -> dict[str, Any]:
    from sdmetrics.single_table import DCRBaselineProtection

    originals, synthetic = _frame(case["originals"]), _frame(case["synthetic"])
    metadata = {"columns": {name: {"sdtype": "numerical"} for name in originals.columns}}
    DCRBaselineProtection._seed = case["seed"]
    found = DCRBaselineProtection.compute_breakdown(originals, synthetic, metadata, None)
    medians = found["median_DCR_to_real_data"]
    return {
        "score": found["score"],
        "synthetic_median": medians["synthetic_data"],
        "random_median": medians["random_data_baseline"],
    }


def _metadata(case: dict[str, Any]) -> dict[str, Any]:
    """SDMetrics' metadata of a case: ``sdtypes`` by column, in the originals' order."""
    return {"columns": {name: {"sdtype": case["sdtypes"][name]} for name in case["originals"]}}


def sdmetrics_dcr(case: dict[str, Any]) -> dict[str, Any]:
    """SDMetrics' ``calculate_dcr`` of ``synthetic`` (and of ``random``, when given) to
    ``originals`` and, with a ``holdout``, its DCR overfitting protection's breakdown."""
    from sdmetrics.single_table import DCROverfittingProtection
    from sdmetrics.single_table.privacy.dcr_utils import calculate_dcr

    metadata = _metadata(case)
    originals, synthetic = _frame(case["originals"]), _frame(case["synthetic"])
    found: dict[str, Any] = {"to_originals": calculate_dcr(synthetic, originals, metadata).tolist()}
    if "random" in case:
        random = calculate_dcr(_frame(case["random"]), originals, metadata)
        found["random_to_originals"] = random.tolist()
        found["medians"] = [
            float(found_median)
            for found_median in (
                calculate_dcr(synthetic, originals, metadata).median(),
                random.median(),
            )
        ]
    if "holdout" in case:
        holdout = _frame(case["holdout"])
        found["to_holdout"] = calculate_dcr(synthetic, holdout, metadata).tolist()
        breakdown = DCROverfittingProtection.compute_breakdown(
            originals, synthetic, holdout, metadata, None
        )
        found["score"] = breakdown["score"]
        found["closer_to_training"] = breakdown["synthetic_data_percentages"]["closer_to_training"]
    return found


def main() -> None:
    cases = json.load(sys.stdin)
    peers = {
        "linkability": linkability,
        "inference": inference,
        "baseline": baseline,
        "sdmetrics_dcr": sdmetrics_dcr,
        "singling_out": singling_out,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anonymeter warns when an attack beats no baseline
        found = [peers[case["peer"]](case) for case in cases]
    json.dump(found, sys.stdout)


if __name__ == "__main__":
    main()
