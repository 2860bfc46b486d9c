"""The planner every entry point walks through: the options, checked once, and the plan.

`plan` checks a request against the schemas and returns a `CountPlan`; nothing
is read until it runs. The plan is the one place that picks where the work runs (this
machine's CPU, the GPU, or a Dask cluster): `CountPlan.counts` for the counts,
`CountPlan.nearest_two` for each avatar's two nearest originals; `CountPlan.runs_on_cpu` and
`CountPlan.walks_here` say where they run, for the measures that share their walks,
`CountPlan.options_for` gives a measure on the same sets the plan's options, and
`require_cpu` refuses a cluster or the GPU to a measure that has no path there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypedDict, TypeVar, cast

import numpy as np
import polars as pl
from polars.exceptions import ComputeError

from polars_hidden_rate import engine
from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.checks import (
    AllComponents,
    check_flag,
    check_threads,
    check_tie_tol,
    known,
)
from polars_hidden_rate.cluster import arrays as distributed
from polars_hidden_rate.engine import CountResult, usable_cores
from polars_hidden_rate.engine.count import CountSettings, linked_result
from polars_hidden_rate.engine.nearest import NearestTwo, nearest_two
from polars_hidden_rate.engine.scale import canonical_scale, exponent_for, largest_magnitude
from polars_hidden_rate.frames import (
    RESERVED_PREFIX,
    Aligned,
    ColumnSpec,
    Link,
    as_lazy,
    as_text_if_category,
    check_ncp,
    check_unreserved,
    read_aligned,
    read_coordinates,
    resolve_coords,
    resolve_link,
)
from polars_hidden_rate.link.sets import copies_carried
from polars_hidden_rate.link.verdict import (
    VERDICT_OPTION_NAMES,
    Evidence,
    JudgedRead,
    Verdict,
    VerdictOptions,
    judged,
)
from polars_hidden_rate.progress import stage
from polars_hidden_rate.projection import ProjectedCoordinates
from polars_hidden_rate.projection.types import Impute
from polars_hidden_rate.tasks import require_client

FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)
Keys = str | Sequence[str]
Device = Literal["cpu", "gpu"]

_KEY = f"{RESERVED_PREFIX}_key"
_FINGERPRINT = f"{RESERVED_PREFIX}_fingerprint"


@dataclass(frozen=True)
class CountPlan:
    """A checked request for local cloaking counts; nothing is read until it runs."""

    originals: pl.LazyFrame
    avatars: pl.LazyFrame
    coords: list[str]
    link: Link
    tie_tol: float
    threads: int | None
    progress: bool | None
    device: Device
    cluster: Any | None
    projection: ProjectedCoordinates | None = None
    # Every coordinate column given, before ``ncp`` kept the first of them.
    given_coords: tuple[str, ...] = ()

    def read(self, carry: Sequence[pl.Expr] = (), carry_avatars: Sequence[pl.Expr] = ()) -> Aligned:
        """The linked coordinate arrays, ``carry`` of each original and ``carry_avatars`` of
        its own avatar, from the same read.

        Without ``coords``, the projection is fitted on the originals here, at collect time.
        """
        name = "reading" if self.projection is None else "reading and projecting"
        with stage(name, enabled=self.progress):
            if self.projection is not None:
                return self.projection.read(
                    self.originals, self.avatars, self.link, carry, carry_avatars
                )
            return read_aligned(
                self.originals, self.avatars, self.coords, self.link, carry, carry_avatars
            )

    def read_judged(self, verdict: Verdict, carry: Sequence[pl.Expr] = ()) -> JudgedRead:
        """`read` (with ``carry``), the link judged on it and its evidence taken from it
        (`polars_hidden_rate.link.verdict.judged`): a count of its arrays with ``closer``
        completes the evidence (`Evidence.counted`)."""
        extra, extra_avatars = copies_carried(self)
        return judged(self, verdict, self.read([*carry, *extra], extra_avatars))

    def counts(
        self,
        aligned: Aligned | None = None,
        *,
        cap: int | None = None,
        overwrite_input: bool = False,
        restore_order: bool = False,
    ) -> CountArray:
        """The exact counts ``c_i``, in the row order of ``aligned`` (default: a new read):
        those of `result`."""
        return self.result(
            aligned, cap=cap, overwrite_input=overwrite_input, restore_order=restore_order
        ).counts

    def result(
        self,
        aligned: Aligned | None = None,
        *,
        cap: int | None = None,
        overwrite_input: bool = False,
        restore_order: bool = False,
        closer: bool = False,
        keep_tree: bool = False,
    ) -> CountResult:
        """The exact counts ``c_i``, in the row order of ``aligned`` (default: a new read),
        and the strategy that ran (``"tree"`` or ``"flat"`` on the CPU, ``"gpu"``,
        ``"cluster"``).

        With ``cap``, ``min(c_i, cap)``: the CPU engine then stops each record at its
        ``cap``-th rival (``cap=1`` gives the hidden flags at the cost of the first rival);
        the cluster and GPU paths count in full and cap afterwards. With ``overwrite_input``,
        the caller no longer needs the arrays of ``aligned``: the CPU engine scales and
        reorders them in place rather than copying them (a read made here always is); with
        ``restore_order`` too, the arrays are left at the canonical scale in their row order, which
        a second count of them takes as they are (`count_cloaking`'s ``restore_order``).
        With ``closer``, each hidden record's flag says whether a rival is strictly
        closer than its own avatar (`closer_rivals`): the
        CPU engine finds it in the walk that counts. With ``keep_tree``, the CPU engine
        keeps the plain kd-tree it built on the avatars, where it built one
        (`cloaking_result`'s ``keep_tree``; with ``overwrite_input``, its points are the avatars'
        array, reordered).
        """
        if aligned is None:
            aligned, overwrite_input = self.read(), True
        originals, avatars = aligned.originals, aligned.avatars
        if self.cluster is not None:
            counts = distributed.count_cloaking_distributed(
                originals, avatars, client=self.cluster, tie_tol=self.tie_tol, threads=self.threads
            )
            used = "cluster"
        elif self.device == "gpu":
            from polars_hidden_rate.engine import gpu  # FAISS is loaded when used

            counts = gpu.count_cloaking_gpu(originals, avatars, tie_tol=self.tie_tol)
            used = "gpu"
        else:
            # Checked here and by the read: the engine takes them as they are.
            settings = CountSettings(
                threads=self.threads or usable_cores(),
                strategy="auto",
                cap=cap,
                overwrite_input=overwrite_input,
                restore_order=restore_order,
                keep_tree=keep_tree,
                progress=self.progress,
            )
            return linked_result(originals, avatars, self.tie_tol, settings, closer=closer)
        flags = None
        if closer:
            hidden = np.flatnonzero(counts > 0)
            flags = np.zeros(len(counts), dtype=bool)
            flags[hidden] = engine.closer_rivals(originals, avatars, hidden, threads=self.threads)
        return CountResult(counts if cap is None else np.minimum(counts, cap), flags, used)

    def result_and_nearest_two(self, aligned: Aligned) -> tuple[CountResult, NearestTwo]:
        """`result` (with the ``closer`` flags) and `nearest_two` of ``aligned``, whose arrays the
        caller no longer needs: the same values as the two, with no copy of the arrays on
        this machine's CPU where the counts' canonical scale is the distances' (``tie_tol``
        below 1: the power of two does not depend on it there).

        The arrays are scaled in place once; the count takes them as they are (its own
        scaling then multiplies by 1), reorders the avatars into its tree and puts them
        back; the nearest originals' tree then takes the originals in place. Elsewhere, or
        at another scale, the count copies them and the distances read them as given."""
        largest = max(
            largest_magnitude(aligned.originals, "originals"),
            largest_magnitude(aligned.avatars, "avatars"),
        )
        dim = aligned.originals.shape[1] if aligned.originals.ndim == 2 else 0
        exponent = exponent_for(largest, dim, self.tie_tol)
        if (
            self.cluster is not None
            or self.device != "cpu"
            or exponent != exponent_for(largest, dim)
            or len(aligned.originals) == 0
        ):
            return self.result(aligned, closer=True), self.nearest_two(aligned)
        (originals, avatars), _ = canonical_scale(
            aligned.originals, aligned.avatars, tie_tol=self.tie_tol, overwrite_input=True
        )
        scaled = replace(aligned, originals=originals, avatars=avatars)
        counted = self.result(scaled, overwrite_input=True, restore_order=True, closer=True)
        with stage("nearest originals", enabled=self.progress):
            found = nearest_two(
                originals, avatars, threads=self.threads, overwrite_input=True, linked=True
            )
        # Found at the scale of the arrays as given times 2^exponent: in their units again.
        return counted, replace(found, exponent=found.exponent + exponent)

    def nearest_two(self, aligned: Aligned) -> NearestTwo:
        """Each avatar's nearest two originals in ``aligned`` (`nearest_of`)."""
        return self.nearest_of(aligned.originals, aligned.avatars)

    def nearest_of(self, points: Float64Array, queries: Float64Array) -> NearestTwo:
        """Each query's nearest two ``points``: on `cluster` when given (the same
        floats), else on this machine's CPU, whatever `device` (the walk is exact on the
        CPU only)."""
        with stage("nearest originals", enabled=self.progress):
            if self.cluster is not None:
                return distributed.nearest_two_distributed(
                    points, queries, client=self.cluster, threads=self.threads
                )
            return nearest_two(points, queries, threads=self.threads)

    def fitted(self) -> CountPlan:
        """This plan with its projection fitted on the originals now, so that the frames
        `coordinates_of` reads share one space; as it is with ``coords``, or with a
        projection fitted beforehand."""
        if self.projection is None or self.projection.fitted is not None:
            return self
        with stage("fitting the projection", enabled=self.progress):
            fit = self.projection.fit(self.originals)
        return replace(self, projection=self.projection.with_fit(fit))

    @property
    def runs_on_cpu(self) -> bool:
        """Whether the counts run on this machine's CPU engine (no cluster, no GPU), where a
        measure can share their kd-trees and scaled arrays."""
        return self.cluster is None and self.device == "cpu"

    @property
    def walks_here(self) -> bool:
        """Whether the nearest-record walks run on this machine (`nearest_of`): everywhere
        but on a cluster, whatever `device`."""
        return self.cluster is None

    def options_for(self, columns: Sequence[str]) -> CountOptions:
        """The options of a measure of this plan's sets in the space of ``columns`` alone
        (the inference attack's known columns), on this machine: the plan's threads and tie
        tolerance, and, with a projection (fitted: `fitted`), those of ``columns`` it takes
        as categorical (by type, named, or ``"auto"``) and its imputation."""
        options: CountOptions = {"threads": self.threads, "tie_tol": self.tie_tol}
        if self.projection is not None:
            fit = known(self.projection.fitted, "the projection's fit (`fitted` first)")
            chosen = {f.name for f in fit.scaling.categorical}
            forced = [name for name in columns if name in chosen]
            if forced:
                options["categorical"] = forced
            options["impute"] = self.projection.spec.impute
        return options

    def coordinates_of(self, frame: pl.LazyFrame, role: str) -> Float64Array:
        """``frame``'s coordinates (the ``role`` side) in this plan's space, read on their own
        and linked to nothing: for the measures between sets of any size (a record's distance
        to the closest of another set). Call it on `fitted`."""
        if self.projection is None:
            return read_coordinates(frame, self.coords, role)
        return self.projection.coordinates_of(frame, role)

    def per_record(self) -> pl.LazyFrame:
        """The originals with ``local_cloaking`` and ``hidden``, counted when collected.

        Each row gets the count of the record it holds, whatever order the originals'
        plan gives its rows. By row order, the link itself is that order: the originals
        are read once, whole, and counted as read. By key, the counts are joined back
        on the key and a fingerprint of the columns that decide them, so a second
        read in another order matches them up, and one that changed a record fails.
        """
        schema = self.originals.collect_schema()
        index_type = pl.get_index_type()
        if self.link.by_row_order:

            def count_as_read() -> pl.DataFrame:
                frame = self.originals.collect()
                aligned = replace(self, originals=frame.lazy()).read()
                return _with_counts(frame, self.counts(aligned, overwrite_input=True))

            counted = pl.defer(count_as_read, schema={**schema, "local_cloaking": index_type})
        else:

            def count_by_key() -> pl.DataFrame:
                aligned = self.read(self._key_carry(schema))
                return self._keyed_counts(aligned, self.counts(aligned, overwrite_input=True))

            counted = self._joined(pl.defer(count_by_key, schema=self._keyed_schema(schema)))
        return counted.with_columns(hidden=pl.col("local_cloaking") > 0)

    def per_record_judged(self, verdict: Verdict) -> tuple[pl.LazyFrame, Evidence, str | None]:
        """`per_record`, read, judged (`read_judged`) and counted now: the frame, the evidence
        of the read its counts come from, and the strategy that counted."""
        schema = self.originals.collect_schema()
        if self.link.by_row_order:
            frame = self.originals.collect()
            read = replace(self, originals=frame.lazy()).read_judged(verdict)
            result = self.result(read.aligned, overwrite_input=True, closer=True)
            counted = _with_counts(frame, result.counts).lazy()
        else:
            read = self.read_judged(verdict, self._key_carry(schema))
            result = self.result(read.aligned, overwrite_input=True, closer=True)
            counted = self._joined(self._keyed_counts(read.aligned, result.counts).lazy())
        per_record = counted.with_columns(hidden=pl.col("local_cloaking") > 0)
        return per_record, read.evidence.counted(result), result.strategy

    def _key_carry(self, schema: pl.Schema) -> list[pl.Expr]:
        """What a read by key carries for `per_record`: the keys and the fingerprint."""
        keys = [pl.col(k).alias(f"{_KEY}{i}") for i, k in enumerate(self.link.left)]
        return [*keys, self._fingerprint(schema)]

    def _keyed_counts(self, aligned: Aligned, counts: CountArray) -> pl.DataFrame:
        """The keys and fingerprint ``aligned`` carried (`_key_carry`), with ``counts``."""
        names = {f"{_KEY}{i}": k for i, k in enumerate(self.link.left)}
        return aligned.carried.rename(names).with_columns(
            local_cloaking=pl.Series(counts, dtype=pl.get_index_type())
        )

    def _keyed_schema(self, schema: pl.Schema) -> dict[str, Any]:
        return {
            **{k: schema[k] for k in self.link.left},
            _FINGERPRINT: pl.UInt64,
            "local_cloaking": pl.get_index_type(),
        }

    def _joined(self, by_key: pl.LazyFrame) -> pl.LazyFrame:
        """The originals with the counts of ``by_key`` joined back on key and fingerprint;
        an original none matches fails (`_require_counted`)."""
        keys = list(self.link.left)
        schema = self.originals.collect_schema()
        index_type = pl.get_index_type()
        return (
            self.originals.with_columns(self._fingerprint(schema))
            .join(by_key, on=[*keys, _FINGERPRINT], how="left", maintain_order="left")
            .drop(_FINGERPRINT)
            .with_columns(
                pl.col("local_cloaking").map_batches(
                    _require_counted, return_dtype=index_type, is_elementwise=True
                )
            )
        )

    def _fingerprint(self, schema: pl.Schema) -> pl.Expr:
        """A hash of the columns that decide a record's count: its key and coordinates."""
        columns = self.projection.features if self.projection else self.coords
        # Categories as their text, not their codes.
        fields = [
            as_text_if_category(pl.col(name), schema[name])
            for name in dict.fromkeys([*self.link.left, *columns])
        ]
        return pl.struct(fields).hash(seed=0).alias(_FINGERPRINT)


