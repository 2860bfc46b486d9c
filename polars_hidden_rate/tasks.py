"""Where tasks run: here (`LocalTasks`) or on a Dask cluster's workers
(`DaskTasks`), and what a driver needs to know of the workers to size its tasks.

Every Dask run of the package (the fit's passes, the in-memory scatter path, the parquet
pipeline) submits its tasks through one `DaskTasks`: one place names the keys
(``phr-<stage>-...-<run>``, so the dashboard groups a run's tasks by stage) and decides
how results come back. Its `DaskTasks.exchange` is the pipeline's all-to-all exchange, on
Dask's P2P shuffle (the rechunk of an array of pieces), in tasks linear in producers plus
consumers. Dask is imported only when a cluster is used.
"""

from __future__ import annotations

import contextlib
import itertools
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

    def exchange(
        self, name: str, producers: Sequence[Future[Any]], consumers: int, cut: Callable[[Any], Any]
    ) -> list[Future[Any]]:
        """An all-to-all exchange on Dask's P2P shuffle: ``cut(result)`` of each producer
        (one task each, ``(<key of name>, p, 0)``) is a sequence of ``consumers`` pieces;
        the future of consumer ``c`` holds piece ``c`` of every producer, in producer order,
        as `received` unpacks it (hand it to `gathered`).

        The pieces are the cells of a ``producers x consumers`` object array chunked by rows;
        Dask's P2P rechunk to one chunk per column moves them between the workers in
        `exchange_tasks` tasks: a transfer per row, a barrier and an unpack per column,
        where a task-based exchange needs one per pair. The shuffle is Dask's, so a lost
        worker's pieces are recomputed (the shuffle restarts) and no result changes.
        """
        import dask
        import dask.array
        import numpy as np
        from dask.highlevelgraph import HighLevelGraph

        rows = self.key(name)
        graph: dict[Any, Any] = {
            (rows, p, 0): (_as_row, cut, future, consumers) for p, future in enumerate(producers)
        }
        array: Any = dask.array.Array  # dask.array is not annotated
        pieces_of = array(
            HighLevelGraph.from_collections(rows, graph, dependencies=[]),
            rows,
            chunks=((1,) * len(producers), (consumers,)),
            dtype=object,
            meta=np.empty((0, 0), dtype=object),
        )
        # The pieces stay in the workers' memory, not on P2P's disk buffer: each consumer holds
        # its column once unpacked anyway (the plan sizes it to a task's memory), and the disk
        # round trip cost 11 of 77 s at 2e7 records (docs/scale.md).
        with dask.config.set({p2p_disk_setting(): False}):
            by_consumer = pieces_of.rechunk(
                ((len(producers),), (1,) * consumers), method="p2p"
            ).to_delayed(optimize_graph=False)
        # Above the tasks queued beside them: a producer's pieces are cut and handed to the
        # shuffle as soon as it finishes, and move while the next producers compute.
        columns = list(by_consumer.ravel())
        return list(self.client.compute(columns, optimize_graph=False, priority=1))

    def scatter(self, values: dict[str, Any]) -> dict[str, Future[Any]]:
        """Send each value to the workers under the key of its name; a future for each."""
        futures = self.client.scatter({self.key(name): value for name, value in values.items()})
        return {name: futures[self.key(name)] for name in values}


P2P_DISK = "distributed.p2p.disk"
"""The setting that puts P2P's pieces on disk, as the oldest Dask the package takes names it."""


def p2p_disk_setting() -> str:
    """`P2P_DISK` by the name the installed Dask reads: distributed 2024.10 renamed it
    ``distributed.p2p.storage.disk`` (its rename table maps the old name to the new), and
    setting the old name since raises a FutureWarning; before, the new name is not read."""
    import dask
    import distributed  # noqa: F401  (it adds its renamed settings to that table)

    return dask.config.deprecations.get(P2P_DISK) or P2P_DISK


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


def exchange_tasks(producers: int, consumers: int) -> int:
    """The tasks `DaskTasks.exchange` submits: a cut per producer, then Dask's P2P rechunk
    (a transfer per producer, a barrier, an unpack per consumer), or, to one consumer, one
    concatenation; nothing more when there is one of each.

    Examples
    --------
    >>> exchange_tasks(1000, 512), exchange_tasks(8, 1), exchange_tasks(1, 1)
    (2513, 9, 1)
    """
    if consumers == 1:
        return producers + (producers > 1)
    return 2 * producers + 1 + consumers


