"""The projection: saiph's conventions, exact components, a streaming fit, and the metric hook."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.exceptions import (
    ColumnNotFoundError,
    ComputeError,
    DuplicateError,
    NoDataError,
    SchemaError,
)

import polars_hidden_rate as phr
from polars_hidden_rate.plan import plan
from polars_hidden_rate.projection import Projection, passes
from polars_hidden_rate.projection.scaling import (
    CategoricalFeature,
    Feature,
    Model,
    NumericFeature,
    Scaling,
)
from polars_hidden_rate.provenance import describe_settings, with_fit
from tests.helpers import (
    STAGES,
    brute_force_counts,
    cohort,
    examples,
    hidden_share,
    null_at,
    projected_counts,
)

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)


def perturbed(frame: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Avatars of a kind: same types, values moved a little, rows shuffled within the frame."""
    rng = np.random.default_rng(seed)
    n = frame.height
    return frame.with_columns(
        pl.col("age") + pl.Series(rng.integers(-3, 4, n)),
        pl.col("weight") + pl.Series(np.round(rng.normal(0, 2, n), 1)),
        pl.col("sex").shuffle(seed=seed),
    )


def coordinates(frame: FrameT, proj: Projection) -> np.ndarray:
    out = proj.transform(frame)
    data = out.collect() if isinstance(out, pl.LazyFrame) else out
    return data.select(proj.coordinate_columns()).to_numpy()