def _with_counts(frame: pl.DataFrame, counts: CountArray) -> pl.DataFrame:
    return frame.with_columns(local_cloaking=pl.Series(counts, dtype=pl.get_index_type()))


def _require_counted(counts: pl.Series) -> pl.Series:
    """Every original found its count: a null means its record changed between two reads."""
    missing = counts.null_count()
    if missing:
        msg = (
            f"{missing} originals were not among the records counted: the originals' lazy plan "
            "gave other records when read again (sampling, or unique(keep='any'), for example); "
            "collect the originals first"
        )
        raise ComputeError(msg)
    return counts


class CountOptions(TypedDict, total=False):
    """The keyword options of every entry point, written once.

    [`local_cloaking`][polars_hidden_rate.local_cloaking],
    [`hidden_rate`][polars_hidden_rate.hidden_rate], the ``avatar`` namespace and
    [`assert_hidden_rate`][polars_hidden_rate.assert_hidden_rate] take them as keywords; an unknown
    keyword is a TypeError.

    Attributes
    ----------
    coords
        The projected coordinate columns, by name or selector (or an
        expression that selects, ``pl.col("^Dim.*$")``), present and numeric
        in both frames; an unordered collection (a set) is refused, since
        ``ncp`` takes the first ones. When None, the raw ``features`` are projected
        as the avatar method does ([`Projection`][polars_hidden_rate.Projection],
        fitted on the originals when the counting runs).
    ncp
        Use the first ``ncp`` columns of ``coords`` (default all of them), or
        without ``coords`` the first ``ncp`` components of the projection
        (default 5, or the rank of the originals when they span fewer; at most one per
        column of the scaled space). ``"all"``: every column of ``coords``, or every
        component of the scaled space, also the directions the originals do not span
        (saiph's ``nf=None``).
    on, left_on, right_on
        Key columns linking each original to its avatar, as in
        `polars.DataFrame.join`; the counts are joined back on the keys, so
        each record keeps its own count whatever order a lazy plan gives, and the
        originals stream. Default: row ``i`` of ``avatars`` is the avatar of row
        ``i`` of ``originals``, in the order the originals' plan gives, which are
        then read once, whole.
    tie_tol
        Relative tie tolerance; ``0`` gives the literal comparison. The default
        ``1e-9`` keeps exact ties that float64 rounding would split.
    features
        Raw feature columns to project when ``coords`` is None, by name or
        selector; default every column the two frames share, less the keys.
        A selector (or an expression that selects, ``pl.col("^x.*$")``) picks
        among the columns the two frames share: ``cs.numeric()`` leaves out a
        numeric identifier only the originals hold. Names must be in both.
    categorical
        Features to project as categorical whatever their type (categories
        coded as integers, for example), by name or selector.
    impute
        ``"none"`` (default: a missing feature value is an error), ``"median"``,
        ``"mean"`` or ``"mode"``: fill the missing values (null, NaN) of both
        frames' features with the originals' statistic (the mode for
        categorical columns) before projecting. The output keeps the values
        as given.
    threads
        Threads for the counting engine; default all cores.
    progress
        Show a progress bar on stderr; default: only on a terminal.
    device
        ``"cpu"``, or ``"gpu"`` for FAISS's GPU indexes.
    cluster
        A ``dask.distributed.Client`` to shard the counting over.
    """

    coords: ColumnSpec | None
    ncp: int | AllComponents | None
    on: Keys | None
    left_on: Keys | None
    right_on: Keys | None
    features: ColumnSpec | None
    categorical: ColumnSpec | None
    impute: Impute
    tie_tol: float
    threads: int | None
    progress: bool | None
    device: Device
    cluster: Any | None


