"""Shared test helpers: the float64 brute-force references, the Hypothesis budget, the
adversarial cases of the nearest-two search, and the cases several test modules share (linked
parquet files, adversarial linked arrays and worker probes for clusters, mixed-type cohorts):
no test module imports another."""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator
from decimal import Decimal, localcontext
from html.parser import HTMLParser
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pytest
from hypothesis import strategies as st

import polars_hidden_rate as phr

HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
"""``ci`` runs every property's full example count; ``dev`` (the default) a tenth of it."""


@contextlib.contextmanager
def local_cluster(
    *, processes: bool, workers: int = 2, threads: int = 1, **options: Any
) -> Iterator[Any]:
    """A client of a Dask ``LocalCluster`` (skipped without the ``dask`` extra): workers in
    this process (fast to start) or in processes of their own (which can be killed)."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=threads,
            processes=processes,
            dashboard_address=":0",
            **options,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def examples(full: int) -> int:
    """A property's example count under the active profile: ``full`` for ``ci``."""
    return full if HYPOTHESIS_PROFILE == "ci" else max(10, full // 10)


def hidden_share(counts: np.ndarray) -> float:
    """The hidden rate of ``counts``, in percent: ``100 * #{c_i > 0} / n``, rounded once."""
    return 100.0 * int(np.count_nonzero(np.asarray(counts) > 0)) / len(counts)


def brute_force_counts(originals: np.ndarray, avatars: np.ndarray, tie_tol: float) -> np.ndarray:
    """c_i = #{j != i : d2(x_i, y_j) <= d2(x_i, y_i) * (1 + tie_tol)}, all in float64.

    Squared direct differences summed column by column, written independently of the package.
    """
    n, d = originals.shape
    counts = np.empty(n, dtype=np.int64)
    for i in range(n):
        d2 = np.zeros(n)
        for k in range(d):
            diff = originals[i, k] - avatars[:, k]
            d2 += diff * diff
        threshold = d2[i] * (1.0 + tie_tol)
        counts[i] = int(np.count_nonzero(d2 <= threshold)) - 1
    return counts


def brute_force_within(
    queries: np.ndarray, thresholds: np.ndarray, own: np.ndarray, avatars: np.ndarray
) -> np.ndarray:
    """#{j != own[i] : d2(q_i, y_j) <= thresholds[i]}, in float64 column by column."""
    d2 = np.zeros((len(queries), len(avatars)))
    for k in range(queries.shape[1]):
        diff = queries[:, k : k + 1] - avatars[None, :, k]
        d2 += diff * diff
    inside = d2 <= thresholds[:, None]
    inside[np.arange(len(queries)), own] &= own < 0
    counts: np.ndarray = inside.sum(axis=1)
    return counts


def brute_force_two(originals: np.ndarray, avatars: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two smallest d2 of each avatar over all originals: squared direct differences
    summed column by column in float64, then sorted; written independently of the package."""
    d2 = np.zeros((len(avatars), len(originals)))
    for k in range(originals.shape[1]):
        diff = avatars[:, k : k + 1] - originals[None, :, k]
        d2 += diff * diff
    d2.sort(axis=1)
    second = d2[:, 1] if len(originals) > 1 else np.full(len(avatars), np.inf)
    return d2[:, 0], second


def nearest_two_case(
    rng: np.random.Generator, n: int, m: int, d: int, step: float, offset: float
) -> tuple[np.ndarray, np.ndarray]:
    """Originals and avatars on a coarse dyadic grid: ties, duplicates, zero distances, offsets."""
    originals = rng.integers(-3, 4, (n, d)) * step + offset
    avatars = rng.integers(-3, 4, (m, d)) * step + offset
    # Some avatars copy an original exactly (d2 = 0), some originals are duplicated.
    copies = rng.random(m) < 0.3
    avatars[copies] = originals[rng.integers(0, n, int(copies.sum()))]
    if n > 1:
        originals[rng.integers(0, n, n // 4)] = originals[rng.integers(0, n, n // 4)]
    return originals, avatars


OFFSETS = (0.0, 1e6, 2.0**40, -(2.0**45) + 0.25)


@st.composite
def nearest_two_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """`nearest_two_case` with drawn sizes, grid step and offset."""
    return nearest_two_case(
        np.random.default_rng(draw(st.integers(0, 2**32 - 1))),
        n=draw(st.integers(1, 120)),
        m=draw(st.integers(1, 120)),
        d=draw(st.integers(1, 6)),
        step=draw(st.sampled_from([1.0, 0.5, 0.25])),
        offset=draw(st.sampled_from(OFFSETS)),
    )


COUNT_KEYS = (
    "n",
    "hidden_rate",
    "not_hidden",
    "not_hidden_share",
    "local_cloaking_median",
    "local_cloaking_q1",
    "local_cloaking_q3",
    "min_rate",
)
"""The keys of a summary's dict that come from the counts alone."""


def counts_of(summary: Any) -> dict[str, Any]:
    """The count figures of a `CloakingSummary` (or of its
    dict): what two summaries of the same counts share, whatever evidence and provenance
    each carries."""
    data = summary if isinstance(summary, dict) else summary.to_dict()
    return {key: data[key] for key in COUNT_KEYS}


def release_with_holdout(
    seed: int = 0, *, integer_ages: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Originals, their avatars (k = 5) and a holdout of the same population: age (whole
    years with ``integer_ages``, else normal), bmi and a smoker flag."""
    rng = np.random.default_rng(seed)
    ages = rng.integers(20, 80, 600) if integer_ages else rng.normal(50, 10, 600)
    population = pl.DataFrame(
        {"age": ages, "bmi": rng.normal(25, 4, 600), "smoker": rng.choice(["y", "n"], 600)}
    )
    originals, holdout = population.head(400), population.tail(200)
    avatars = phr.avatarize(originals, k=5, ncp=3, seed=seed)
    return originals, avatars, holdout


def without_provenance(data: dict[str, Any]) -> dict[str, Any]:
    """A report's or summary's dict less what differs between two runs of one measurement
    (the provenance: times, paths)."""
    return {key: value for key, value in data.items() if key != "provenance"}


def brute_shares(
    targets: npt.NDArray[np.float64],
    synthetic: npt.NDArray[np.float64],
    secrets: npt.NDArray[np.float64],
    guesses: npt.NDArray[np.float64],
    tolerance: float,
    tie_tol: float = 0.0,
) -> list[float]:
    """Each target's chance of a right guess: the share of its tied-nearest synthetic records
    (within ``1 + tie_tol`` of the nearest ``d2``) whose value matches its secret."""
    shares = []
    for target, secret in zip(targets, secrets, strict=True):
        d2 = np.zeros(len(synthetic))
        for k in range(synthetic.shape[1]):
            diff = target[k] - synthetic[:, k]
            d2 += diff * diff
        tied = guesses[d2 <= d2.min() * (1.0 + tie_tol)]
        right = [
            g == secret
            or (math.isnan(g) and math.isnan(secret))
            or (math.isfinite(secret) and abs(g - secret) <= tolerance * abs(secret))
            for g in tied
        ]
        shares.append(sum(right) / len(tied))
    return shares


def exact_integer_shares(
    originals: npt.NDArray[np.int64],
    targets: npt.NDArray[np.int64],
    synthetic: npt.NDArray[np.int64],
    secrets: npt.NDArray[np.float64],
    guesses: npt.NDArray[np.float64],
) -> list[float]:
    """`brute_shares` in exact integer arithmetic, for integer columns standardized by the
    originals' population variance: ``d2 = sum_c delta_c^2 / var_c``, and ``var_c = S_c / n^2``
    with ``S_c = n sum x^2 - (sum x)^2`` an integer, so ``d2 * prod S / n^2`` is the integer
    ``sum_c delta_c^2 prod_{k != c} S_k``: the true ties, none split by a rounding."""
    n = len(originals)
    spreads = [
        n * int((column.astype(object) ** 2).sum()) - int(column.astype(object).sum()) ** 2
        for column in originals.T
    ]
    weights = [math.prod(spreads[:c] + spreads[c + 1 :]) for c in range(len(spreads))]
    shares = []
    for target, secret in zip(targets, secrets, strict=True):
        delta = (synthetic - target).astype(object)
        scaled = (delta**2 * np.array(weights, dtype=object)).sum(axis=1)
        nearest = min(scaled)
        tied = guesses[np.array([value == nearest for value in scaled])]
        right = [g == secret or (math.isnan(g) and math.isnan(secret)) for g in tied]
        shares.append(sum(right) / len(tied))
    return shares


def reference_risk(
    attack: tuple[float, int], control: tuple[float, int], confidence: float
) -> tuple[float, float, float, float, float]:
    """The residual risk of an attack over its control from each side's ``(successes,
    records)``, in 60-digit decimals from the same float ``z``: Wilson's centres at the
    smaller side's size ``t`` (``(t s / n + z²/2) / (t + z²)``), each side's Wilson
    half-width at its own size, anonymeter's ``(a - c) / (1 - c)`` and first-order error,
    cut to [0, 1]. Returns the risk, its bounds and the two rates."""
    with localcontext() as context:
        context.prec = 60
        z = Decimal(NormalDist().inv_cdf(0.5 + confidence / 2.0))
        z2 = z * z
        t = Decimal(min(attack[1], control[1]))
        rates, errors = [], []
        for successes, records in (attack, control):
            s, n = Decimal(successes), Decimal(records)
            rates.append((t * s / n + z2 / 2) / (t + z2))
            errors.append(z / (n + z2) * (s * (n - s) / n + z2 / 4).sqrt())
        (a, c), (da, dc) = rates, errors
        risk = (a - c) / (1 - c)
        spread = ((da / (1 - c)) ** 2 + (dc * (a - 1) / (1 - c) ** 2) ** 2).sqrt()

        def unit(x: Decimal) -> float:
            return float(min(max(x, Decimal(0)), Decimal(1)))

        return unit(risk), unit(risk - spread), unit(risk + spread), float(a), float(c)


# --- parquet datasets: linked cases written as files (local, on a cluster, by the CLI)


COORDS = ["Dim1", "Dim2", "Dim3"]


def linked_case(n: int, seed: int, *, kind: str = "grid") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals with an `id` and more columns; their avatars shuffled, linked back by `id`."""
    rng = np.random.default_rng(seed)
    if kind == "grid":  # ties and duplicates everywhere
        originals = rng.integers(0, 4, size=(n, 3)).astype(np.float64)
        avatars = rng.integers(0, 4, size=(n, 3)).astype(np.float64)
    else:
        originals = rng.normal(size=(n, 3)) * 2.0**40
        avatars = originals + rng.normal(scale=0.3, size=(n, 3)) * 2.0**40
    ids = rng.permutation(n) * 7 + 3
    left = pl.DataFrame(
        {
            "id": ids,
            **dict(zip(COORDS, originals.T, strict=True)),
            "note": [f"r{i}" for i in range(n)],
        }
    )
    right = pl.DataFrame({"id": ids, **dict(zip(COORDS, avatars.T, strict=True))})
    return left, right.sample(fraction=1.0, shuffle=True, seed=seed)


def write_files(frame: pl.DataFrame, folder: Path, files: int) -> Path:
    """``frame`` cut into ``files`` parquet files (some may be empty) in ``folder``."""
    folder.mkdir(parents=True)
    for k, rows in enumerate(np.array_split(np.arange(frame.height), files)):
        frame[rows].write_parquet(folder / f"part{k:03d}.parquet")
    return folder


def reverse_columns(folder: Path, *names: str) -> None:
    """Write the files ``names`` of ``folder`` again with their columns in reverse order (the
    same columns and types: a dataset reads them by name)."""
    for name in names:
        frame = pl.read_parquet(folder / name)
        frame.select(reversed(frame.columns)).write_parquet(folder / name)


def siblings(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


def changed(right: pl.DataFrame, change: str) -> pl.DataFrame:
    """The avatars with one bad record (or none at all)."""
    row = pl.int_range(pl.len())
    if change == "duplicate avatar":
        return right.with_columns(pl.when(row == 5).then(pl.col("id").get(9)).otherwise("id"))
    if change == "missing avatar":
        return right.with_columns(pl.when(row == 5).then(-1).otherwise("id").alias("id"))
    if change == "extra avatar":
        return pl.concat([right, right.head(1).with_columns(id=pl.lit(-5, pl.Int64))])
    if change == "null avatar key":
        return right.with_columns(pl.when(row == 5).then(None).otherwise("id").alias("id"))
    if change == "nan coordinate":
        return right.with_columns(
            pl.when(row == 5).then(float("nan")).otherwise("Dim2").alias("Dim2")
        )
    if change == "wide integer coordinate":  # one Decimal(38, 0) value float64 cannot hold
        rounded = pl.col("Dim1").round().cast(pl.Int64)
        wide = pl.when(row == 5).then(pl.lit(2**53 + 1, pl.Int64)).otherwise(rounded)
        return right.with_columns(wide.cast(pl.Decimal(38, 0)).alias("Dim1"))
    if change == "empty":
        return right.head(0)
    raise AssertionError(change)


# --- clusters: adversarial linked arrays, a slowed-down worker, a scheduler's finished tasks


def adversarial(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Linked (originals, avatars) with ties, duplicates, zero distances or large offsets."""
    rng = np.random.default_rng(seed)
    if kind == "gaussian":
        originals = rng.normal(size=(n, 3))
        return originals, originals + rng.normal(scale=0.3, size=(n, 3))
    grid = rng.integers(0, 4, size=(n, 3)).astype(np.float64)
    if kind == "grid":
        return grid, rng.integers(0, 4, size=(n, 3)).astype(np.float64)
    if kind == "duplicates":
        originals = np.repeat(grid[: n // 4], 4, axis=0)
        avatars = originals.copy()
        avatars[::3] += 1.0
        return originals, avatars
    if kind == "offset":
        return grid + 1e9, rng.integers(0, 4, size=(n, 3)) + 1e9
    if kind == "dyadic":
        return grid / 8, rng.integers(0, 32, size=(n, 3)) / 32
    raise AssertionError(kind)


def slow_down(module: str, name: str, seconds: float) -> Callable[[], None]:
    """A function for `client.run` that makes every call of `module.name` on a worker sleep
    first."""

    def install() -> None:
        owner = importlib.import_module(module)
        original = getattr(owner, name)

        def slow(*args: Any, **kwargs: Any) -> Any:
            time.sleep(seconds)
            return original(*args, **kwargs)

        setattr(owner, name, slow)

    return install


def tasks_done(dask_scheduler: Any, prefix: str) -> int:
    group = dask_scheduler.task_prefixes.get(prefix)
    return 0 if group is None else group.states["memory"] + group.states["forgotten"]


# --- mixed-type cohorts (the projection, local and partitioned)


STAGES = ["I", "II", "III", "IV"]


def cohort(n: int, seed: int) -> pl.DataFrame:
    """Mixed types: integers, floats, a date, strings, an Enum and a Boolean."""
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 90, n)
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "age": age,
            "weight": np.round(50 + 0.3 * age + rng.normal(0, 8, n), 1),
            "visit": [
                dt.date(2020, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 900, n)
            ],
            "sex": rng.choice(["F", "M"], n),
            "stage": rng.choice(STAGES, n, p=[0.4, 0.3, 0.2, 0.1]),
            "smoker": rng.random(n) < 0.3,
        }
    ).with_columns(pl.col("stage").cast(pl.Enum(STAGES)))


# --- the peers (anonymeter, SDMetrics) as oracles, through their own venv, and brute forces


PEERS_PYTHON = Path(
    os.environ.get("PEERS_PYTHON", Path(__file__).parent.parent / ".venv-peers/bin/python")
)
"""The peers' venv (``make peers``); ``PEERS_PYTHON`` names another."""

PEERS_REQUIRED = os.environ.get("PEERS_REQUIRED") == "1"
"""``PEERS_REQUIRED=1`` (CI): a peer-oracle test without the peers' venv fails, not skips."""


def run_peer(cases: list[dict[str, Any]], needs: str) -> list[dict[str, Any]]:
    """Run `tests/peer_oracle.py` on ``cases`` in the peers' venv (one process) and return
    their figures; skip when that venv, or its module ``needs``, is absent (fail under
    `PEERS_REQUIRED`)."""
    import subprocess

    absent = pytest.fail if PEERS_REQUIRED else pytest.skip
    if not PEERS_PYTHON.exists():
        absent(f"no peers' venv at {PEERS_PYTHON}: `make peers` creates it")
    probe = subprocess.run(
        [str(PEERS_PYTHON), "-c", f"import {needs}"], capture_output=True, check=False
    )
    if probe.returncode:
        absent(f"{needs} is not installed in {PEERS_PYTHON}: `make peers` installs it")
    done = subprocess.run(
        [str(PEERS_PYTHON), str(Path(__file__).parent / "peer_oracle.py")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def as_columns(frame: pl.DataFrame) -> dict[str, list[Any]]:
    """A frame as JSON columns for `run_peer`."""
    return {name: frame.get_column(name).to_list() for name in frame.columns}


def brute_gower(
    queries: list[dict[str, Any]],
    candidates: list[dict[str, Any]],
    numeric: Collection[str],
    categorical: Collection[str] = (),
) -> list[list[float]]:
    """anonymeter's distance of every (query, candidate) pair, written out pair by pair in
    anonymeter's order and arithmetic: the ``numeric`` columns sorted by name, each divided by
    its range over both lists (``max - min`` in float64, 1 where it is 0), their absolute
    differences summed one after the other; then the ``categorical`` columns sorted by name,
    plus 1 where the two differ (a missing value, None, equal to a missing one only)."""
    names = sorted(numeric)
    ranges = {}
    for name in names:
        values = [float(row[name]) for row in queries + candidates]
        width = max(values) - min(values)
        ranges[name] = 1.0 if width == 0.0 else width
    out = []
    for q in queries:
        row = []
        for c in candidates:
            d = 0.0
            for name in names:
                d += abs(float(q[name]) / ranges[name] - float(c[name]) / ranges[name])
            for name in sorted(categorical):
                d += 0.0 if q[name] == c[name] else 1.0
            row.append(d)
        out.append(row)
    return out


def is_missing(value: object) -> bool:
    """None or a float NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def anonymeter_guess_right(guess: Any, secret: Any, *, regression: bool, tolerance: float) -> bool:
    """anonymeter's ``evaluate_inference_guesses`` for one guess: both missing; else equal
    (categorical), or ``|g - s| / (g + 1e-12) <= tolerance`` (numeric: a NaN or infinite
    quotient is wrong)."""
    if is_missing(guess) and is_missing(secret):
        return True
    if not regression:
        return bool(guess == secret)
    if is_missing(guess) or is_missing(secret):
        return False
    below = float(guess) + 1e-12
    miss = abs(float(guess) - float(secret))
    if below == 0.0:
        return False  # numpy's inf or NaN
    return miss / below <= tolerance


def brute_gower_inference(
    targets: list[dict[str, Any]],
    synthetic: list[dict[str, Any]],
    secret: str,
    numeric: Collection[str],
    categorical: Collection[str] = (),
    *,
    regression: bool,
    tolerance: float = 0.05,
    tie_tol: float = 1e-9,
) -> list[float]:
    """Each target's chance of a right guess in anonymeter's space (`brute_gower`): the share
    of right guesses (`anonymeter_guess_right`) among the synthetic records whose distance is
    at most the nearest's times ``1 + tie_tol``."""
    shares = []
    for target, row in zip(
        targets, brute_gower(targets, synthetic, numeric, categorical), strict=True
    ):
        nearest = min(row)
        tied = [synthetic[j][secret] for j, d in enumerate(row) if d <= nearest * (1.0 + tie_tol)]
        right = [
            anonymeter_guess_right(g, target[secret], regression=regression, tolerance=tolerance)
            for g in tied
        ]
        shares.append(sum(right) / len(tied))
    return shares


def brute_sdmetrics_dcr(
    queries: list[list[Any]], reference: list[list[Any]], numerical: list[bool]
) -> list[float]:
    """SDMetrics' DCR written out: a numerical column's ``min(|a - b| / range, 1)`` (the range
    ``max - min`` over ``reference``, missing skipped; where 0, 1 when the two differ), 1
    when one of the two is missing and 0 when both are; a categorical column's 0 when equal
    (both missing: equal), else 1; the sum left to right over the number of columns; the
    minimum over ``reference``. Missing: None or NaN (`is_missing`)."""
    ranges = []
    for k, is_numerical in enumerate(numerical):
        present = [float(row[k]) for row in reference if is_numerical and not is_missing(row[k])]
        ranges.append(max(present) - min(present) if present else math.nan)
    found = []
    for q in queries:
        best = math.inf
        for c in reference:
            total = 0.0
            for k, is_numerical in enumerate(numerical):
                a, b = q[k], c[k]
                if is_missing(a) or is_missing(b):
                    total += 0.0 if is_missing(a) and is_missing(b) else 1.0
                elif not is_numerical:
                    total += 0.0 if a == b else 1.0
                elif ranges[k] == 0.0:
                    total += 1.0 if float(a) != float(b) else 0.0
                else:
                    total += min(abs(float(b) - float(a)) / ranges[k], 1.0)
            best = min(best, total / len(numerical))
        found.append(best)
    return found


def block_sdmetrics_dcr(
    queries: npt.NDArray[np.float64], reference: npt.NDArray[np.float64], numerical: list[bool]
) -> npt.NDArray[np.float64]:
    """SDMetrics' DCR as a numpy brute force over every (query, reference) pair, by blocks of
    queries: `brute_sdmetrics_dcr` on the arrays of `SdmetricsColumns.arrays` (missing: NaN),
    fast enough for thousands of records."""
    ranges = []
    for k, is_numerical in enumerate(numerical):
        present = reference[:, k][~np.isnan(reference[:, k])]
        ranges.append(
            float(present.max() - present.min()) if is_numerical and len(present) else np.nan
        )
    found = np.empty(len(queries), dtype=np.float64)
    size = max(1, (1 << 21) // max(len(reference), 1))
    for start in range(0, len(queries), size):
        block = queries[start : start + size]
        total = np.zeros((len(block), len(reference)), dtype=np.float64)
        for k, is_numerical in enumerate(numerical):
            a, b = block[:, k, None], reference[None, :, k]
            a_missing, b_missing = np.isnan(a), np.isnan(b)
            if is_numerical:
                diff = np.abs(b - a)
                with np.errstate(divide="ignore", invalid="ignore"):
                    part = (
                        (diff > 0.0).astype(np.float64)
                        if ranges[k] == 0.0
                        else np.minimum(diff / ranges[k], 1.0)
                    )
                both = np.where(a_missing & b_missing, 0.0, part)
                part = np.where(a_missing != b_missing, 1.0, both)
            else:
                part = (~((a == b) | (a_missing & b_missing))).astype(np.float64)
            total += part
        found[start : start + size] = (total / len(numerical)).min(axis=1)
    return found


def brute_link_chance(on_a: list[float], on_b: list[float], k: int, tie_tol: float) -> float:
    """A target's chance of a link from its distances to each synthetic record on ``A`` and on
    ``B``, by enumerating every fill of the tied places at each edge (each equally likely)."""
    import itertools
    from fractions import Fraction

    def fills(distances: list[float]) -> list[frozenset[int]]:
        edge = sorted(distances)[k - 1]
        certain = {j for j, d in enumerate(distances) if d * (1.0 + tie_tol) < edge}
        tied = [
            j for j, d in enumerate(distances) if j not in certain and d <= edge * (1.0 + tie_tol)
        ]
        return [
            frozenset(certain | set(pick))
            for pick in itertools.combinations(tied, k - len(certain))
        ]

    sides = fills(on_a), fills(on_b)
    hits = sum(1 for a in sides[0] for b in sides[1] if a & b)
    return float(Fraction(hits, len(sides[0]) * len(sides[1])))


SHARED_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
"""The paper's AIDS and WBCD releases, beside the checkout (never copied into it)."""


def skip_reason(report: Any) -> str:
    """The reason a skipped test report gives (``longrepr`` is ``(path, line, reason)``)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def real_data_summary(stats: dict[str, list[Any]], shared: Path = SHARED_DATASETS) -> list[str]:
    """The lines the run's summary adds when tests on the real releases were skipped (their
    reasons name ``shared/datasets``): how many, where the data was looked for, and which;
    none when they all ran."""
    skipped = [r for r in stats.get("skipped", []) if "shared/datasets" in skip_reason(r)]
    if not skipped:
        return []
    nodeids = sorted({str(r.nodeid) for r in skipped})
    return [
        f"{len(nodeids)} {'test' if len(nodeids) == 1 else 'tests'} on the paper's AIDS and "
        f"WBCD releases did not run: {shared} is "
        "absent (they skip without it; check it out beside the repository to run them)",
        *(f"  {nodeid}" for nodeid in nodeids),
    ]


def brute_singling_out(
    originals: pl.DataFrame,
    synthetic: pl.DataFrame,
    holdout: pl.DataFrame,
    mode: str,
    n_cols: int = 1,
) -> list[tuple[int, int, int]]:
    """Every query of anonymeter's singling-out generator (``univariate``: each column's
    single missing value, ``<= min`` and ``>= max`` of a number, each value held once;
    ``multivariate``: every synthetic record on every set of ``n_cols`` columns) with how
    many records of the synthetic set, the originals and the holdout (duplicates dropped) it
    matches: a plain scan of each set per query, in Python's comparisons, sorted; each query
    once (two records alike on the columns ask one)."""
    sets = [frame.unique().rows() for frame in (synthetic, originals, holdout)]
    syn = synthetic.unique()
    columns = syn.columns
    numeric = [syn.schema[c].is_integer() or syn.schema[c].is_float() for c in columns]
    Query = list[tuple[int, str, Any]]
    queries: list[Query] = []
    if mode == "univariate":
        for c in range(len(columns)):
            values = [row[c] for row in sets[0]]
            present = [v for v in values if v is not None]
            if len(values) - len(present) == 1:
                queries.append([(c, "null", None)])
            if numeric[c] and present:
                queries += [[(c, "le", min(present))], [(c, "ge", max(present))]]
            for v in present:
                if sum(v == w for w in present) == 1:
                    queries.append([(c, "eq", v)])
    else:
        from itertools import combinations

        medians = [
            syn.get_column(c).median() if n else None for c, n in zip(columns, numeric, strict=True)
        ]
        for row in sets[0]:
            for chosen in combinations(range(len(columns)), n_cols):
                query: Query = []
                for c in chosen:
                    v = row[c]
                    if v is None:
                        query.append((c, "null", None))
                    elif numeric[c]:
                        query.append((c, "ge" if v > medians[c] else "le", v))
                    elif isinstance(syn.schema[columns[c]], pl.String):
                        query.append((c, "eq", v.replace('"', '\\"').replace("'", "\\'")))
                    else:
                        query.append((c, "eq", v))
                queries.append(query)

    def holds(row: tuple[Any, ...], c: int, op: str, v: Any) -> bool:
        x = row[c]
        if op == "null":
            return x is None
        if x is None:
            return False
        return bool(x <= v if op == "le" else x >= v if op == "ge" else x == v)

    unique = list(dict.fromkeys(tuple(q) for q in queries))  # anonymeter keeps a query once
    return sorted(
        tuple(sum(all(holds(row, *cond) for cond in q) for row in rows) for rows in sets)  # type: ignore[misc]
        for q in unique
    )


def brute_k_nearest(
    candidates: np.ndarray,
    queries: np.ndarray,
    k: int,
    tie_tol: float,
    numeric: int | None = None,
) -> list[tuple[list[int], list[float], list[bool], float]]:
    """The brute force `k_nearest` replaces, every (query, candidate) pair: per query, the
    rows within ``1 + tie_tol`` of the ``k``-th smallest distance sorted by (distance, row),
    their distances, whether each is certain (``d * (1 + tie_tol) < edge``), and the edge.
    The distance is ``d2`` (``numeric`` None: squares summed in column order) or anonymeter's
    Gower distance of its loop (the ``numeric`` first columns' ``|q - c|`` summed in order,
    then 1 per differing column after them)."""
    distances = np.zeros((len(queries), len(candidates)), dtype=np.float64)
    for c in range(queries.shape[1]):
        if numeric is None:
            distances += np.square(queries[:, c, None] - candidates[None, :, c])
        elif c < numeric:
            distances += np.abs(queries[:, c, None] - candidates[None, :, c])
        else:
            distances += queries[:, c, None] != candidates[None, :, c]
    out = []
    for row in distances:
        edge = float(np.partition(row, k - 1)[k - 1])
        found = np.flatnonzero(row <= edge * (1.0 + tie_tol))
        found = found[np.lexsort((found, row[found]))]
        certain = row[found] * (1.0 + tie_tol) < edge
        out.append((found.tolist(), row[found].tolist(), certain.tolist(), edge))
    return out


SCRIPT = Path(sys.executable).with_name("hidden-rate")
"""The console script installed beside this interpreter."""


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """``hidden-rate ARGS`` as a user runs it, in a process of its own (skipped where the
    script is not installed beside this interpreter)."""
    if not SCRIPT.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, check=False, timeout=300
    )


# The two-column release of `noisy_frames` and the `pair` fixture, and its command-line space.
PAIR_COORDS = ["Dim1", "Dim2"]
PAIR_SPACE = ["--coords", ",".join(PAIR_COORDS), "--on", "id"]
# Reset the signals a parent may have set to be ignored, then run the script itself.
LAUNCH = (
    "import os, signal, sys\n"
    "for name in ('SIGINT', 'SIGTERM', 'SIGHUP'):\n"
    "    if hasattr(signal, name):\n"
    "        signal.signal(getattr(signal, name), signal.SIG_DFL)\n"
    "for name in sys.argv[1].split(',') if sys.argv[1] else []:\n"
    "    signal.signal(getattr(signal, name), signal.SIG_IGN)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def launch_command(*args: str, ignore: str = "") -> list[str]:
    """The installed script with ``args``, its signals at their defaults but those named in
    ``ignore`` (comma-separated), which it starts ignoring as a parent could have set."""
    if not SCRIPT.exists():
        pytest.skip("the `hidden-rate` script is not installed beside this interpreter")
    return [sys.executable, "-c", LAUNCH, ignore, str(SCRIPT), *args]


def launch(*args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    """Run `launch_command` to its end under ``umask``."""
    return subprocess.run(
        launch_command(*args), capture_output=True, text=True, check=False, umask=umask, timeout=120
    )


def write_by_suffix(frame: pl.DataFrame, path: Path) -> Path:
    """``frame`` written at ``path`` in the format its suffix names (csv, ipc, else parquet)."""
    kind = path.suffix
    if kind == ".csv":
        frame.write_csv(path)
    elif kind == ".ipc":
        frame.write_ipc(path)
    else:
        frame.write_parquet(path)
    return path


def read_one_file(path: Path) -> pl.DataFrame:
    """The one file ``path``, whatever glob characters its name holds."""
    if path.suffix == ".csv":
        return pl.scan_csv(path, glob=False).collect()
    if path.suffix == ".ipc":
        return pl.scan_ipc(path, glob=False).collect()
    return pl.scan_parquet(path, glob=False).collect()


def noisy_frames(
    n: int = 200, seed: int = 0, noise: float = 0.3
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals on `PAIR_COORDS` keyed by ``id``, and avatars that add Gaussian ``noise``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = x + rng.normal(scale=noise, size=x.shape)
    key = pl.int_range(n, dtype=pl.Int64).alias("id")
    return (
        pl.DataFrame(x, schema=PAIR_COORDS).select(key, pl.all()),
        pl.DataFrame(y, schema=PAIR_COORDS).select(key, pl.all()),
    )


def noisy_linked(n: int, seed: int = 0, noise: float = 0.3) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals of three normal coordinates (``Dim1`` to ``Dim3``), and avatars linked to
    them by row order that add Gaussian ``noise``: a link the link test finds."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    y = x + rng.normal(scale=noise, size=x.shape)
    names = ["Dim1", "Dim2", "Dim3"]
    return pl.DataFrame(x, schema=names), pl.DataFrame(y, schema=names)


def brute_rate(originals: pl.DataFrame, avatars: pl.DataFrame) -> float:
    """The hidden rate of a release on `PAIR_COORDS`, by the brute force."""
    counts = brute_force_counts(
        originals.select(PAIR_COORDS).to_numpy(), avatars[PAIR_COORDS].to_numpy(), 1e-9
    )
    return hidden_share(counts)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused run writes to stderr (exit 2, nothing on stdout)."""
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("hidden-rate: error: ")
    assert done.stderr.endswith("\n")
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr.rstrip("\n")


NEVER_ENDING_CHECK = """
import pathlib, sys, threading
import polars as pl
import polars_hidden_rate.cli as cli
import polars_hidden_rate.gate as gate
import polars_hidden_rate.report.run as report_run
from polars_hidden_rate.plan import CountPlan

def never_ending_summary(*args, **options):  # a count that never ends, as a huge one would seem
    pathlib.Path("counting").touch()
    threading.Event().wait()

CountPlan.per_record_judged = never_ending_summary
gate.summarize_judged = never_ending_summary
report_run.report_of_plan = never_ending_summary
sys.argv = ["hidden-rate", *sys.argv[1:]]
cli.entry()
"""


# The columns of `noisy_pair` (at its default d = 2).
GRID_COORDS = ["d1", "d2"]


def noisy_pair(n: int, seed: int, d: int = 2) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals with an id and a payload, and avatars = originals + noise (integer grid)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, (n, d)).astype(float)
    y = x + rng.integers(-2, 3, (n, d))
    names = [f"d{k + 1}" for k in range(d)]
    originals = pl.DataFrame(x, schema=names).with_columns(
        id=pl.Series(rng.permutation(n) * 3, dtype=pl.Int64), site=pl.int_range(n) % 5
    )
    avatars = pl.DataFrame(y, schema=names).with_columns(originals["id"])
    return originals, avatars


def counts_by_id(
    originals: pl.DataFrame, avatars: pl.DataFrame, coords: list[str] = GRID_COORDS
) -> dict[int, int]:
    """The float64 brute force, keyed by id (avatars matched to originals by id)."""
    matched = originals.select("id", *coords).join(
        avatars.select("id", *coords), on="id", suffix="_a", maintain_order="left"
    )
    counts = brute_force_counts(
        matched.select(coords).to_numpy(),
        matched.select(f"{c}_a" for c in coords).to_numpy(),
        1e-9,
    )
    return dict(zip(matched["id"].to_list(), counts.tolist(), strict=True))


def assert_counts_by_id(result: pl.DataFrame, expected: dict[int, int]) -> None:
    got = dict(zip(result["id"].to_list(), result["local_cloaking"].to_list(), strict=True))
    assert got == expected
    assert result["hidden"].to_list() == [count > 0 for count in result["local_cloaking"]]


def quarter_hidden_pair() -> tuple[pl.DataFrame, pl.DataFrame]:
    """One column, one record of four hidden (25 %) at scale 1."""
    originals = pl.DataFrame({"d1": [0.0, 1.0, 3.0, 4.0]})
    avatars = pl.DataFrame({"d1": [0.5, 1.5, 3.0, 4.0]})
    return originals, avatars


# --- 10. Values measured as the user meant them ------------------------------------------------


def projected_counts(
    originals: pl.DataFrame, avatars: pl.DataFrame, **options: object
) -> np.ndarray:
    """The float64 brute force on the coordinates of the projection fitted on the originals."""
    projection = phr.Projection.fit(originals, **options)  # type: ignore[arg-type]
    dims = projection.coordinate_columns()
    return brute_force_counts(
        projection.transform(originals).select(dims).to_numpy(),
        projection.transform(avatars).select(dims).to_numpy(),
        1e-9,
    )


def null_at(frame: pl.DataFrame, column: str, row: int) -> pl.DataFrame:
    """``frame`` with a null in ``column`` at ``row``."""
    value = pl.when(pl.int_range(pl.len()) == row).then(None).otherwise(pl.col(column))
    return frame.with_columns(value.alias(column))


# The AIDS release's columns, in its files' order.
AIDS = (
    "age,wtkg,hemo,homo,drugs,karnof,oprior,z30,zprior,preanti,race,gender,str2,strat,"
    "symptom,treat,offtrt,cd40,cd420,cd496,r,cd80,cd820,cens,days,arms"
)


class Page(HTMLParser):
    """The rows of a page's tables, as text, and its banners."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.banners: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
            self._in = "cell"
        elif tag == "p" and ("class", "banner") in attrs:
            self.banners.append("")
            self._in = "banner"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "p"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "cell":
            self.rows[-1][-1] += data
        elif self._in == "banner":
            self.banners[-1] += data


def parsed(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    return parser


def raw_release(n: int = 300, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals with an id the avatars lack, a category coded 0/1/2, gaps in one column."""
    rng = np.random.default_rng(seed)
    age = rng.normal(50, 10, n)
    stage = rng.integers(0, 3, n)
    smoker = rng.choice(["yes", "no"], n)
    bmi = rng.normal(25, 4, n)
    originals = pl.DataFrame(
        {"id": np.arange(n) + 1000, "age": age, "bmi": bmi, "stage": stage, "smoker": smoker}
    )
    avatars = pl.DataFrame(
        {
            "age": age + rng.normal(0, 4, n),
            "bmi": bmi + rng.normal(0, 2, n),
            "stage": np.where(rng.random(n) < 0.3, rng.integers(0, 3, n), stage),
            "smoker": np.where(rng.random(n) < 0.2, "no", smoker),
        }
    )

    def holes(frame: pl.DataFrame, seed: int) -> pl.DataFrame:
        gaps = pl.Series(np.random.default_rng(seed).random(n) < 0.08)
        return frame.with_columns(bmi=pl.when(gaps).then(None).otherwise(pl.col("bmi")))

    return holes(originals, 1), holes(avatars, 2)


def write_raw(frame: pl.DataFrame, path: Path, separator: str) -> Path:
    """As published: the given separator, missing values written NA."""
    frame.write_csv(path, separator=separator, null_value="NA")
    return path