def squared_distances(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    d2: np.ndarray = ((x[:, None, :] - y[None, :, :]) ** 2).sum(axis=2)
    return d2


def eigen_groups(values: np.ndarray, rtol: float = 1e-8) -> list[slice]:
    """Runs of equal eigenvalues: inside one, the basis of the eigenspace is not unique."""
    groups, start = [], 0
    for k in range(1, len(values) + 1):
        if k == len(values) or abs(values[k] - values[start]) > rtol * values[0]:
            groups.append(slice(start, k))
            start = k
    return groups


def assert_same_space(ours: np.ndarray, theirs: np.ndarray, values: np.ndarray) -> None:
    """Equal up to the sign of each component, and up to a rotation inside an eigenspace."""
    scale = max(1.0, float(np.abs(theirs).max()))
    for group in eigen_groups(values):
        a, b = ours[:, group], theirs[:, group]
        np.testing.assert_allclose(a @ a.T, b @ b.T, atol=1e-9 * scale**2)
        if group.stop - group.start == 1:
            sign = np.sign(float(a[:, 0] @ b[:, 0])) or 1.0
            np.testing.assert_allclose(a * sign, b, atol=1e-9 * scale)


# ---------------------------------------------------------------------------------------------
# Full projected space: distances are those of the scaled rows
# ---------------------------------------------------------------------------------------------


@st.composite
def raw_frames(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals and avatars with small-integer numbers and few-letter categories."""
    n = draw(st.integers(3, 30))
    n_numeric = draw(st.integers(0, 3))
    n_categorical = draw(st.integers(0 if n_numeric else 1, 3))
    columns: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for j in range(n_numeric):
        values = st.integers(-3, 3)
        columns[f"x{j}"] = draw(st.lists(values, min_size=n, max_size=n))
        other[f"x{j}"] = draw(st.lists(values, min_size=n, max_size=n))
    for j in range(n_categorical):
        letters = st.sampled_from("abcd"[: draw(st.integers(1, 4))])
        columns[f"c{j}"] = draw(st.lists(letters, min_size=n, max_size=n))
        # Avatars may hold a modality the originals never had ("z").
        other[f"c{j}"] = draw(st.lists(st.sampled_from("abcz"), min_size=n, max_size=n))
    return pl.DataFrame(columns), pl.DataFrame(other)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_frames())
def test_full_space_distances_are_scaled_distances(
    frames: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    originals, avatars = frames
    if all(column.n_unique() == 1 for column in originals.iter_columns()):
        with pytest.raises(ValueError, match="nothing to project"):
            Projection.fit(originals)
        return
    proj = Projection.fit(originals)
    scaled_x, scaled_y = proj.scaled(originals), proj.scaled(avatars)
    full_x, full_y = scaled_x @ proj.components.T, scaled_y @ proj.components.T
    expected = squared_distances(scaled_x, scaled_y)
    atol = 1e-9 * max(1.0, float(expected.max()))
    np.testing.assert_allclose(squared_distances(full_x, full_y), expected, atol=atol)
    # The originals lie in the span of the first n_components: the expressions Polars evaluates
    # give their distances with every dimension the originals have.
    proj = Projection.fit(originals, ncp=proj.n_components)
    dims = coordinates(originals, proj)
    expected = squared_distances(scaled_x, scaled_x)
    np.testing.assert_allclose(squared_distances(dims, dims), expected, atol=atol)
    # The Polars expressions and the numpy matrix agree for avatars too (unseen modalities too).
    np.testing.assert_allclose(
        coordinates(avatars, proj),
        full_y[:, : proj.ncp],
        atol=1e-9 * max(1.0, np.abs(full_y).max()),
    )
    # ncp="all": every column of the scaled space, so the avatars keep the distance they have
    # outside the originals' span (an unseen modality, a broken dependency).
    every = Projection.fit(originals, ncp="all")
    assert every.ncp == every.max_ncp == scaled_x.shape[1] >= every.n_components
    expected = squared_distances(scaled_y, scaled_x)
    got = squared_distances(coordinates(avatars, every), coordinates(originals, every))
    np.testing.assert_allclose(got, expected, atol=1e-9 * max(1.0, float(expected.max())))


# ---------------------------------------------------------------------------------------------
# Agreement with saiph
# ---------------------------------------------------------------------------------------------


def to_pandas(frame: pl.DataFrame) -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({name: frame[name].to_list() for name in frame.columns})


@pytest.mark.parametrize(
    ("features", "model"),
    [
        (["age", "weight", "height"], "PCA"),
        (["sex", "stage", "smoker", "site"], "MCA"),
        (["age", "weight", "height", "sex", "stage", "smoker", "site"], "FAMD"),
    ],
)
def test_agrees_with_saiph(features: list[str], model: str) -> None:
    saiph = pytest.importorskip("saiph")
    rng = np.random.default_rng(7)
    n = 300
    stage = rng.choice(STAGES, n)
    frame = pl.DataFrame(
        {
            "age": rng.integers(20, 90, n),
            "weight": rng.normal(70, 12, n),
            "height": 150 + rng.gamma(4, 6, n),
            "sex": rng.choice(["F", "M"], n, p=[0.6, 0.4]),
            "stage": stage,
            "smoker": np.where(stage == "IV", rng.random(n) < 0.6, rng.random(n) < 0.2),
            "site": rng.choice(["breast", "colon", "lung", "skin", "other"], n),
        }
    ).select(features)
    originals, avatars = frame.head(200), frame.tail(100)
    if "site" in features:  # a modality the originals never had
        avatars = avatars.with_columns(
            pl.Series("site", ["bone"] * 5 + avatars["site"][5:].to_list())
        )
    fitted = saiph.fit(to_pandas(originals), nf=None)
    theirs_x = saiph.transform(to_pandas(originals), fitted).to_numpy()
    theirs_y = saiph.transform(to_pandas(avatars), fitted).to_numpy()

    proj = Projection.fit(originals, ncp=None)
    proj = Projection.fit(originals, ncp=proj.n_components)
    assert proj.model == model
    rank = proj.n_components
    values = proj.eigenvalues[:rank]
    assert_same_space(coordinates(originals, proj), theirs_x[:, :rank], values)
    assert_same_space(coordinates(avatars, proj), theirs_y[:, :rank], values)
    np.testing.assert_allclose(
        proj.explained_variance_ratio, fitted.explained_var_ratio[:rank], atol=1e-12
    )


def saiph_frames(features: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """200 originals and 200 synthetic records; the synthetic ones break the originals'
    exact dependencies (a modality they never had, weights that ignore the stage)."""
    rng = np.random.default_rng(11)
    n = 400
    stage = rng.choice(STAGES, n)
    frame = pl.DataFrame(
        {
            "age": rng.integers(20, 90, n),
            "weight": rng.normal(70, 12, n),
            "height": 150 + rng.gamma(4, 6, n),
            "sex": rng.choice(["F", "M"], n, p=[0.6, 0.4]),
            "stage": stage,
            # Text, not Boolean: saiph's nf=None counts a Boolean column as one column
            # (pd.get_dummies leaves it alone) and so keeps one component fewer than it has.
            "smoker": np.where(stage == "IV", rng.random(n) < 0.6, rng.random(n) < 0.2).astype(str),
            "site": rng.choice(["breast", "colon", "lung", "skin", "other"], n),
        }
    ).select(features)
    originals, synthetic = frame.head(200), frame.tail(200)
    if "site" in features:
        synthetic = synthetic.with_columns(
            pl.Series("site", ["bone"] * 9 + synthetic["site"][9:].to_list())
        )
    return originals, synthetic


@pytest.mark.parametrize(
    ("features", "model"),
    [
        (["age", "weight", "height"], "PCA"),
        (["sex", "stage", "smoker", "site"], "MCA"),
        (["age", "weight", "height", "sex", "stage", "smoker", "site"], "FAMD"),
    ],
)
def test_every_component_is_saiphs_space(features: list[str], model: str) -> None:
    # ncp="all" is saiph's nf=None: the counts and distances equal a float64 brute force on
    # saiph's own coordinates, also along the directions the originals do not span.
    saiph = pytest.importorskip("saiph")
    originals, synthetic = saiph_frames(features)
    fitted = saiph.fit(to_pandas(originals), nf=None)
    x = saiph.transform(to_pandas(originals), fitted).to_numpy()
    y = saiph.transform(to_pandas(synthetic), fitted).to_numpy()
    every = Projection.fit(originals, ncp="all")
    assert every.model == model
    assert x.shape[1] == every.max_ncp == every.ncp
    if model != "PCA":
        assert every.n_components < every.max_ncp

    d2 = squared_distances(y, x)
    nearest_two = np.sqrt(np.sort(d2, axis=1)[:, :2])
    dcr = phr.distance_to_closest(originals, synthetic, ncp="all")["distance_to_closest"]
    np.testing.assert_allclose(dcr.to_numpy(), nearest_two[:, 0], rtol=1e-9, atol=1e-12)
    nndr = phr.closest_distances_ratio(originals, synthetic, ncp="all")
    np.testing.assert_allclose(
        nndr["closest_distances_ratio"].to_numpy(),
        np.divide(
            nearest_two[:, 0], nearest_two[:, 1], out=np.ones(len(y)), where=nearest_two[:, 1] > 0
        ),
        rtol=1e-9,
    )
    counts = phr.local_cloaking(originals, synthetic, ncp="all")["local_cloaking"].to_numpy()
    np.testing.assert_array_equal(counts, brute_force_counts(x, y, 1e-9))
    # A synthetic set of another size is measured against every original all the same.
    fewer = phr.distance_to_closest(originals, synthetic.head(37), ncp="all")
    np.testing.assert_allclose(
        fewer["distance_to_closest"].to_numpy(), nearest_two[:37, 0], rtol=1e-9, atol=1e-12
    )
    if model != "PCA":  # stopping at the rank loses the synthetic records' distance off the span
        spanned = phr.distance_to_closest(originals, synthetic, ncp=every.n_components)
        assert (spanned["distance_to_closest"].to_numpy() < nearest_two[:, 0] - 1e-6).any()


def test_an_integer_ncp_takes_components_past_the_rank_up_to_the_scaled_width() -> None:
    frame = cohort(60, seed=3)
    features = ["age", "sex", "stage"]  # 1 number + 2 + 4 modalities: 7 columns, rank 5
    every = Projection.fit(frame, features=features, ncp="all")
    assert (every.ncp, every.max_ncp, every.n_components) == (7, 7, 5)
    six = Projection.fit(frame, features=features, ncp=6)
    assert six.ncp == 6
    np.testing.assert_array_equal(coordinates(frame, six), coordinates(frame, every)[:, :6])
    # Past the scaled width there is no component: refused, naming the width and "all".
    with pytest.raises(ValueError, match=r"1 <= ncp <= 7, .*span 5.*'all'; got ncp=8"):
        Projection.fit(frame, features=features, ncp=8)
    # The default stays the method's 5.
    assert Projection.fit(frame, features=features).ncp == 5


@pytest.mark.parametrize(
    ("ncp", "error", "match"),
    [
        ("ALL", ValueError, "integer or 'all', got 'ALL'"),
        ("5", ValueError, "integer or 'all', got '5'"),
        (2.0, TypeError, "integer or 'all', got 2.0 of type float"),
        (True, TypeError, "integer or 'all', got True"),
        (0, ValueError, "`ncp` must be at least 1, got 0"),
    ],
)
def test_ncp_is_an_integer_or_all(ncp: object, error: type[Exception], match: str) -> None:
    originals, avatars = cohort(30, seed=1), cohort(30, seed=2)
    with pytest.raises(error, match=match):
        Projection.fit(originals, ncp=ncp)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        phr.local_cloaking(originals.lazy(), avatars.lazy(), ncp=ncp)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        phr.hidden_rate(originals, avatars, coords=["age"], ncp=ncp)  # type: ignore[arg-type]


def test_ncp_all_with_coords_takes_every_coords_column() -> None:
    originals, avatars = cohort(40, seed=4), cohort(40, seed=5)
    columns = ["age", "weight"]
    every = phr.local_cloaking(originals, avatars, coords=columns, ncp="all")
    assert every.equals(phr.local_cloaking(originals, avatars, coords=columns))
    one = phr.local_cloaking(originals, avatars, coords=columns, ncp=1)
    assert not every["local_cloaking"].equals(one["local_cloaking"])
    with pytest.raises(ValueError, match=r"ncp <= 2 or be 'all', got ncp=3"):
        phr.local_cloaking(originals, avatars, coords=columns, ncp=3)


# ---------------------------------------------------------------------------------------------
# The real WBCD data: the pipeline equals a direct float64 computation
# ---------------------------------------------------------------------------------------------


def wbcd(wbcd_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    originals = pl.read_csv(wbcd_dir / "originals.csv").with_columns(
        pl.col("Class").cast(pl.String)
    )
    avatars = pl.read_csv(wbcd_dir / "avatars_k20.csv").with_columns(
        pl.col("Class").cast(pl.String)
    )
    return originals, avatars


def direct_coordinates(
    originals: pl.DataFrame, avatars: pl.DataFrame, ncp: int
) -> tuple[np.ndarray, np.ndarray]:
    """saiph's FAMD conventions written out in numpy: z-scores, (dummy - p) / sqrt(p), full SVD."""
    numeric = [c for c in avatars.columns if c != "Class"]
    x = originals.select(numeric).to_numpy().astype(float)
    y = avatars.select(numeric).to_numpy().astype(float)
    mean, std = x.mean(axis=0), x.std(axis=0)
    blocks_x, blocks_y = [(x - mean) / std], [(y - mean) / std]
    for level in sorted(originals["Class"].unique().to_list()):
        p = float((originals["Class"] == level).mean())
        blocks_x.append(((originals["Class"].to_numpy() == level) - p)[:, None] / np.sqrt(p))
        blocks_y.append(((avatars["Class"].to_numpy() == level) - p)[:, None] / np.sqrt(p))
    scaled_x, scaled_y = np.hstack(blocks_x), np.hstack(blocks_y)
    _, _, vt = np.linalg.svd(scaled_x / len(scaled_x), full_matrices=False)
    return scaled_x @ vt[:ncp].T, scaled_y @ vt[:ncp].T


@pytest.mark.parametrize("ncp", [2, 5])
def test_wbcd_hidden_rate_equals_direct_computation(wbcd_dir: Path, ncp: int) -> None:
    originals, avatars = wbcd(wbcd_dir)
    x, y = direct_coordinates(originals, avatars, ncp)
    expected = brute_force_counts(x, y, 1e-9)

    # Sample_code_number is not in the avatars: the default features leave it out.
    eager = phr.local_cloaking(originals, avatars, ncp=ncp)
    lazy = originals.lazy().avatar.local_cloaking(avatars.lazy(), ncp=ncp)  # type: ignore[attr-defined]
    assert isinstance(lazy, pl.LazyFrame)
    np.testing.assert_array_equal(eager["local_cloaking"].to_numpy(), expected)
    np.testing.assert_array_equal(lazy.collect()["local_cloaking"].to_numpy(), expected)
    rate = phr.hidden_rate(originals.lazy(), avatars.lazy(), ncp=ncp)
    assert rate == hidden_share(expected)
    assert rate == phr.hidden_rate(originals, avatars, ncp=ncp, features=avatars.columns)
    assert 0.0 < rate < 100.0

    proj = Projection.fit(originals.drop("Sample_code_number"), ncp=ncp)
    assert proj.model == "FAMD"
    assert proj.n_components == 10  # 9 numbers + 2 modalities of one variable
    ours = coordinates(originals, proj)
    sign = np.sign((ours * x).sum(axis=0))
    np.testing.assert_allclose(ours * sign, x, atol=1e-10)


# ---------------------------------------------------------------------------------------------
# Streaming fit = in-memory fit
# ---------------------------------------------------------------------------------------------


def test_streaming_fit_equals_in_memory_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = cohort(5000, seed=3).drop("id")
    in_memory = Projection.fit(frame)
    path = tmp_path / "originals.parquet"
    frame.write_parquet(path, row_group_size=700)

    blocks: list[int] = []
    real_blocks = passes._blocks

    def counted(source: pl.LazyFrame, rows: int) -> Iterator[pl.DataFrame]:
        for block in real_blocks(source, rows):
            blocks.append(block.height)
            yield block

    monkeypatch.setattr(passes, "_blocks", counted)
    monkeypatch.setattr(passes, "BLOCK_ROWS", 333)
    monkeypatch.setattr(passes, "GRAM_BLOCK_VALUES", 300 * 11)
    streamed = Projection.fit(pl.scan_parquet(path))
    # Pass 1 in blocks of 333 rows; pass 2 in blocks of 300 rows (3300 values of 11 columns).
    assert blocks == [333] * 15 + [5] + [300] * 16 + [200]

    # The scaled matrix and its SVD, all in memory, as the reference.
    scaled = in_memory.scaled(frame)
    _, singular, vt = np.linalg.svd(scaled, full_matrices=False)
    rank = in_memory.n_components
    for fitted in (in_memory, streamed):
        assert fitted.model == "FAMD"
        np.testing.assert_allclose(fitted.eigenvalues[:rank], singular[:rank] ** 2, rtol=1e-9)
        signs = np.sign((fitted.components[:rank] * vt[:rank]).sum(axis=1))
        np.testing.assert_allclose(fitted.components[:rank] * signs[:, None], vt[:rank], atol=1e-9)
    np.testing.assert_allclose(streamed.components[:rank], in_memory.components[:rank], atol=1e-9)
    np.testing.assert_allclose(
        coordinates(frame, streamed), coordinates(frame, in_memory), atol=1e-9
    )
    np.testing.assert_allclose(
        streamed.explained_variance_ratio, in_memory.explained_variance_ratio, rtol=1e-9
    )


def test_fit_is_deterministic_whatever_the_batches() -> None:
    frame = cohort(3000, seed=4).drop("id")
    eager = Projection.fit(frame)
    lazy = Projection.fit(pl.concat([frame.slice(0, 1234).lazy(), frame.slice(1234).lazy()]))
    np.testing.assert_array_equal(eager.components, lazy.components)
    np.testing.assert_array_equal(eager.eigenvalues, lazy.eigenvalues)
    assert coordinates(frame, eager).tobytes() == coordinates(frame.lazy(), lazy).tobytes()


# ---------------------------------------------------------------------------------------------
# Conventions
# ---------------------------------------------------------------------------------------------


def wide_frames(model: str, wide: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals and avatars with many modalities: a 40-level code, binary flags (``wide``
    more of them) and (but for MCA) numbers (``wide`` more); the avatars hold a modality the
    originals never had."""
    rng = np.random.default_rng(11)
    n = 1500
    columns: dict[str, Any] = {"code": [f"k{v}" for v in rng.integers(0, 40, n)]}
    columns |= {f"flag{j}": rng.choice(["y", "n"], n) for j in range(6 + wide)}
    if model == "FAMD":
        columns |= {f"x{j}": rng.normal(0, 10.0 ** (j % 4), n) for j in range(3 + wide)}
    frame = pl.DataFrame(columns)
    unseen = pl.when(pl.int_range(pl.len()) % 9 == 0).then(pl.lit("new")).otherwise("code")
    return frame.head(1000), frame.tail(500).with_columns(unseen.alias("code"))


def sum_in_the_fixed_order(terms: list[np.ndarray]) -> np.ndarray:
    """The documented order of a coordinate's sum: left to right in runs of 32 terms, then the
    runs' sums pairwise, level by level, an odd last one carried up as it is."""
    level = []
    for start in range(0, len(terms), 32):
        run = terms[start]
        for term in terms[start + 1 : start + 32]:
            run = run + term
        level.append(run)
    while len(level) > 1:
        pairs = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        level = [*pairs, level[-1]] if len(level) % 2 else pairs
    return level[0]


def coordinates_in_column_order(frame: pl.DataFrame, proj: Projection) -> np.ndarray:
    """The coordinates in numpy, each the sum of its features' terms in column order (left to
    right up to 32 terms, `sum_in_the_fixed_order`): loading times scaled column for a number;
    for the categorical columns, the row's profile times the sum of their modalities' loadings
    over divisors, less the centres' share."""
    scaled = proj.scaled(frame)  # numbers as Polars scales them (x / s is x * (1 / s) there)
    scaling = proj.scaling
    categorical = scaling.categorical
    known = sum(frame[f.name].is_in(list(f.modalities)).to_numpy() for f in categorical)
    q = len(categorical)
    profile = np.where(known > 0, q / np.maximum(known, 1), 0.0) if proj.model == "MCA" else 1.0
    columns = []
    for component in proj.components[: proj.ncp]:
        terms: list[np.ndarray] = []
        lookups: list[np.ndarray] = []
        constant, offset = 0.0, 0
        for feature in scaling.features:
            if isinstance(feature, CategoricalFeature):
                width = len(feature.modalities)
                divisors = np.sqrt(feature.shares * (q if proj.model == "MCA" else 1))
                per_unit = component[offset : offset + width] / divisors
                table = dict(zip(feature.modalities, per_unit.tolist(), strict=True))
                lookups.append(np.array([table.get(v, 0.0) for v in frame[feature.name].to_list()]))
                constant -= float(per_unit @ feature.shares)
            else:
                width = 1
                terms.append(scaled[:, offset] * component[offset])
            offset += width
        if lookups:
            terms.append(profile * sum_in_the_fixed_order(lookups) + constant)
        columns.append(sum_in_the_fixed_order(terms))
    return np.column_stack(columns)


@pytest.mark.parametrize(("model", "wide"), [("FAMD", 0), ("MCA", 0), ("FAMD", 70), ("MCA", 70)])
def test_many_components_and_modalities_sum_in_column_order_eager_or_lazy(
    model: str, wide: int
) -> None:
    # From three terms pl.sum_horizontal adds in a tree its thread pool shapes: an eager
    # frame and the same frame lazy differed in the last bits. The terms go left to right up
    # to 32 of them (every case of `wide=0`), in the fixed tree beyond (`wide=70`: 73 numbers
    # and 77 categorical columns).
    originals, avatars = wide_frames(model, wide)
    fitted = Projection.fit(originals)
    proj = Projection.fit(originals, ncp=40 if wide else fitted.n_components)
    assert proj.model == model
    assert proj.ncp > 20
    for frame in (originals, avatars):
        expected = coordinates_in_column_order(frame, proj)
        eager = coordinates(frame, proj)
        lazy = coordinates(frame.lazy(), proj)
        streamed = (
            proj.transform(frame.lazy())
            .collect(engine="streaming")
            .select(proj.coordinate_columns())
            .to_numpy()
        )
        for found in (eager, lazy, streamed):
            assert found.tobytes() == expected.tobytes()


def expression_depth(expr: pl.Expr) -> int:
    """The depth of an expression's tree: 1 for a column or a literal."""
    return 1 + max((expression_depth(inner) for inner in expr.meta.pop()), default=0)


@pytest.mark.parametrize(("numeric", "categorical"), [(1000, 0), (300, 300), (0, 600)])
def test_a_wide_frame_s_coordinates_are_shallow_expressions(numeric: int, categorical: int) -> None:
    # A chain of p additions has depth p, and Polars takes time and memory quadratic in it:
    # 3,000 x 2,000 numbers took minutes and 7 GB. Runs of 32, then a balanced tree.
    features: list[Feature] = [
        NumericFeature(f"x{j}", pl.Float64(), 0.0, 1.0) for j in range(numeric)
    ]
    features += [
        CategoricalFeature(f"c{j}", pl.String(), ("a", "b"), np.array([0.5, 0.5]))
        for j in range(categorical)
    ]
    model: Model = "PCA" if not categorical else "MCA" if not numeric else "FAMD"
    scaling = Scaling(tuple(features), model)
    component = np.linspace(-1.0, 1.0, scaling.width)
    depth = expression_depth(scaling.coordinate(component))
    terms = max(numeric + (categorical > 0), categorical)
    assert depth <= 32 + math.ceil(math.log2(terms / 32)) + 8, depth


def test_with_inputs_refuses_a_column_of_its_name() -> None:
    frame = cohort(50, seed=2).drop("id")
    proj = Projection.fit(frame, ncp=2)
    taken = proj.scaling.input_names[0]
    with pytest.raises(DuplicateError, match=taken):
        proj.transform(frame.with_columns(pl.lit(1.0).alias(taken)))
    inputs = proj.with_inputs(frame.lazy()).collect()
    assert inputs.columns == [*frame.columns, *proj.scaling.input_names]
    assert proj.transform(frame).columns == [*frame.columns, "Dim1", "Dim2"]


def test_transform_keeps_the_frame_kind_and_adds_dims() -> None:
    frame = cohort(200, seed=1)
    proj = Projection.fit(frame, features=["age", "weight", "sex", "stage"], ncp=3)
    eager = proj.transform(frame)
    lazy = proj.transform(frame.lazy())
    assert isinstance(eager, pl.DataFrame)
    assert isinstance(lazy, pl.LazyFrame)
    assert eager.columns == [*frame.columns, "Dim1", "Dim2", "Dim3"]
    assert lazy.collect().equals(eager)
    assert lazy.collect(engine="streaming").equals(eager)
    assert proj.explained_variance_ratio.shape == (3,)
    assert 0 < proj.explained_variance_ratio.sum() < 1
    assert np.all(np.diff(proj.explained_variance_ratio) <= 0)


def test_sign_convention_largest_loading_positive() -> None:
    frame = cohort(300, seed=2).drop("id")
    proj = Projection.fit(frame)
    for component in proj.components[: proj.n_components]:
        assert component[np.argmax(np.abs(component))] > 0
    # Reversing the rows changes no component.
    again = Projection.fit(frame.reverse())
    rank = proj.n_components
    np.testing.assert_allclose(again.components[:rank], proj.components[:rank], atol=1e-10)


def test_numeric_scaling_uses_population_std_and_constant_divided_by_one() -> None:
    frame = pl.DataFrame({"x": [1.0, 2.0, 3.0, 6.0], "k": [7, 7, 7, 7]})
    proj = Projection.fit(frame)
    scaled = proj.scaled(frame)
    x = frame["x"].to_numpy()
    np.testing.assert_allclose(scaled[:, 0], (x - x.mean()) / x.std(ddof=0))
    assert (scaled[:, 1] == 0).all()
    avatars = pl.DataFrame({"x": [1.0], "k": [9]})
    assert proj.scaled(avatars)[0, 1] == 2.0
    assert proj.n_components == 1


def test_categorical_scaling_and_unseen_modality() -> None:
    frame = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0], "c": ["a", "b", "b", "b"]})
    proj = Projection.fit(frame)
    assert proj.scaled_columns == ["x", "c=a", "c=b"]
    p = np.array([0.25, 0.75])
    scaled = proj.scaled(pl.DataFrame({"x": [0.0, 0.0], "c": ["a", "zzz"]}))
    np.testing.assert_allclose(scaled[0, 1:], (np.array([1.0, 0.0]) - p) / np.sqrt(p))
    np.testing.assert_allclose(scaled[1, 1:], -np.sqrt(p))  # unseen: every dummy zero


