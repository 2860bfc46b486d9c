"""One peer's measure, timed in the peers' venv: run by `benchmarks.bench_peers` through a
subprocess (the peers pin other numpy and pandas), never imported by the package's venv.

    <peers-python> benchmarks/peer_worker.py <job.json>

The job names the peer and the parquet files of the three sets (originals, synthetic,
holdout) and the attack's columns; the worker reads them with pandas, warms the peer up on a
few records (anonymeter compiles its kernels on first use), then times only the peer's
evaluation and prints ``{"seconds": ..., "figures": {...}}`` as JSON on stdout.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from typing import Any

# Records of the untimed warm-up run.
WARM_UP = 200
# The singling-out attack's queries in the warm-up run.
WARM_UP_ATTACKS = 10


def _metadata(frame: Any) -> dict[str, Any]:
    import pandas as pd

    return {
        "columns": {
            name: {
                "sdtype": "numerical"
                if pd.api.types.is_numeric_dtype(frame[name])
                else "categorical"
            }
            for name in frame.columns
        }
    }


def sdmetrics_overfitting(sets: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    from sdmetrics.single_table import DCROverfittingProtection

    found = DCROverfittingProtection.compute_breakdown(
        sets["originals"],
        sets["synthetic"],
        sets["holdout"],
        _metadata(sets["originals"]),
        None,
    )
    return {
        "score": float(found["score"]),
        "closer_to_training": float(found["synthetic_data_percentages"]["closer_to_training"]),
    }


def sdmetrics_baseline(sets: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    from sdmetrics.single_table import DCRBaselineProtection

    DCRBaselineProtection._seed = job["seed"]
    found = DCRBaselineProtection.compute_breakdown(
        sets["originals"], sets["synthetic"], _metadata(sets["originals"]), None
    )
    medians = found["median_DCR_to_real_data"]
    return {
        "score": float(found["score"]),
        "synthetic_median": float(medians["synthetic_data"]),
        "random_median": float(medians["random_data_baseline"]),
    }


def anonymeter_inference(sets: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    from anonymeter.evaluators import InferenceEvaluator

    evaluator = InferenceEvaluator(
        ori=sets["originals"],
        syn=sets["synthetic"],
        aux_cols=job["known"],
        secret=job["secret"],
        regression=False,
        n_attacks=max(len(sets["originals"]), len(sets["holdout"])),  # every record
        control=sets["holdout"],
    ).evaluate(n_jobs=job["jobs"])
    return _results(evaluator.results(confidence_level=0.95))


def anonymeter_linkability(sets: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    from anonymeter.evaluators import LinkabilityEvaluator

    a, b = job["aux_cols"]
    evaluator = LinkabilityEvaluator(
        ori=sets["originals"],
        syn=sets["synthetic"],
        aux_cols=(a, b),
        n_attacks=len(sets["originals"]),  # every record: the sample is then a permutation
        n_neighbors=1,
        control=sets["holdout"],
    ).evaluate(n_jobs=job["jobs"])
    return _results(evaluator.results(confidence_level=0.95))


def anonymeter_singling_out(sets: dict[str, Any], job: dict[str, Any]) -> dict[str, Any]:
    from anonymeter.evaluators import SinglingOutEvaluator

    evaluator = SinglingOutEvaluator(
        ori=sets["originals"],
        syn=sets["synthetic"],
        n_attacks=job["n_attacks"],  # univariate: the queries its generator keeps, every one
        n_cols=job["n_cols"],
        control=sets["holdout"],
        seed=job["seed"],
    ).evaluate(mode=job["mode"])
    return _results(evaluator.results(confidence_level=0.95))


def _results(results: Any) -> dict[str, Any]:
    risk = results.risk()
    return {
        "risk": float(risk.value),
        "interval": [float(x) for x in risk.ci],
        "n_success": int(results.n_success),
        "n_control": int(results.n_control),
    }


PEERS = {
    "sdmetrics_overfitting": sdmetrics_overfitting,
    "sdmetrics_baseline": sdmetrics_baseline,
    "anonymeter_inference": anonymeter_inference,
    "anonymeter_linkability": anonymeter_linkability,
    "anonymeter_singling_out": anonymeter_singling_out,
}


def main() -> None:
    import pandas as pd

    with open(sys.argv[1]) as file:
        job = json.load(file)
    sets = {role: pd.read_parquet(path) for role, path in job["files"].items()}
    run = PEERS[job["peer"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anonymeter warns when an attack beats no baseline
        if job["peer"].startswith("anonymeter"):
            # A few queries: a few records hold too few to single out for the multivariate
            # generator, which would draw until its millions of attempts are spent.
            warm = (
                {**job, "n_attacks": min(job["n_attacks"], WARM_UP_ATTACKS)}
                if "n_attacks" in job
                else job
            )
            run({role: frame.head(WARM_UP) for role, frame in sets.items()}, warm)
        start = time.perf_counter()
        figures = run(sets, job)
        elapsed = time.perf_counter() - start
    json.dump({"seconds": elapsed, "figures": figures}, sys.stdout)


if __name__ == "__main__":
    main()
