"""The fit over parquet files, one task per file: the fit of their concatenation to 1e-12,
deterministic, exact fills, the local errors; on a Dask cluster, the local dataset's counts."""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.exceptions import ComputeError, NoDataError

import polars_hidden_rate as phr
from polars_hidden_rate.projection import Projection, partitioned, passes
from polars_hidden_rate.projection.scaling import CategoricalFeature, NumericFeature
from polars_hidden_rate.projection.types import FeatureSpec
from polars_hidden_rate.tasks import LocalTasks
from tests.helpers import cohort, examples, local_cluster

RTOL = 1e-12
MEASURED: list[float] = []  # the largest relative difference of each comparison


def write_cuts(frame: pl.DataFrame, folder: Path, cuts: Sequence[int]) -> list[Path]:
    """``frame`` cut at ``cuts`` (row numbers) into parquet files, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    bounds = [0, *cuts, frame.height]
    files = []
    for k, (start, stop) in enumerate(itertools.pairwise(bounds)):
        path = folder / f"part{k:03d}.parquet"
        frame.slice(start, stop - start).write_parquet(path)
        files.append(path)
    return files


def relative(ours: Any, theirs: Any, scale: Any = None) -> float:
    """The largest ``|ours - theirs| / scale`` (default scale: ``|theirs|``, at least tiny)."""
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if a.size == 0:
        return 0.0
    s = np.abs(b) if scale is None else np.asarray(scale, dtype=np.float64)
    return float(np.max(np.abs(a - b) / np.maximum(s, np.finfo(float).tiny)))


def assert_same_fit(ours: Projection, theirs: Projection) -> float:
    """Equal to ``RTOL``: statistics, fills, eigenvalues (relative to the largest) and each
    component apart from its neighbours (the sign convention applies to both)."""
    assert (ours.model, ours.features, ours.n_rows) == (
        theirs.model,
        theirs.features,
        theirs.n_rows,
    )
    assert (ours.ncp, ours.n_components) == (theirs.ncp, theirs.n_components)
    worst = 0.0
    for mine, other in zip(ours.scaling.features, theirs.scaling.features, strict=True):
        assert type(mine) is type(other)
        if isinstance(mine, NumericFeature):
            assert isinstance(other, NumericFeature)
            worst = max(worst, relative(mine.mean, other.mean, max(abs(other.mean), other.scale)))
            worst = max(worst, relative(mine.scale, other.scale))
            assert (mine.fill is None) == (other.fill is None)
            if other.fill is not None:  # a mean fill of 0.0 may come out as 4e-16
                spread = max(abs(other.fill), other.scale)
                worst = max(worst, relative(mine.fill, other.fill, spread))
        else:
            assert isinstance(other, CategoricalFeature)
            assert mine.modalities == other.modalities
            worst = max(worst, relative(mine.shares, other.shares))
            assert mine.fill == other.fill
    top = theirs.eigenvalues[0]
    worst = max(worst, relative(ours.eigenvalues, theirs.eigenvalues, top))
    values = theirs.eigenvalues
    for k in range(theirs.n_components):
        gaps = [abs(values[k] - values[j]) for j in (k - 1, k + 1) if 0 <= j < len(values)]
        if min(gaps, default=top) > 1e-3 * top:  # well apart: the component is determined
            worst = max(worst, relative(ours.components[k], theirs.components[k], 1.0))
    MEASURED.append(worst)
    assert worst <= RTOL, f"relative difference {worst:.3g}"
    return worst


def mixed(n: int, seed: int) -> pl.DataFrame:
    return cohort(n, seed).drop("id")


FEATURES = {
    "PCA": ["age", "weight", "visit"],
    "MCA": ["sex", "stage", "smoker"],
    "FAMD": ["age", "weight", "visit", "sex", "stage", "smoker"],
}


@pytest.mark.parametrize("model", ["PCA", "MCA", "FAMD"])
@pytest.mark.parametrize(
    "cuts", [[], [1], [1, 2, 3], [700, 701, 1999], [500, 1000, 1500], [2999]], ids=str
)
def test_equals_the_fit_of_the_concatenation(model: str, cuts: list[int], tmp_path: Path) -> None:
    frame = mixed(3000, seed=11)
    files = write_cuts(frame, tmp_path, cuts)
    ours = Projection.fit_partitioned(files, features=FEATURES[model])
    theirs = Projection.fit(frame, features=FEATURES[model])
    assert ours.model == model
    assert_same_fit(ours, theirs)


def test_files_missing_a_modality_and_one_row_files(tmp_path: Path) -> None:
    frame = mixed(2000, seed=12).sort("stage")  # whole modalities in some files only
    files = write_cuts(frame, tmp_path, [1, 2, 900, 901, 1500])
    stages = [pl.read_parquet(f)["stage"].n_unique() for f in files]
    assert max(stages) == 2  # every file lacks two of the four stages
    for features in (FEATURES["MCA"], FEATURES["FAMD"]):
        assert_same_fit(
            Projection.fit_partitioned(files, features=features),
            Projection.fit(frame, features=features),
        )


def test_blocks_restart_at_each_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small blocks: many merges within and across files, still the concatenation's fit.
    monkeypatch.setattr(passes, "BLOCK_ROWS", 97)
    monkeypatch.setattr(passes, "GRAM_BLOCK_VALUES", 50 * 9)
    frame = mixed(1500, seed=13)
    files = write_cuts(frame, tmp_path, [1, 96, 97, 98, 800])
    assert_same_fit(Projection.fit_partitioned(files), Projection.fit(frame))


@st.composite
def split_frames(draw: st.DrawFn) -> tuple[pl.DataFrame, list[int], str]:
    n = draw(st.integers(2, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    impute = draw(st.sampled_from(["none", "median", "mean", "mode"]))
    magnitude = 10.0 ** draw(st.integers(-200, 200))
    frame = pl.DataFrame(
        {
            "x": rng.normal(size=n) * magnitude,
            "k": rng.integers(-3, 4, n) * 1.0,  # many ties: medians and modes between them
            "c": rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1]),
        }
    )
    if impute != "none":
        gaps = rng.random((n, 3)) < 0.2
        gaps[0] = False  # every column keeps a value
        frame = frame.with_columns(
            pl.when(pl.Series(gaps[:, j])).then(None).otherwise(pl.col(name)).alias(name)
            for j, name in enumerate(frame.columns)
        )
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    return frame, cuts, impute


@settings(max_examples=examples(200), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=split_frames(), kind=st.sampled_from(["PCA", "MCA", "FAMD"]))
def test_property_equals_the_fit_of_the_concatenation(
    case: tuple[pl.DataFrame, list[int], str], kind: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    frame, cuts, impute = case
    features = {"PCA": ["x", "k"], "MCA": ["c", "k"], "FAMD": ["x", "k", "c"]}[kind]
    categorical = ["k"] if kind == "MCA" else None
    files = write_cuts(frame, tmp_path_factory.mktemp("parts"), cuts)
    options: dict[str, Any] = {"features": features, "categorical": categorical, "impute": impute}
    try:
        theirs = Projection.fit(frame, **options)
    except (ValueError, ComputeError) as error:  # no variance: the same error
        with pytest.raises(type(error), match=re.escape(str(error))):
            Projection.fit_partitioned(files, **options)
        return
    assert_same_fit(Projection.fit_partitioned(files, **options), theirs)


# --- exact fills ----------------------------------------------------------------------------


SPECIAL = [0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 1e308, -1e308, 2.5, float("nan"), None]


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(
        st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=False, allow_infinity=False)),
        min_size=1,
        max_size=60,
    ),
    cuts=st.lists(st.integers(0, 60), max_size=5),
    infinite=st.booleans(),
)
def test_median_and_mode_are_those_of_polars_bit_for_bit(
    values: list[float | None],
    cuts: list[int],
    infinite: bool,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    if infinite:
        values = [*values, float("inf"), float("-inf"), float("inf")]
    frame = pl.DataFrame({"x": values}, schema={"x": pl.Float64})
    files = write_cuts(
        frame, tmp_path_factory.mktemp("parts"), sorted(min(c, len(values)) for c in cuts)
    )
    schema = frame.schema
    for impute in ("median", "mode"):
        spec = FeatureSpec.resolve(["x"], None, impute, schema)
        try:
            expected = passes.imputed_values(frame.lazy(), spec, schema)
        except ComputeError:
            with pytest.raises(ComputeError, match="no value to impute from"):
                partitioned.imputed_values_of_files(files, spec, schema, LocalTasks())
            continue
        found = partitioned.imputed_values_of_files(files, spec, schema, LocalTasks())
        # Bit for bit, a NaN (inf - inf) included; but for the sign of a zero: Polars' own
        # pick between -0.0 and 0.0 (equal to it) depends on the order of the rows.
        ours = np.array([found.numbers["x"]]) + 0.0
        theirs = np.array([expected.numbers["x"]]) + 0.0
        assert ours.tobytes() == theirs.tobytes(), impute


def test_mean_fill_to_rounding_and_mode_of_text(tmp_path: Path) -> None:
    rng = np.random.default_rng(14)
    n = 5000
    frame = pl.DataFrame(
        {
            "x": rng.normal(1e6, 1.0, n),
            "c": [("b", "a", "c", None)[k % 4] for k in range(n)],  # a tie: the smallest wins
        }
    ).with_columns(pl.when(pl.col("x") > 1e6 + 1).then(None).otherwise(pl.col("x")).alias("x"))
    files = write_cuts(frame, tmp_path, [1, 2, 1000, 4000])
    for impute in ("mean", "mode"):
        spec = FeatureSpec.resolve(None, None, impute, frame.schema)
        expected = passes.imputed_values(frame.lazy(), spec, frame.schema)
        found = partitioned.imputed_values_of_files(files, spec, frame.schema, LocalTasks())
        assert found.modalities["c"] == expected.modalities["c"] == "a"
        assert relative(found.numbers["x"], expected.numbers["x"]) <= 1e-15


# --- deterministic ---------------------------------------------------------------------------


class ShuffledTasks:
    """Tasks on a thread pool, each started after a random pause: they finish in any order."""

    def __init__(self, seed: int) -> None:
        self.pool = ThreadPoolExecutor(4)
        self.random = random.Random(seed)

    def run(self, name: str, function: Callable[..., Any], *args: Any) -> Future[Any]:
        pause = self.random.random() * 0.01

        def task() -> Any:
            time.sleep(pause)
            return function(*(a.result() if isinstance(a, Future) else a for a in args))

        return self.pool.submit(task)

    def results(self, handles: Sequence[Future[Any]]) -> Iterator[Any]:
        for handle in handles:
            yield handle.result()


def fit_bytes(projection: Projection) -> bytes:
    parts = [projection.eigenvalues.tobytes(), projection.components.tobytes()]
    for f in projection.scaling.features:
        if isinstance(f, NumericFeature):
            parts.append(np.array([f.mean, f.scale, f.fill or 0.0]).tobytes())
        else:
            parts.append(f.shares.tobytes() + repr((f.modalities, f.fill)).encode())
    return b"".join(parts)


@pytest.mark.parametrize("impute", ["none", "median", "mean"])
def test_deterministic_whatever_the_completion_order(impute: str, tmp_path: Path) -> None:
    frame = mixed(4000, seed=15)
    if impute != "none":
        frame = frame.with_columns(
            pl.when(pl.int_range(pl.len()) % 9 == 0).then(None).otherwise(pl.col("weight"))
            .alias("weight")
        )  # fmt: skip
    files = write_cuts(frame, tmp_path, [3, 500, 501, 1700, 2900, 3999])
    reference = fit_bytes(Projection.fit_partitioned(files, impute=impute))  # type: ignore[arg-type]
    for seed in range(3):
        tasks = ShuffledTasks(seed)
        fitted = Projection.fit_partitioned(files, impute=impute, tasks=tasks)  # type: ignore[arg-type]
        assert fit_bytes(fitted) == reference


# --- errors ----------------------------------------------------------------------------------


def test_errors_are_the_local_ones(tmp_path: Path) -> None:
    frame = mixed(300, seed=16)
    gaps = frame.with_columns(
        pl.when(pl.int_range(pl.len()).is_in([5, 250])).then(None).otherwise(pl.col("age"))
        .alias("age")
    )  # fmt: skip
    cases: list[tuple[pl.DataFrame, dict[str, Any], type[Exception]]] = [
        (gaps, {}, ComputeError),  # missing values without impute
        (frame.head(0), {}, NoDataError),  # empty originals
        (frame.with_columns(pl.lit(1.0).alias("age")), {"features": ["age"]}, ValueError),
        (
            gaps.with_columns(pl.lit(None, pl.Float64).alias("age")),
            {"impute": "mean"},
            ComputeError,
        ),
        (frame, {"features": ["age", "weight"], "ncp": 3}, ValueError),
        # An integer float64 cannot hold; NaN in a number taken as a category.
        (frame.with_columns(visit=pl.col("visit").cast(pl.Int64) + 2**53 - 1), {}, ComputeError),
        (
            frame.with_columns(
                code=pl.when(pl.int_range(pl.len()) == 7)
                .then(float("nan"))
                .otherwise(pl.int_range(pl.len()) % 3 * 1.0)
            ),
            {"categorical": ["code"]},
            ComputeError,
        ),
    ]
    for k, (data, options, kind) in enumerate(cases):
        files = write_cuts(data, tmp_path / str(k), [0, 1] if data.height else [])
        with pytest.raises(kind) as local:
            Projection.fit(data, **options)
        with pytest.raises(kind) as ours:
            Projection.fit_partitioned(files, **options)
        assert str(ours.value) == str(local.value)


@pytest.mark.parametrize("name", ["count", "bucket", "__polars_hidden_rate_value"])
def test_a_mode_fill_of_any_column_name(name: str, tmp_path: Path) -> None:
    # The modes' value counts are named by the package, never after the column.
    frame = mixed(400, seed=17).rename({"stage": name})
    gaps = frame.with_columns(
        pl.when(pl.int_range(pl.len()) % 9 == 0).then(None).otherwise(pl.col(name)).alias(name)
    )
    files = write_cuts(gaps, tmp_path, [150, 151])
    assert_same_fit(
        Projection.fit_partitioned(files, impute="mode"), Projection.fit(gaps, impute="mode")
    )


def test_too_many_modalities_over_all_files(tmp_path: Path) -> None:
    # No file alone exceeds the width; together they do.
    n = passes.MAX_WIDTH + 10
    frame = pl.DataFrame({"x": np.arange(n) * 1.0, "code": [f"id{k:05d}" for k in range(n)]})
    files = write_cuts(frame, tmp_path, [n // 2])
    with pytest.raises(ValueError, match=r"more than 4096 scaled columns.*'code' alone has"):
        Projection.fit(frame)
    with pytest.raises(ValueError, match=r"more than 4096 scaled columns.*'code' alone has"):
        Projection.fit_partitioned(files)


def test_no_file_is_an_error() -> None:
    with pytest.raises(ValueError, match="files is empty"):
        Projection.fit_partitioned([])


# --- the WBCD data ----------------------------------------------------------------------------


def test_wbcd_in_files_equals_the_whole_fit(wbcd_dir: Path, tmp_path: Path) -> None:
    frame = pl.read_csv(wbcd_dir / "originals.csv").drop("Sample_code_number")
    for cuts in ([1, 2, 100, 341, 682], list(range(50, 683, 50))):
        files = write_cuts(frame, tmp_path / str(len(cuts)), cuts)
        for categorical in (None, ["Class"], ["Class", "Mitoses"]):
            assert_same_fit(
                Projection.fit_partitioned(files, categorical=categorical),
                Projection.fit(frame, categorical=categorical),
            )


# --- on a Dask cluster ------------------------------------------------------------------------


@pytest.fixture
def threads_client() -> Iterator[Any]:
    with local_cluster(processes=False) as client:
        yield client


def raw_frames(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    left = mixed(n, seed).with_columns(
        id=pl.Series(rng.permutation(n) * 3 + 1),
        weight=pl.when(pl.int_range(pl.len()) % 11 == 0).then(None).otherwise(pl.col("weight")),
    )
    right = (
        mixed(n, seed + 1).with_columns(id=left["id"]).sample(fraction=1.0, shuffle=True, seed=seed)
    )
    return left, right


RAN: dict[str, list[str]] = {"moments": [], "gram": []}  # where each file's pass ran
_PASSES: dict[str, Callable[..., Any]] = {
    "moments": partitioned._features_task,
    "gram": partitioned._gram_task,
}


def _where() -> str:
    from distributed import get_worker

    try:
        return str(get_worker().address)
    except ValueError:  # not on a worker
        return "here"


def _spy_moments(*args: Any) -> Any:
    # Module-level, so that Dask sends it by reference: the workers (threads) append here.
    RAN["moments"].append(_where())
    return _PASSES["moments"](*args)


def _spy_gram(*args: Any) -> Any:
    RAN["gram"].append(_where())
    return _PASSES["gram"](*args)


@pytest.mark.slow
@pytest.mark.parametrize("impute", ["median", "mean", "mode"])
def test_cluster_fits_on_the_workers_and_writes_the_local_parts(
    threads_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, impute: str
) -> None:
    left, right = raw_frames(900, seed=17)
    write_cuts(left, tmp_path / "o", [1, 300, 301, 700])
    write_cuts(right, tmp_path / "a", [450])
    options: dict[str, Any] = {
        "on": "id",
        "features": ["age", "weight", "visit", "stage", "smoker"],
        "ncp": 3,
        "impute": impute,
    }

    def refuse(*args: Any, **kwargs: Any) -> Projection:
        raise AssertionError("the projection was fitted on the whole scan")

    monkeypatch.setattr(Projection, "fit", classmethod(refuse))
    monkeypatch.setattr(partitioned, "_features_task", _spy_moments)
    monkeypatch.setattr(partitioned, "_gram_task", _spy_gram)
    for places in RAN.values():
        places.clear()
    local = phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "local", **options
    )
    remote = phr.local_cloaking_to_parquet(
        tmp_path / "o", tmp_path / "a", tmp_path / "remote", cluster=threads_client, **options
    )
    assert remote == local
    parts = sorted(path.name for path in (tmp_path / "local").iterdir())
    assert parts == sorted(path.name for path in (tmp_path / "remote").iterdir())
    assert len(parts) == 5
    for name in parts:
        ours = pl.read_parquet(tmp_path / "remote" / name)
        theirs = pl.read_parquet(tmp_path / "local" / name)
        assert ours.equals(theirs)
        assert (
            ours["local_cloaking"].to_numpy().tobytes()
            == theirs["local_cloaking"].to_numpy().tobytes()
        )
    workers = set(threads_client.scheduler_info()["workers"])
    for stage, places in RAN.items():  # 5 files: locally, then on the workers
        assert places[:5] == ["here"] * 5, stage
        assert len(places) == 10, stage
        assert set(places[5:]) <= workers, stage