def test_types_family_and_temporal_as_seconds() -> None:
    days = [0, 3, 10, 11, 40]
    numeric = pl.DataFrame({"t": [d * 86400.0 for d in days], "c": ["a", "b", "a", "b", "b"]})
    dated = numeric.with_columns(
        pl.Series("t", [dt.date(2001, 1, 1) + dt.timedelta(days=d) for d in days])
    )
    stamped = numeric.with_columns(pl.col("t").cast(pl.Int64).mul(1000).cast(pl.Datetime("ms")))
    proj = Projection.fit(numeric, ncp=2)
    for frame in (dated, stamped):
        other = Projection.fit(frame, ncp=2)
        np.testing.assert_allclose(
            coordinates(frame, other), coordinates(numeric, proj), atol=1e-12
        )
    # Categorical and Enum hold the same modalities as String; integers and floats are one family.
    as_cat = numeric.with_columns(pl.col("c").cast(pl.Categorical))
    np.testing.assert_allclose(coordinates(as_cat, proj), coordinates(numeric, proj), atol=0)
    boolean = pl.DataFrame({"b": [True, False, False, True], "x": [1, 2, 3, 5]})
    fitted = Projection.fit(boolean)
    floats = boolean.with_columns(pl.col("x").cast(pl.Float32))
    np.testing.assert_allclose(coordinates(floats, fitted), coordinates(boolean, fitted), atol=0)


