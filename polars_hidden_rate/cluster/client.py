"""The client of the Dask scheduler a run names: by its address, or by the file
``dask scheduler --scheduler-file`` writes, read again while the scheduler starts.

Beside the cluster's tasks, so that no entry point holds a connection of its own: the run
layer (`polars_hidden_rate.runs`) connects here and hands the client to the plan as
``cluster``.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from polars_hidden_rate.frames.files import one_line
from polars_hidden_rate.outputs import describe
from polars_hidden_rate.tasks import EXTRA_HINT

# How long a connection waits for the scheduler to answer.
CONNECT_TIMEOUT = "10s"
# How long a scheduler file still being written (empty, or not yet a JSON object with an
# address) is waited for, in seconds, as while `dask scheduler` starts.
CLUSTER_FILE_WAIT = 5.0


@contextlib.contextmanager
def connected(address: str | None, scheduler_file: Path | None) -> Iterator[Any]:
    """A client of the scheduler at ``address`` or named in ``scheduler_file`` (None without
    either), closed at the end. The errors name the command line's flags (``--cluster``,
    ``--cluster-file``), which give these two."""
    if address is None and scheduler_file is None:
        yield None
        return
    try:
        from distributed import Client
    except ImportError as error:
        raise ImportError(f"--cluster needs dask.distributed: {EXTRA_HINT}") from error
    where = address
    if where is None and scheduler_file is not None:
        where = scheduler_address(scheduler_file)
    try:
        client = Client(where, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as error:
        msg = f"cannot reach the Dask scheduler {where!r}: {one_line(error)}"
        raise OSError(msg) from error
    try:
        yield client
    finally:
        client.close()


def scheduler_address(path: Path) -> str:
    """The address in the scheduler file ``path`` (``dask scheduler --scheduler-file``).

    A file being written (empty, or not yet a JSON object with an address) is read again
    for up to `CLUSTER_FILE_WAIT` seconds; then it is bad input, as a missing file is.
    """
    deadline = time.monotonic() + CLUSTER_FILE_WAIT
    while True:
        try:
            found = os.stat(path)
        except FileNotFoundError:
            msg = f"--cluster-file not found: {str(path)!r}"
            raise FileNotFoundError(msg) from None
        if not stat.S_ISREG(found.st_mode):  # a FIFO would block the read
            msg = f"--cluster-file {str(path)!r} is {describe(found.st_mode)}, not a regular file"
            raise ValueError(msg)
        text = path.read_text("utf-8", errors="replace")
        try:
            content = json.loads(text)
        except ValueError:
            content = None
        address = content.get("address") if isinstance(content, dict) else None
        if isinstance(address, str) and address:
            return address
        if time.monotonic() >= deadline:
            what = "is empty" if not text.strip() else "holds no scheduler address"
            msg = (
                f"--cluster-file {str(path)!r} {what} after {CLUSTER_FILE_WAIT:g} s of waiting "
                "(a file of `dask scheduler --scheduler-file`: is the scheduler still starting?)"
            )
            raise ValueError(msg)
        time.sleep(0.1)
