"""How often DeLong's interval of the membership AUC covers the true AUC, by simulation: the
runs the warning rule of `polars_hidden_rate.measures.membership` (`MIN_DISCORDANT`) was
chosen from (docs/metrics.md, "Small sides warn").

Binormal scores, members ``N(0, 1)`` and holdout records ``N(d, 1)`` with ``d = sqrt(2)
Phi^-1(AUC)``, so that a member lies below a holdout record with probability ``AUC``; each
interval is the package's (`auc_interval`). Prints, for each true AUC, the coverage at each
smaller side and ratio of the larger to it, and whether the rule warns there.

    python tools/delong_coverage.py [RUNS]
"""

from __future__ import annotations

import math
import sys
from statistics import NormalDist

import numpy as np

from polars_hidden_rate.measures.membership import MIN_DISCORDANT, MIN_RECORDS, auc_interval

AUCS = (0.5, 0.7, 0.8, 0.9, 0.95)
SMALLER = (20, 30, 50, 75, 100, 150, 200)
RATIOS = (1, 30)


def coverage(n: int, ratio: int, true_auc: float, runs: int, rng: np.random.Generator) -> float:
    """The share of ``runs`` whose 95 % interval holds ``true_auc``, ``n`` members against
    ``ratio * n`` holdout records."""
    shift = math.sqrt(2.0) * NormalDist().inv_cdf(true_auc)
    covered = 0
    for _ in range(runs):
        low, high = auc_interval(rng.normal(size=n), rng.normal(shift, 1.0, size=ratio * n))
        covered += low <= true_auc <= high
    return covered / runs


def main(runs: int) -> None:
    rng = np.random.default_rng(2)
    for true_auc in AUCS:
        cells = []
        for n in SMALLER:
            for ratio in RATIOS:
                # On the true AUC, as the rule reads the estimate; 100 x 0.1 rounds below 10.
                lean = round(n * min(true_auc, 1 - true_auc), 9)
                warns = n < MIN_RECORDS or lean < MIN_DISCORDANT
                found = coverage(n, ratio, true_auc, runs, rng)
                cells.append(f"{n}x{ratio}:{found:.3f}{'*' if warns else ''}")
        print(true_auc, " ".join(cells), flush=True)
    print("* the rule warns there")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