def test_mca_rows_are_profiles_over_known_modalities() -> None:
    rng = np.random.default_rng(5)
    frame = pl.DataFrame({name: rng.choice(list("abc"), 60).tolist() for name in ("u", "v", "w")})
    proj = Projection.fit(frame)
    assert proj.model == "MCA"
    assert proj.n_components == 6  # 9 modalities less one constraint per variable
    scaled = proj.scaled(pl.DataFrame({"u": ["a"], "v": ["b"], "w": ["new"]}))
    shares = np.concatenate([cast(CategoricalFeature, f).shares for f in proj.scaling.features])
    dummies = np.array([1, 0, 0, 0, 1, 0, 0, 0, 0]) * 3 / 2  # a profile over 2 known modalities
    np.testing.assert_allclose(scaled[0], (dummies - shares) / np.sqrt(shares) / np.sqrt(3))


# ---------------------------------------------------------------------------------------------
# Lazy: the fit runs when the counting runs
# ---------------------------------------------------------------------------------------------


def test_fit_happens_at_collect_time() -> None:
    originals = cohort(100, seed=6)
    calls: list[int] = []

    def spy(series: pl.Series) -> pl.Series:
        calls.append(len(series))
        return series

    lazy = originals.lazy().with_columns(pl.col("weight").map_batches(spy, return_dtype=pl.Float64))
    result = phr.local_cloaking(lazy, perturbed(originals, 1).lazy(), on="id")
    assert isinstance(result, pl.LazyFrame)
    assert not calls
    assert result.collect().height == originals.height
    assert calls


