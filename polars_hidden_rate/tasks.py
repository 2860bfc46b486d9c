"""Where tasks run: here (`LocalTasks`) or on a Dask cluster's workers
(`DaskTasks`), and what a driver needs to know of the workers to size its tasks.

Every Dask run of the package (the fit's passes, the in-memory scatter path, the parquet
pipeline) submits its tasks through one `DaskTasks`: one place names the keys
(``phr-<stage>-...-<run>``, so the dashboard groups a run's tasks by stage) and decides
how results come back. Dask is imported only when a cluster is used.
"""

from __future__ import annotations

import contextlib
import operator
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from distributed import Client, Future

EXTRA_HINT = "pip install polars-hidden-rate[dask]"

# The share of a worker thread's memory one task's temporaries may take; the rest is for
# the data the worker stores and Dask.
TASK_MEMORY_FRACTION = 0.25
# Assumed memory per worker thread when a worker reports no memory limit.
DEFAULT_THREAD_MEMORY = 2 << 30
WORKERS_WAIT_SECONDS = 30
"""How long `worker_specs` waits for a worker when the cluster has none (workers that a
restart or a nanny brings back register a moment later)."""


class Tasks(Protocol):
    """Where the per-file tasks run: `LocalTasks` here, `DaskTasks` on workers.

    `run` starts a task and returns a handle to its result, which stays where it ran;
    handles may be arguments of later tasks. `results` brings results here, in the
    order of ``handles``.
    """

    def run(self, name: str, function: Callable[..., Any], *args: Any) -> Any: ...

    def results(self, handles: Sequence[Any]) -> Iterator[Any]: ...


class LocalTasks:
    """Every task runs here, at once; a handle is the result itself."""

    def run(self, name: str, function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    def results(self, handles: Sequence[Any]) -> Iterator[Any]:
        return iter(handles)


class DaskTasks:
    """Every task runs on the workers of a Dask ``client``; a handle is a future.

    A task is keyed ``<prefix>-<name>-<run>``: ``name`` says the stage and the piece, and
    the run's token keeps two runs on one cluster apart. `results` brings results
    back one at a time, in order, so the driver holds one at a time; `gather` brings
    a whole stage's scalars at once.
    """

    def __init__(self, client: Client, prefix: str = "phr", token: str | None = None) -> None:
        self.client = client
        self.prefix = prefix
        self.token = token or uuid.uuid4().hex[:12]

    def key(self, name: str) -> str:
        """The key of task (or scattered value) ``name`` of this run."""
        return f"{self.prefix}-{name}-{self.token}"

    def run(self, name: str, function: Callable[..., Any], *args: Any, pure: bool = False) -> Any:
        """Submit ``function(*args)``; ``pure`` when a resubmission of the same key may reuse
        a result (the scatter path's retries)."""
        return self.client.submit(function, *args, key=self.key(name), pure=pure)

    def results(self, handles: Sequence[Any]) -> Iterator[Any]:
        for future in handles:
            yield future.result()

    def gather(self, handles: Sequence[Future[Any]]) -> list[Any]:
        """Every result of ``handles``, in their order."""
        return list(self.client.gather(list(handles)))

    def scatter(self, values: dict[str, Any]) -> dict[str, Future[Any]]:
        """Send each value to the workers under the key of its name; a future for each."""
        futures = self.client.scatter({self.key(name): value for name, value in values.items()})
        return {name: futures[self.key(name)] for name in values}


def pieces(
    run: Callable[..., Any],
    name: str,
    producers: Sequence[Any],
    index: int,
    pick: Callable[[Any, int], Any] = operator.getitem,
) -> list[Any]:
    """Piece ``index`` of every producer's result, one task each (``name-<producer>-<index>``),
    for a task that gathers them: one side of a task-based exchange. ``run(key, function,
    *args)`` submits a task and returns a handle to its result.

    Examples
    --------
    >>> pieces(lambda key, function, *args: function(*args), "p", [(1, 2), (3, 4)], 1)
    [2, 4]
    """
    return [run(f"{name}-{p}-{index}", pick, result, index) for p, result in enumerate(producers)]


def require_client(cluster: object) -> Client:
    """``cluster`` as a ``dask.distributed.Client``, or a clear error.

    Raises
    ------
    ImportError
        When ``dask[distributed]`` is not installed, naming the extra to install.
    TypeError
        When ``cluster`` is not a ``Client``.
    """
    try:
        import distributed
    except ImportError as exc:
        msg = f"`cluster=` needs dask.distributed, which is not installed: {EXTRA_HINT}"
        raise ImportError(msg) from exc
    if not isinstance(cluster, distributed.Client):
        hint = " (wrap it: Client(cluster))" if hasattr(cluster, "scheduler_address") else ""
        msg = f"`cluster` must be a dask.distributed.Client, got {type(cluster).__name__}{hint}"
        raise TypeError(msg)
    return cluster


@dataclass(frozen=True)
class WorkerSpec:
    """What sizing needs to know of one worker."""

    nthreads: int
    memory_limit: int


def worker_specs(client: Client) -> list[WorkerSpec]:
    """Each worker's threads and memory limit, as the scheduler reports them; when there is
    none yet, after waiting up to `WORKERS_WAIT_SECONDS` for one."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    if not info:
        with contextlib.suppress(TimeoutError, OSError):
            client.wait_for_workers(1, timeout=WORKERS_WAIT_SECONDS)
        info = client.scheduler_info(n_workers=-1)["workers"]
    return [
        WorkerSpec(nthreads=int(worker["nthreads"]), memory_limit=int(worker["memory_limit"] or 0))
        for worker in info.values()
    ]


def task_memory(workers: Sequence[WorkerSpec]) -> float:
    """The bytes one task may hold: `TASK_MEMORY_FRACTION` of the smallest worker
    thread's memory (`DEFAULT_THREAD_MEMORY` per thread where a worker reports no
    limit), whichever worker it lands on.

    Examples
    --------
    >>> task_memory([WorkerSpec(nthreads=2, memory_limit=8 << 30)]) / 2**30
    1.0
    """
    if not workers:
        msg = "the Dask cluster has no workers"
        raise RuntimeError(msg)
    thread_memory = min(
        (worker.memory_limit or DEFAULT_THREAD_MEMORY * worker.nthreads) / max(worker.nthreads, 1)
        for worker in workers
    )
    return thread_memory * TASK_MEMORY_FRACTION
