"""What a measurement measured: its inputs (path, size, sha256, rows), every resolved setting,
the versions that computed it and when. Every output of the command line carries it (text,
JSON, HTML, and the per-record parquet's metadata), so a verdict can be audited later.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from polars_hidden_rate.frames import open_dataset
from polars_hidden_rate.frames.files import sha256
from polars_hidden_rate.link.verdict import Evidence, Verdict
from polars_hidden_rate.plan import CountPlan
from polars_hidden_rate.projection.coordinates import auto_categorical
from polars_hidden_rate.projection.scaling import NumericFeature

VERSIONED = ("polars-hidden-rate", "polars", "numpy", "faiss-cpu", "numba")
"""The distributions whose versions an output states."""


def versions(names: Sequence[str] = VERSIONED) -> dict[str, str | None]:
    """The installed version of each distribution of ``names`` (None when not installed)."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def utc_now() -> str:
    """The time now, UTC, to the second, ISO 8601."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def describe_input(
    path: str | Path, rows: int | None, files: Sequence[Path] | None = None
) -> dict[str, Any]:
    """A file's (or a parquet directory's) path, resolved, its size, sha256 and rows.

    A directory is described by the files its read reads, ``files`` (a `Dataset`'s paths), or
    when not given by the listing that read makes
    ([`open_dataset`][polars_hidden_rate.frames.datasets.open_dataset]): its parquet parts,
    never a subdirectory, a marker or another file the read skips.
    """
    given = Path(path)
    if given.is_dir():
        read = list(files) if files is not None else open_dataset(given, "input").paths
    else:
        read = [given]
    sizes = [file.stat().st_size for file in read]
    described: dict[str, Any] = {
        "path": str(given.resolve()),
        "size": sum(sizes),
        "rows": rows,
    }
    if given.is_dir():
        described["files"] = [
            {"name": file.name, "size": size, "sha256": sha256(file)}
            for file, size in zip(read, sizes, strict=True)
        ]
    else:
        described["sha256"] = sha256(given)
    return described


def with_fit(request: CountPlan) -> CountPlan:
    """``request`` with its projection fitted now (nothing to do with ``coords``), so that
    the settings it resolved can be stated; the counts then use that very fit."""
    return request.fitted()


def components_words(ncp: int, available: int, spanned: int) -> str:
    """``"5 of 47 components (the originals span 28)"``: the components kept of those the
    scaled space has, and the originals' rank where it is less (the components past it
    measure how far synthetic records leave the originals' span)."""
    words = f"{ncp} of {available} component{'' if available == 1 else 's'}"
    return words if spanned >= available else f"{words} (the originals span {spanned})"


def describe_settings(
    request: CountPlan,
    *,
    strategy: str | None = None,
    verdict: Mapping[str, Any] | None = None,
    link_test: Mapping[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    """Every setting ``request`` resolved: the space (coords, or the fitted projection's
    features, categorical columns and how they were chosen (the rule, and the columns by
    why, ``categorical_by``), kind, ncp of the available components and how many the
    originals span, the ``ncp`` asked for (an integer, ``"all"`` or
    None for the default), imputation and fills), the link, the tie tolerance and the engine (the
    ``strategy`` that counted: ``"tree"``, ``"flat"``, ``"gpu"`` or ``"cluster"``; ``"auto"``
    when the description precedes the count); the options of the ``verdict`` when one judged
    (``Verdict.to_dict``: ``allow_unlinked`` and ``by_row_order``, the link overrides, and
    ``max_own_copies``) and the ``link_test`` it ran (``LinkTest.to_dict``; None when it has
    not run); plus ``more``."""
    settings: dict[str, Any] = {}
    projection = request.projection
    if projection is None or projection.fitted is None:
        settings["space"] = {"coords": list(request.coords), "ncp": len(request.coords)}
    else:
        fitted = projection.fitted
        categorical = [f.name for f in fitted.scaling.categorical]
        settings["space"] = {
            "projection": fitted.model,
            "features": list(fitted.features),
            "categorical": categorical,
            "categorical_rule": projection.spec.categorical_rule,
            "categorical_by": projection.categorical_by(categorical),
            "ncp": fitted.ncp,
            "ncp_requested": projection.ncp,
            "components_available": fitted.max_ncp,
            "components_spanned": fitted.n_components,
            "impute": projection.spec.impute,
            "fills": {
                f.name: _plain(f.fill) for f in fitted.scaling.features if f.fill is not None
            },
            "fitted_on_rows": fitted.n_rows,
            # Codes (0/1, grades) the projection reads as numbers: the report says so.
            "few_valued_numbers": []
            if projection.auto
            else sorted(
                auto_categorical(
                    request.originals,
                    [f.name for f in fitted.scaling.features if isinstance(f, NumericFeature)],
                ),
                key=list(fitted.features).index,
            ),
        }
    link = request.link
    settings["link"] = (
        {"by": "row order"}
        if link.by_row_order
        else {"by": "key", "left_on": list(link.left), "right_on": list(link.right)}
    )
    settings["tie_tol"] = request.tie_tol
    settings["engine"] = {
        "strategy": strategy or "auto",
        "device": request.device,
        "cluster": request.cluster is not None,
    }
    if verdict is not None:
        settings.update(verdict)
        settings["link_test"] = None if link_test is None else dict(link_test)
    settings.update(more)
    return settings


def provenance(inputs: dict[str, dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """The provenance block of an output."""
    return {
        "inputs": inputs,
        "settings": settings,
        "versions": versions(),
        "measured_at": utc_now(),
    }


InputsOf = Callable[[Mapping[str, int]], dict[str, dict[str, Any]]]
"""A run's inputs as its provenance states them, given the rows its read counted (by role:
``originals``, ``avatars``, ``holdout``)."""

Describing = Callable[[CountPlan, pl.LazyFrame | None], InputsOf]
"""How a run describes its inputs: called once its plan is checked, with the plan and the
holdout (None without one), so that a file's hash runs beside the count; what it returns
states them once the rows are known."""


def frames_described(request: CountPlan, holdout: pl.LazyFrame | None) -> InputsOf:
    """Inputs given as frames (the Python API): no file to name or hash, their rows as the
    run's read counted them (no second read)."""
    return lambda rows: {role: {"rows": count} for role, count in rows.items()}


def stated(
    request: CountPlan,
    inputs: dict[str, dict[str, Any]],
    *,
    strategy: str | None,
    verdict: Verdict | None,
    evidence: Evidence | None,
    **more: Any,
) -> dict[str, Any]:
    """The provenance block of a run of ``request`` (`provenance`): its ``inputs``, its
    settings (`describe_settings`, with the ``strategy`` that counted, the ``verdict``'s
    options and the link test of its ``evidence``, and ``more``), the versions, the time."""
    settings = describe_settings(
        request,
        strategy=strategy,
        verdict=None if verdict is None else verdict.to_dict(),
        link_test=None if evidence is None else evidence.link.to_dict(),
        **more,
    )
    return provenance(inputs, settings)


def parquet_metadata(block: dict[str, Any]) -> dict[str, str]:
    """The provenance as key-value metadata of a parquet file (one JSON value)."""
    return {"polars_hidden_rate": json.dumps(block, sort_keys=True)}


def _plain(value: object) -> object:
    return value if isinstance(value, str | bool | int | float) else str(value)


def frame_rows(frame: pl.LazyFrame) -> int:
    """The rows of a lazy input."""
    return int(frame.select(pl.len()).collect().item())