def test_keys_are_not_features_and_keyed_equals_row_order() -> None:
    originals = cohort(400, seed=8)
    avatars = perturbed(originals, 2)
    by_key = phr.local_cloaking(
        originals, avatars.sample(fraction=1.0, shuffle=True, seed=3), on="id"
    )
    by_order = phr.local_cloaking(
        originals, avatars, features=[c for c in originals.columns if c != "id"]
    )
    assert by_key["local_cloaking"].equals(by_order["local_cloaking"])


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def raw() -> tuple[pl.DataFrame, pl.DataFrame]:
    originals = cohort(50, seed=9)
    return originals, perturbed(originals, 4)


@pytest.mark.parametrize(
    ("change", "options", "error", "culprit"),
    [
        (
            lambda o, a: (o, a.drop("weight")),
            {"features": ["age", "weight"]},
            ColumnNotFoundError,
            "weight",
        ),
        (lambda o, a: (o, a), {"features": ["age", "nope"]}, ColumnNotFoundError, "nope"),
        (lambda o, a: (o, a.with_columns(pl.col("age").cast(pl.String))), {}, SchemaError, "age"),
        (
            lambda o, a: (o, a.with_columns(pl.col("smoker").cast(pl.Int8))),
            {},
            SchemaError,
            "smoker",
        ),
        (
            lambda o, a: (
                o.with_columns(tags=pl.concat_list("sex")),
                a.with_columns(tags=pl.concat_list("sex")),
            ),
            {},
            SchemaError,
            "tags",
        ),
        (
            lambda o, a: (o.select("id"), a.select("id")),
            {"on": "id"},
            ColumnNotFoundError,
            "no column",
        ),
        (lambda o, a: (o, a), {"features": ["age", "weight"], "ncp": 3}, ValueError, "ncp"),
        (lambda o, a: (o, a), {"ncp": 0}, ValueError, "ncp"),
        (lambda o, a: (o, a), {"features": ["age"], "coords": ["age"]}, ValueError, "features"),
    ],
)
def test_plan_time_errors(
    raw: tuple[pl.DataFrame, pl.DataFrame],
    change: Any,
    options: dict[str, Any],
    error: type[Exception],
    culprit: str,
) -> None:
    originals, avatars = change(*raw)
    # Raised when the plan is made: nothing is collected.
    with pytest.raises(error, match=culprit):
        phr.local_cloaking(originals.lazy(), avatars.lazy(), **options)
    with pytest.raises(error, match=culprit):
        phr.hidden_rate(originals, avatars, **options)