OPTION_NAMES = frozenset(CountOptions.__annotations__)


class GateOptions(CountOptions, VerdictOptions, total=False):
    """The counting options and the verdict options, as
    [`assert_hidden_rate`][polars_hidden_rate.assert_hidden_rate] and
    [`local_cloaking_to_parquet`][polars_hidden_rate.local_cloaking_to_parquet] take them."""


def split_options(options: Mapping[str, Any]) -> tuple[CountOptions, Verdict]:
    """The counting options and the verdict's, from one set of keywords."""
    counting = {k: v for k, v in options.items() if k not in VERDICT_OPTION_NAMES}
    verdict = {k: v for k, v in options.items() if k in VERDICT_OPTION_NAMES}
    return cast(CountOptions, counting), Verdict.of(cast(VerdictOptions, verdict))


def plan(
    originals: pl.DataFrame | pl.LazyFrame,
    avatars: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    *,
    caller: str = "plan",
) -> CountPlan:
    """Check a request against the schemas and return its `CountPlan`.

    ``caller`` names the public function in the error for an unknown option.
    """
    unknown = sorted(set(options) - OPTION_NAMES)
    if unknown:
        msg = (
            f"{caller}() got an unexpected keyword argument {unknown[0]!r}; "
            f"its options are {', '.join(sorted(OPTION_NAMES))}"
        )
        raise TypeError(msg)
    coords, features = options.get("coords"), options.get("features")
    ncp, device = options.get("ncp"), options.get("device", "cpu")
    progress, cluster = options.get("progress"), options.get("cluster")
    originals_lf = as_lazy(originals, "originals")
    avatars_lf = as_lazy(avatars, "avatars")
    left_schema = originals_lf.collect_schema()
    right_schema = avatars_lf.collect_schema()
    if coords is not None and features is not None:
        msg = "give either `coords` (projected columns) or `features` (raw columns), not both"
        raise ValueError(msg)
    tie_tol = check_tie_tol(options.get("tie_tol", 1e-9))
    threads = check_threads(options.get("threads"))
    progress = None if progress is None else check_flag(progress, "progress", or_none=True)
    if device not in ("cpu", "gpu"):
        msg = f"`device` must be 'cpu' or 'gpu', got {device!r}"
        raise ValueError(msg)
    if cluster is not None and device != "cpu":
        msg = "`cluster` with `device='gpu'` is not available: pass one of them"
        raise NotImplementedError(msg)
    if cluster is not None:
        require_client(cluster)
    if device == "gpu":
        from polars_hidden_rate.engine import gpu

        gpu.require_gpu()
    check_unreserved(left_schema, "originals")
    check_unreserved(right_schema, "avatars")
    link = resolve_link(
        options.get("on"),
        options.get("left_on"),
        options.get("right_on"),
        left_schema,
        right_schema,
    )
    projection = None
    categorical, impute = options.get("categorical"), options.get("impute", "none")
    if coords is None:
        projection = ProjectedCoordinates.plan(
            features, categorical, impute, ncp, left_schema, right_schema, link
        )
    elif categorical is not None or impute != "none":
        msg = (
            "`categorical` and `impute` shape the projection of raw `features`; with `coords` "
            "the coordinates are given: drop them, or give `features` instead"
        )
        raise ValueError(msg)
    given = [] if coords is None else resolve_coords(coords, left_schema, right_schema)
    return CountPlan(
        originals=originals_lf,
        avatars=avatars_lf,
        coords=given[: check_ncp(ncp, len(given))] if given and ncp is not None else given,
        given_coords=tuple(given),
        link=link,
        tie_tol=tie_tol,
        threads=threads,
        progress=progress,
        device=device,
        cluster=cluster,
        projection=projection,
    )


def require_cpu(options: CountOptions, caller: str) -> None:
    """Refuse ``cluster`` and ``device`` to ``caller``, a measure whose exact nearest-record
    walks run on this machine's CPU only; before `plan` checks them (a GPU need not be there
    to be refused)."""
    if options.get("cluster") is not None or options.get("device", "cpu") != "cpu":
        msg = (
            f"{caller}() runs on this machine's CPU: drop `cluster` and `device` (its exact "
            "nearest-record walks have no cluster or GPU path yet)"
        )
        raise NotImplementedError(msg)
