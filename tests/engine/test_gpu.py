"""`device="gpu"`: the error path, the dispatch, and the k-NN counting logic on the CPU.

No GPU is needed: the k-NN search with its CPU fallback is run on FAISS's CPU flat
index, and the dispatch through the public API on a stand-in for FAISS's GPU
classes backed by that index. Where FAISS sees a GPU, the last test runs on it.
"""

from __future__ import annotations

from typing import Any

import faiss
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import polars_hidden_rate as phr
from polars_hidden_rate import engine
from polars_hidden_rate.engine import gpu
from tests.helpers import brute_force_counts, examples

HAS_GPU = hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def frame(coords: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame({f"Dim{k + 1}": coords[:, k] for k in range(coords.shape[1])})


class FakeGpuIndexFlatConfig:
    def __init__(self) -> None:
        self.device = -1
        self.useFloat16 = True


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[FakeGpuIndexFlatConfig]:
    """FAISS's GPU classes, stood in for by its CPU flat index; records the configs used."""
    configs: list[FakeGpuIndexFlatConfig] = []

    def gpu_index(resources: Any, dim: int, config: FakeGpuIndexFlatConfig) -> Any:
        configs.append(config)
        return faiss.IndexFlatL2(dim)

    monkeypatch.setattr(faiss, "StandardGpuResources", object, raising=False)
    monkeypatch.setattr(faiss, "GpuIndexFlatConfig", FakeGpuIndexFlatConfig, raising=False)
    monkeypatch.setattr(faiss, "GpuIndexFlatL2", gpu_index, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)
    return configs


@pytest.mark.skipif(HAS_GPU, reason="FAISS sees a GPU here")
def test_gpu_without_faiss_gpu_build_is_a_clear_error() -> None:
    data = frame(np.array([[0.0], [1.0]]))
    with pytest.raises(RuntimeError, match="faiss-gpu-cu12"):
        phr.local_cloaking(data, data, coords="Dim1", device="gpu")
    with pytest.raises(RuntimeError, match="FAISS build with GPU support"):
        phr.hidden_rate(data.lazy(), data.lazy(), coords="Dim1", device="gpu")


def test_gpu_build_without_a_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faiss, "StandardGpuResources", object, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0)
    data = frame(np.array([[0.0], [1.0]]))
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        phr.local_cloaking(data, data, coords="Dim1", device="gpu")


def test_gpu_is_checked_before_anything_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faiss, "StandardGpuResources", object, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0)

    def unreadable() -> pl.DataFrame:
        raise AssertionError("the originals were read")

    lazy = pl.defer(unreadable, schema={"Dim1": pl.Float64})
    with pytest.raises(RuntimeError, match="no CUDA GPU"):  # at the call, not at collect
        phr.local_cloaking(lazy, frame(np.array([[0.0]])), coords="Dim1", device="gpu")


def test_gpu_without_code_for_the_device_is_explained(
    monkeypatch: pytest.MonkeyPatch, fake_gpu: list[FakeGpuIndexFlatConfig]
) -> None:
    class NoKernelIndex:
        def __init__(self, resources: Any, dim: int, config: Any) -> None:
            pass

        def add(self, coords: np.ndarray) -> None:
            raise RuntimeError("CUDA error 209 no kernel image is available for execution")

    monkeypatch.setattr(faiss, "GpuIndexFlatL2", NoKernelIndex)
    data = frame(np.array([[0.0], [1.0]]))
    with pytest.raises(RuntimeError, match="compute capability"):
        phr.local_cloaking(data, data, coords="Dim1", device="gpu")


@pytest.mark.parametrize("max_k", [1, 3, gpu.GPU_MAX_K])
def test_gpu_dispatch_counts_exactly(
    monkeypatch: pytest.MonkeyPatch, fake_gpu: list[FakeGpuIndexFlatConfig], max_k: int
) -> None:
    monkeypatch.setattr(gpu, "GPU_MAX_K", max_k)
    monkeypatch.setattr(gpu, "FIRST_K", 1)
    rng = np.random.default_rng(0)
    originals = rng.integers(0, 4, size=(300, 3)) + 1e9
    avatars = rng.integers(0, 4, size=(300, 3)) + 1e9
    out = phr.local_cloaking(
        frame(originals), frame(avatars), coords=["Dim1", "Dim2", "Dim3"], device="gpu"
    )
    assert out["local_cloaking"].to_list() == brute_force_counts(originals, avatars, 1e-9).tolist()
    assert fake_gpu, "the GPU index was not used"
    assert all(config.useFloat16 is False and config.device == 0 for config in fake_gpu)


coordinates = arrays(
    np.float64,
    st.tuples(st.integers(1, 60), st.integers(1, 4)),
    elements=st.sampled_from([-3.0, -0.5, 0.0, 0.125, 1.0, 2.0, 1e9, 1e9 + 0.5]),
)


@settings(max_examples=examples(80), deadline=None)
@given(
    coordinates,
    st.integers(0, 2**16),
    st.sampled_from([0.0, 1e-9]),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_knn_counting_equals_brute_force(
    originals: np.ndarray, seed: int, tie_tol: float, first_k: int, max_k: int
) -> None:
    rng = np.random.default_rng(seed)
    avatars = originals[rng.permutation(len(originals))]
    avatars[: len(avatars) // 3] += rng.integers(-1, 2, size=avatars[: len(avatars) // 3].shape)
    thresholds = engine.own_thresholds(originals, avatars, tie_tol)
    own = np.arange(len(originals))
    counts = gpu.count_within_knn(
        originals,
        thresholds,
        own,
        avatars,
        make_index=faiss.IndexFlatL2,
        max_k=max_k,
        first_k=first_k,
    )
    assert counts.tolist() == brute_force_counts(originals, avatars, tie_tol).tolist()


@pytest.mark.skipif(not HAS_GPU, reason="FAISS sees no GPU here")
def test_real_gpu_equals_cpu_path() -> None:
    rng = np.random.default_rng(1)
    originals = rng.normal(size=(20_000, 5))
    avatars = originals + rng.normal(scale=0.3, size=originals.shape)
    expected = engine.count_cloaking(originals, avatars)
    assert gpu.count_cloaking_gpu(originals, avatars).tolist() == expected.tolist()