@pytest.mark.parametrize(
    ("change", "options", "error", "culprit"),
    [
        (
            lambda o, a: (o.with_columns(pl.lit(None, pl.Int64).alias("age")), a),
            {},
            ComputeError,
            "age",
        ),
        (
            lambda o, a: (
                o.with_columns(
                    pl.when(pl.col("id") == 3).then(None).otherwise(pl.col("sex")).alias("sex")
                ),
                a,
            ),
            {},
            ComputeError,
            "sex.*1 null",
        ),
        (
            lambda o, a: (o.with_columns(pl.col("weight") / 0.0), a),
            {},
            ComputeError,
            "weight.*infinite",
        ),
        (
            lambda o, a: (o, a.with_columns(pl.lit(None, pl.String).alias("sex"))),
            {},
            ComputeError,
            "sex",
        ),
        (
            lambda o, a: (o, a.with_columns(pl.lit(float("nan")).alias("weight"))),
            {},
            ComputeError,
            "weight",
        ),
        (lambda o, a: (o.clear(), a.clear()), {}, NoDataError, "empty"),
        (lambda o, a: (o, a), {"features": ["sex", "stage"], "ncp": 7}, ValueError, r"ncp <= 6"),
        (
            lambda o, a: (o.with_columns(sex=pl.lit("F")), a),
            {"features": ["sex"]},
            ValueError,
            "nothing",
        ),
        (
            lambda o, a: (
                o.with_columns(pl.col("id").cast(pl.String)),
                a.with_columns(pl.col("id").cast(pl.String)),
            ),
            {},
            ComputeError,
            "'id' is unique per row in the originals",
        ),
        (
            lambda o, a: (
                o.with_columns(code=(pl.col("id") % 45).cast(pl.String)),
                a.with_columns(code=(pl.col("id") % 45).cast(pl.String)),
            ),
            {},
            ValueError,
            "'code' alone has 45 modalities",
        ),
    ],
)
def test_collect_time_errors(
    raw: tuple[pl.DataFrame, pl.DataFrame],
    change: Any,
    options: dict[str, Any],
    error: type[Exception],
    culprit: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(passes, "MAX_WIDTH", 40)
    originals, avatars = change(*raw)
    if "'id'" not in culprit:  # an identifier among the default features is refused first
        originals, avatars = originals.drop("id"), avatars.drop("id")
    lazy = phr.local_cloaking(originals.lazy(), avatars.lazy(), **options)
    with pytest.raises(error, match=culprit):
        lazy.collect()
    with pytest.raises(error, match=culprit):
        phr.hidden_rate(originals, avatars, **options)


def test_projection_errors() -> None:
    frame = cohort(20, seed=0)
    proj = Projection.fit(frame, features=["age", "sex"], ncp=2)
    with pytest.raises(DuplicateError, match="Dim1"):
        proj.transform(proj.transform(frame))
    with pytest.raises(ColumnNotFoundError, match="sex"):
        proj.transform(frame.drop("sex"))
    with pytest.raises(SchemaError, match="age"):
        proj.transform(frame.with_columns(pl.col("age").cast(pl.String)))
    with pytest.raises(ValueError, match="ncp <= 3"):
        Projection.fit(frame, features=["age", "sex"], ncp=4)
    with pytest.raises(TypeError, match="ncp"):
        Projection.fit(frame, ncp=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DataFrame or LazyFrame"):
        Projection.fit(frame.to_dict())  # type: ignore[arg-type]
    with pytest.raises(ComputeError, match="age"):
        proj.scaled(frame.with_columns(age=pl.lit(None, pl.Int64)))
    assert repr(proj) == (
        "Projection(model='FAMD', features=['age', 'sex'], ncp=2, n_components=2, n_rows=20)"
    )


# --- extreme magnitudes ------------------------------------------------------------------------


@pytest.mark.parametrize("exponent", [-1074, -1060, -1000, 1000, 1020])
def test_a_feature_of_extreme_magnitude_projects_as_at_scale_one(exponent: int) -> None:
    # Times 2^-1074 the integers are subnormal (their spread too); times 2^1020 they are
    # finite but their deviations from the mean (about 8) overflow. Either way the fit and
    # the counts are those at scale 1.
    rng = np.random.default_rng(21)
    n = 60
    steps = rng.choice([-15.0, 13.0, 14.0, 15.0], n, p=[0.2, 0.2, 0.3, 0.3])
    originals = pl.DataFrame({"a": steps, "b": rng.normal(size=n)})
    avatars = originals.with_columns(
        (pl.col("a") + rng.integers(-2, 3, n)).clip(-15, 15), pl.col("b") + rng.normal(size=n) * 0.3
    )
    scaled = [
        frame.with_columns(a=pl.Series(np.ldexp(frame["a"].to_numpy(), exponent)))
        for frame in (originals, avatars)
    ]
    assert np.array_equal(np.ldexp(scaled[0]["a"].to_numpy(), -exponent), steps)  # exact
    base = Projection.fit(originals)
    fitted = Projection.fit(scaled[0])
    np.testing.assert_array_equal(fitted.eigenvalues, base.eigenvalues)
    np.testing.assert_array_equal(fitted.components, base.components)
    np.testing.assert_array_equal(coordinates(scaled[1], fitted), coordinates(avatars, base))
    counts = phr.local_cloaking(*scaled)["local_cloaking"].to_numpy()
    expected = brute_force_counts(coordinates(originals, base), coordinates(avatars, base), 1e-9)
    np.testing.assert_array_equal(counts, expected)
    back = fitted.unscale(fitted.scaled(scaled[0]))
    np.testing.assert_allclose(back["a"].to_numpy(), scaled[0]["a"].to_numpy(), rtol=1e-12)


def test_categorical_auto_follows_the_papers_rule_whatever_the_number_type() -> None:
    # get_categorical_continuous: len(unique()) <= 10, whatever the type; 0.0/1.0 flags and
    # 1.0/2.0/3.0 grades stored as floats are categories as their integer forms are.
    rng = np.random.default_rng(8)
    n = 300
    originals = pl.DataFrame(
        {
            "age": rng.normal(50, 10, n),
            "flag": rng.integers(0, 2, n).astype(np.float64),
            "grade": rng.integers(1, 4, n).astype(np.float64),
            "stage": rng.integers(0, 3, n),
            "eleven": (np.arange(n) % 11).astype(np.float64),
        }
    )
    avatars = originals.sample(fraction=1.0, shuffle=True, seed=2)

    def categorical(frame: pl.DataFrame, **options: Any) -> list[str]:
        request = with_fit(plan(frame, frame, options))  # type: ignore[arg-type]
        return sorted(describe_settings(request)["space"]["categorical"])

    assert categorical(originals, categorical="auto", ncp=3) == ["flag", "grade", "stage"]
    as_integers = originals.with_columns(pl.col("flag", "grade").cast(pl.Int64))
    assert categorical(as_integers, categorical="auto", ncp=3) == ["flag", "grade", "stage"]
    auto = phr.hidden_rate(originals, avatars, categorical="auto", ncp=3)
    named = phr.hidden_rate(originals, avatars, categorical=["flag", "grade", "stage"], ncp=3)
    assert auto == named


@pytest.mark.parametrize("factor", [2.0**500, 2.0**-500, 1e154, 1e160, 1e-160])
def test_projection_does_not_move_with_scale(factor: float) -> None:
    rng = np.random.default_rng(11)
    n = 300
    originals = pl.DataFrame({k: rng.normal(size=n) for k in ("x", "y", "z")})
    avatars = originals.with_columns(pl.all() + pl.Series(rng.normal(size=n) * 0.5))
    baseline = phr.local_cloaking(originals, avatars, ncp=3)["local_cloaking"]
    scaled = phr.local_cloaking(
        originals.with_columns(pl.col("x") * factor),
        avatars.with_columns(pl.col("x") * factor),
        ncp=3,
    )["local_cloaking"]
    assert scaled.to_list() == baseline.to_list()


@pytest.mark.parametrize("exponent", [-900, -300, 300, 900])
def test_projection_fit_scales_exactly_by_powers_of_two(exponent: int) -> None:
    rng = np.random.default_rng(12)
    originals = pl.DataFrame({"x": rng.normal(size=200), "y": rng.normal(size=200) * 3})
    base = phr.Projection.fit(originals, ncp=2)
    scaled = phr.Projection.fit(originals.with_columns(pl.col("x") * 2.0**exponent), ncp=2)
    np.testing.assert_array_equal(scaled.eigenvalues, base.eigenvalues)
    np.testing.assert_array_equal(scaled.components, base.components)
    x = scaled.scaling.features[0]
    assert isinstance(x, phr.projection.NumericFeature)
    assert x.scale == np.ldexp(base.scaling.features[0].scale, exponent)  # type: ignore[union-attr]


def _with_nan(frame: pl.DataFrame, column: str, row: int) -> pl.DataFrame:
    value = pl.when(pl.int_range(pl.len()) == row).then(float("nan")).otherwise(pl.col(column))
    return frame.with_columns(value.alias(column))


def _coded(n: int, seed: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Originals and avatars with a numeric feature and a float-coded category ``k``."""
    rng = np.random.default_rng(seed)
    originals = pl.DataFrame({"x": rng.normal(size=n), "k": rng.integers(0, 3, n).astype(float)})
    avatars = originals.with_columns(
        pl.col("x") + rng.normal(size=n) * 0.5, k=pl.Series(rng.integers(0, 3, n).astype(float))
    )
    return originals, avatars


@pytest.mark.parametrize("side", ["originals", "avatars"])
def test_nan_in_a_categorical_number_is_missing(side: str) -> None:
    frames = dict(zip(("originals", "avatars"), _coded(40, seed=3), strict=True))
    holed = {**frames, side: _with_nan(frames[side], "k", 5)}
    with pytest.raises(pl.exceptions.ComputeError, match=rf"features of {side} .*'k' \(1 NaN\)"):
        phr.hidden_rate(holed["originals"], holed["avatars"], categorical="k")
    # Filled as a null is: the same fit and counts as with a null there.
    nulled = {**frames, side: null_at(frames[side], "k", 5)}
    options: dict[str, Any] = {"categorical": "k", "impute": "mode"}
    with_nan = phr.local_cloaking(holed["originals"], holed["avatars"], **options)
    with_null = phr.local_cloaking(nulled["originals"], nulled["avatars"], **options)
    assert with_nan["local_cloaking"].to_list() == with_null["local_cloaking"].to_list()
    fitted = phr.Projection.fit(holed["originals"], categorical="k", impute="mode")
    assert fitted.scaling.features[1].modalities == ("0", "1", "2")  # type: ignore[union-attr]
    filled = {
        role: frame.with_columns(pl.col("k").fill_nan(None).fill_null(fitted_mode(frames)))
        for role, frame in nulled.items()
    }
    expected = projected_counts(filled["originals"], filled["avatars"], categorical="k")
    assert with_nan["local_cloaking"].to_list() == expected.tolist()


def fitted_mode(frames: dict[str, pl.DataFrame]) -> float:
    """The originals' most frequent code, the smallest on a tie (as the mode fill takes it)."""
    return float(frames["originals"]["k"].mode().sort()[0])


def test_numeric_categories_are_keyed_exactly() -> None:
    big = 2**53
    codes = pl.Series("k", [big, big + 1, 7, big, big + 1, 7, big, 7], dtype=pl.Int64)
    originals = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5, 3.5], "k": codes})
    avatars = originals.with_columns(
        pl.col("x") + 0.25, k=pl.Series([big + 1, big, 7, big, big, 7, big + 1, 7])
    )
    fitted = phr.Projection.fit(originals, categorical="k")
    assert fitted.scaling.features[1].modalities == ("7", str(big), str(big + 1))  # type: ignore[union-attr]
    # The same codes as text are keyed exactly: the counts must agree, and with the brute force.
    as_text = [frame.with_columns(pl.col("k").cast(pl.String)) for frame in (originals, avatars)]
    coded = phr.local_cloaking(originals, avatars, categorical="k")["local_cloaking"]
    assert coded.to_list() == phr.local_cloaking(*as_text)["local_cloaking"].to_list()
    assert coded.to_list() == projected_counts(*as_text).tolist()