class Piece:
    """One cell of an exchanged array: a value numpy stores as is (a frame or a tuple in an
    object array would be taken for a sequence), with its size for Dask's memory limits."""

    __slots__ = ("nbytes", "value")

    def __init__(self, value: Any, nbytes: int) -> None:
        self.value = value
        self.nbytes = nbytes

    def __reduce__(self) -> tuple[Any, ...]:
        # P2P sizes an object array's cell as its pointer, so it always pickles a worker's
        # pieces into one blob with the default protocol (4): nothing here travels out of
        # band. A Polars frame pickled as itself costs as much as its Polars columns would
        # (0.40 s against 0.37 s for 2.5 million rows of 7 columns); numpy arrays cost half
        # (0.22 s), which is why the link pieces carry them (`ReadPiece`).
        return Piece, (self.value, self.nbytes)

    def __sizeof__(self) -> int:
        return self.nbytes + 64


def _nbytes(value: Any) -> int:
    """The bytes of a piece: its arrays, frames and fields, summed."""
    if hasattr(value, "estimated_size"):  # a Polars frame
        return int(value.estimated_size())
    if hasattr(value, "nbytes"):
        return int(value.nbytes)
    if isinstance(value, tuple | list):
        return sum(_nbytes(item) for item in value)
    fields = getattr(value, "__dataclass_fields__", None)
    if fields:
        return sum(_nbytes(getattr(value, name)) for name in fields)
    return 0


def _as_row(cut: Callable[[Any], Any], result: Any, consumers: int) -> Any:
    """Task: ``cut(result)``, its ``consumers`` pieces as a ``1 x consumers`` object array."""
    import numpy as np

    pieces = cut(result)
    if len(pieces) != consumers:
        msg = f"a producer cut {len(pieces)} pieces for {consumers} consumers"
        raise RuntimeError(msg)
    row = np.empty((1, consumers), dtype=object)
    for c, piece in enumerate(pieces):
        row[0, c] = Piece(piece, _nbytes(piece))
    return row


def received(column: Any) -> list[Any]:
    """The pieces of one consumer of `DaskTasks.exchange`, in producer order."""
    return [cell.value for cell in column[:, 0]]


def gathered(function: Callable[..., Any], column: Any, *args: Any) -> Any:
    """Task: ``function(*args, *pieces)``, the pieces of one consumer of an exchange."""
    return function(*args, *received(column))


@contextlib.contextmanager
def tasks_run(client: Client) -> Iterator[dict[str, int]]:
    """The tasks the scheduler of ``client`` ran while inside, by prefix (`task_prefix`:
    ``phr-link-bucket``, ``rechunk-transfer``, ...), filled in on leaving: a scheduler
    plugin counts each task that finished (a recomputed one once per run)."""
    name = f"phr-tasks-run-{uuid.uuid4().hex[:12]}"
    client.run_on_scheduler(_start_counting, name)
    counts: dict[str, int] = {}
    try:
        yield counts
    finally:
        counts.update(client.run_on_scheduler(_stop_counting, name))


def task_prefix(key: Any) -> str:
    """The stage of a task key: for the package's (``phr-<stage>-<indices>-<run>``, or a
    tuple under such a name) its words up to the first index, else Dask's `key_split`.

    Examples
    --------
    >>> task_prefix("phr-assemble-3-0123456789ab"), task_prefix(("phr-link-pieces-01ab", 3, 0))
    ('phr-assemble', 'phr-link-pieces')
    >>> task_prefix(("rechunk-transfer-" + "0a" * 16, 2, 0))
    'rechunk-transfer'
    """
    name = str(key[0] if isinstance(key, tuple) else key)
    words = name.split("-")
    if words[0] != "phr" or len(words) < 3:
        from dask.utils import key_split

        return str(key_split(key))
    kept = itertools.takewhile(lambda word: not word.isdigit(), words[1:-1])
    return "-".join(["phr", *kept])


def _start_counting(name: str, dask_scheduler: Any = None) -> None:
    from distributed.diagnostics.plugin import SchedulerPlugin

    class TaskCounter(SchedulerPlugin):
        def __init__(self) -> None:
            self.counts: dict[str, int] = {}

        def transition(self, key: Any, start: str, finish: str, *args: Any, **kw: Any) -> None:
            if start == "processing" and finish == "memory":
                prefix = task_prefix(key)
                self.counts[prefix] = self.counts.get(prefix, 0) + 1

    dask_scheduler.add_plugin(TaskCounter(), name=name)


def _stop_counting(name: str, dask_scheduler: Any = None) -> dict[str, int]:
    plugin = dask_scheduler.plugins[name]
    dask_scheduler.remove_plugin(name=name)
    return dict(plugin.counts)


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