def test_zero_and_negative_zero_are_one_category_and_integers_match_floats() -> None:
    originals = pl.DataFrame({"x": [0.0, 1.0, 2.0, 3.0, 4.0], "k": [0.0, -0.0, 1.0, 0.0, 1.0]})
    fitted = phr.Projection.fit(originals, categorical="k")
    assert fitted.scaling.features[1].modalities == ("0", "1")  # type: ignore[union-attr]
    avatars = pl.DataFrame({"x": [0.5, 1.0, 2.5, 3.0, 4.5], "k": [1, 0, 1, 0, 0]})
    # 1 (Int64) and 1.0 (Float64) are one modality: the avatars count as if they were floats.
    as_ints = phr.local_cloaking(originals, avatars, categorical="k")["local_cloaking"]
    floats = avatars.with_columns(pl.col("k").cast(pl.Float64))
    as_floats = phr.local_cloaking(originals, floats, categorical="k")["local_cloaking"]
    assert as_ints.to_list() == as_floats.to_list()
    assert as_ints.to_list() == projected_counts(originals, floats, categorical="k").tolist()
    # A decimal is the float64 it gives back: Decimal 0.5 is the float 0.5, 1e-6 is 0.000001.
    halves = originals.with_columns(k=pl.Series([0.5, 1e-6, 0.5, 2.0, 1e-6]))
    codes = [decimal.Decimal(v) for v in ("1.00", "0.50", "0.000001", "2.00", "0.50")]
    as_decimals = avatars.with_columns(k=pl.Series(codes, dtype=pl.Decimal(38, 6)))
    decimals = phr.local_cloaking(halves, as_decimals, categorical="k")["local_cloaking"]
    floats = as_decimals.with_columns(pl.col("k").cast(pl.Float64))
    expected = projected_counts(halves, floats, categorical="k")
    assert decimals.to_list() == expected.tolist()
    assert (
        phr.Projection.fit(halves, categorical="k")
        .transform(as_decimals)["Dim1"]
        .equals(phr.Projection.fit(halves, categorical="k").transform(floats)["Dim1"])
    )


def test_an_avatar_too_far_to_project_is_named_with_its_row() -> None:
    originals = pl.DataFrame({"x": [0.0, 1e-10, 2e-10, 3e-10], "y": [1.0, 0.0, 3.0, 2.0]})
    avatars = originals.with_columns(x=pl.Series([0.0, 1e-10, 1e300, 3e-10]))
    match = r"feature 'x' of avatars holds 1e\+300 at row 2"
    with pytest.raises(pl.exceptions.ComputeError, match=match):
        phr.hidden_rate(originals, avatars)
    with pytest.raises(pl.exceptions.ComputeError, match=match):
        phr.local_cloaking(originals.lazy(), avatars.lazy()).collect()
