"""Measures against a holdout: real records of the same population that the generator never
saw, the control that tells an attack's success from what any synthetic set of that
population gives.

- [`membership_risk`][polars_hidden_rate.membership_risk]: the membership attack (is this real
record one of the training
  originals?), scored by each real record's distance to its nearest synthetic record
  (`polars_hidden_rate.membership`).
- [`dcr_overfitting_protection`][polars_hidden_rate.dcr_overfitting_protection]: SDMetrics' DCR
overfitting protection, the share of
  synthetic records closer to the training originals than to the holdout, mapped to a score.
- [`inference_risk`][polars_hidden_rate.inference_risk]: the attribute inference attack
  (anonymeter's): guess a target's secret from the synthetic record nearest to it on the
  attributes the attacker knows, on the originals and on the holdout (the control)
  (`polars_hidden_rate.inference`).

The first two measure in the space of [`local_cloaking`][polars_hidden_rate.local_cloaking]: the
projection fitted on the originals (the training records) or the ``coords`` given, with the
synthetic records and the holdout transformed by that same fitted model. No link is needed,
and the three sets may have any sizes. Every distance is exact in float64, the three arrays
brought to one power-of-two scale first, so every comparison between two distances is the
float64 brute force's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Unpack

import numpy as np
import polars as pl
from polars.exceptions import ColumnNotFoundError, ComputeError, NoDataError, SchemaError

from polars_hidden_rate._types import CountArray, Float64Array, IndexArray
from polars_hidden_rate.checks import AllComponents, check_confidence, check_real, check_tie_tol
from polars_hidden_rate.engine import squared_distances, usable_cores
from polars_hidden_rate.engine.kdtree import KdTree, build_side_by_side
from polars_hidden_rate.engine.nearest import (
    NearestTwo,
    nearest_two,
    squared_nearest,
    squared_nearest_two,
    walk_order,
    within_reach,
)
from polars_hidden_rate.engine.scale import (
    canonical_scale,
    exponent_for,
    largest_magnitude,
    same_columns,
    scaled_by,
)
from polars_hidden_rate.frames import (
    Aligned,
    ColumnSpec,
    as_lazy,
    common_feature_type,
    inexact_counts,
    is_text,
    raise_inexact,
    resolve_columns,
)
from polars_hidden_rate.frames.text_numbers import text_numbers_example
from polars_hidden_rate.inference import DEFAULT_TOLERANCE, InferenceRisk, SecretKind
from polars_hidden_rate.membership import MembershipRisk
from polars_hidden_rate.plan import CountOptions, CountPlan, ReadInspector, plan
from polars_hidden_rate.progress import stage

__all__ = [
    "DcrOverfitting",
    "HoldoutFigures",
    "HoldoutSpace",
    "InferenceAttack",
    "LinkedCloaking",
    "counts_and_figures",
    "dcr_overfitting_protection",
    "inference_risk",
    "membership_risk",
]


def check_holdout(originals: pl.Schema, holdout: pl.Schema) -> None:
    """Refuse a holdout whose columns or types are not the originals': it would not be a
    sample of the same population's records, as the control needs."""
    missing = [name for name in originals.names() if name not in holdout]
    extra = [name for name in holdout.names() if name not in originals]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"lacks {', '.join(map(repr, missing[:5]))}")
        if extra:
            parts.append(f"holds {', '.join(map(repr, extra[:5]))}, which the originals do not")
        msg = f"holdout must hold the originals' columns, and only them: it {' and '.join(parts)}"
        raise SchemaError(msg)
    for name, dtype in originals.items():
        if holdout[name] != dtype:
            msg = (
                f"holdout column {name!r} is {holdout[name]}, but the originals' is {dtype}: "
                "a holdout holds records of the same table"
            )
            raise SchemaError(msg)


@dataclass(frozen=True)
class HoldoutSpace:
    """The originals, the synthetic records and the holdout, as coordinate arrays of one
    space (the plan's), read at once."""

    originals: Float64Array
    synthetic: Float64Array
    holdout: Float64Array
    threads: int | None

    @classmethod
    def read(
        cls,
        originals: pl.DataFrame | pl.LazyFrame,
        synthetic: pl.DataFrame | pl.LazyFrame,
        holdout: pl.DataFrame | pl.LazyFrame,
        options: CountOptions,
        caller: str,
    ) -> HoldoutSpace:
        """Check the request (the holdout's schema first, before anything is read), fit the
        projection on the originals, and read the three sets in its space."""
        request = _holdout_plan(originals, synthetic, holdout, options, caller)
        space = request.fitted()
        return cls(
            space.coordinates_of(space.originals, "originals"),
            space.coordinates_of(space.avatars, "synthetic"),
            space.coordinates_of(as_lazy(holdout, "holdout"), "holdout"),
            request.threads,
        )


def membership_risk(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    *,
    confidence: float = 0.95,
    **options: Unpack[CountOptions],
) -> MembershipRisk:
    """The membership attack: can an attacker holding a real record and the synthetic set
    tell whether the record was among the originals the generator learnt from?

    Each real record, original (a member) or holdout (not one), is scored by its distance to
    its nearest synthetic record; the closer, the likelier a member. The figures compare the
    two groups' scores ([`MembershipRisk`][polars_hidden_rate.MembershipRisk]): the AUC
    (ties counting half, counted exactly), its DeLong interval, and the true positive rate at
    a false positive rate (10 % by default, as the attack papers report it). Random guessing
    gives an AUC of 0.5 and a true positive rate equal to the false positive rate.

    Parameters
    ----------
    originals
        The records the synthetic set was generated from (the members).
    synthetic
        The synthetic records, any number of them (avatars or another generator's).
    holdout
        Real records of the same population that the generator never saw, with the
        originals' columns and types.
    confidence
        The level of the AUC's interval.
    **options
        ``coords`` or ``features``, ``categorical``, ``impute`` and ``ncp`` choose the
        space, as for [`local_cloaking`][polars_hidden_rate.local_cloaking]; ``threads``. No link:
        ``on`` only keeps key columns out of the default features. ``cluster`` and
        ``device="gpu"`` are refused (the walk runs on this machine's CPU).

    Raises
    ------
    polars.exceptions.SchemaError
        When the holdout's columns or types differ from the originals', before anything is
        read.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 1.0, 2.0, 3.0]})
    >>> synthetic = pl.DataFrame({"Dim1": [0.0, 1.0, 2.0, 3.0]})  # copies
    >>> holdout = pl.DataFrame({"Dim1": [0.5, 1.5, 2.5, 3.5]})
    >>> risk = phr.membership_risk(originals, synthetic, holdout, coords="Dim1")
    >>> risk.auc, risk.tpr_at_fpr(0.1)
    (1.0, 1.0)
    """
    space = HoldoutSpace.read(originals, synthetic, holdout, options, "membership_risk")
    return MembershipRisk.of_arrays(
        space.originals,
        space.synthetic,
        space.holdout,
        threads=space.threads,
        confidence=confidence,
    )


@dataclass(frozen=True)
class DcrOverfitting:
    """SDMetrics' DCR overfitting protection of a synthetic set.

    Attributes
    ----------
    score
        ``min(2 (1 - closer_to_training), 1)``, in [0, 1]: 1 when at most half of the
        synthetic records lie strictly closer to the training originals than to the holdout.
    closer_to_training
        The share of synthetic records whose nearest training original is strictly closer
        than their nearest holdout record (a tie counts for the holdout, as in SDMetrics).
    synthetic, originals, holdout
        The sizes of the three sets.
    """

    score: float
    closer_to_training: float
    synthetic: int
    originals: int
    holdout: int

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
    ) -> DcrOverfitting:
        """From the three sets' coordinates: one scale, a kd-tree of each real set."""
        (training, queries, others), _ = canonical_scale(
            originals, synthetic, holdout, names=("originals", "synthetic", "holdout")
        )
        threads = threads or usable_cores()
        training_tree = KdTree.build(training, threads=threads)
        rows = walk_order(training_tree, queries, threads=threads)  # one order for both walks
        to_training = squared_nearest(training_tree, queries, threads=threads, rows=rows)
        holdout_tree = KdTree.build(others, threads=threads)
        return cls.of_nearest(to_training, holdout_tree, queries, len(training), threads, rows)

    @classmethod
    def of_distances(
        cls, to_training: Float64Array, to_holdout: Float64Array, originals: int, holdout: int
    ) -> DcrOverfitting:
        """From each synthetic record's ``d2`` to its nearest training original and to its
        nearest holdout record, at one scale."""
        closer = int(np.count_nonzero(to_training < to_holdout))
        return cls._of_closer(closer, len(to_training), originals, holdout)

    @classmethod
    def of_nearest(
        cls,
        to_training: Float64Array,
        holdout: KdTree,
        synthetic: Float64Array,
        originals: int,
        threads: int,
        rows: IndexArray | None = None,
    ) -> DcrOverfitting:
        """`of_distances` from each synthetic record's ``d2`` to its nearest training original
        and the holdout's kd-tree, at one scale: a record is closer to the training originals
        when no holdout record lies within that ``d2`` (`within_reach`, the synthetic records
        walked in the order ``rows``: the same answer as comparing the two nearest, for
        less)."""
        not_closer = within_reach(holdout, synthetic, to_training, threads=threads, rows=rows)
        closer = len(to_training) - int(np.count_nonzero(not_closer))
        return cls._of_closer(closer, len(to_training), originals, holdout.avatars)

    @classmethod
    def _of_closer(
        cls, closer: int, synthetic: int, originals: int, holdout: int
    ) -> DcrOverfitting:
        share = closer / synthetic
        return cls(min(2.0 * (1.0 - share), 1.0), share, synthetic, originals, holdout)

    def to_dict(self) -> dict[str, float | int]:
        """The figures as JSON values."""
        return {
            "score": self.score,
            "closer_to_training": self.closer_to_training,
            "closer_to_holdout": 1.0 - self.closer_to_training,
            "synthetic": self.synthetic,
            "originals": self.originals,
            "holdout": self.holdout,
        }


def dcr_overfitting_protection(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    **options: Unpack[CountOptions],
) -> DcrOverfitting:
    """SDMetrics' DCR overfitting protection: does the synthetic set lie closer to the
    records it was generated from than to real records it never saw?

    For each synthetic record, its distance to the closest training original and to the
    closest holdout record; ``closer_to_training`` is the share where the first is strictly
    smaller, and the score ``min(2 (1 - closer_to_training), 1)``. A generator that learnt the
    population, not its records, puts about half of them closer to each set (the holdout
    should be about as large as the originals; SDMetrics warns below half). Unlike SDMetrics,
    whose distance is a per-column normalised one, the distances are those of
    [`local_cloaking`][polars_hidden_rate.local_cloaking]'s space, exact in float64
    (docs/metrics.md).

    Parameters
    ----------
    originals, synthetic, holdout, **options
        As for [`membership_risk`][polars_hidden_rate.membership_risk].

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"Dim1": [0.0, 2.0]})
    >>> holdout = pl.DataFrame({"Dim1": [1.0, 3.0]})
    >>> synthetic = pl.DataFrame({"Dim1": [0.1, 2.9, 1.5, 0.5]})
    >>> found = phr.dcr_overfitting_protection(originals, synthetic, holdout, coords="Dim1")
    >>> found.closer_to_training, found.score
    (0.25, 1.0)
    """
    space = HoldoutSpace.read(originals, synthetic, holdout, options, "dcr_overfitting_protection")
    return DcrOverfitting.of_arrays(
        space.originals, space.synthetic, space.holdout, threads=space.threads
    )


def inference_risk(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    *,
    known: ColumnSpec,
    secret: str,
    secret_kind: SecretKind = "auto",
    tolerance: float = DEFAULT_TOLERANCE,
    confidence: float = 0.95,
    **options: Unpack[CountOptions],
) -> InferenceRisk:
    """The attribute inference attack: knowing some attributes of a real record, how well
    does the synthetic set give away another, beyond what it gives about any record of the
    population?

    The attacker takes the synthetic record nearest to the target on the ``known``
    attributes and guesses its ``secret`` (anonymeter's inference evaluator). The nearest
    record is found in the projection of the known attributes fitted on the originals, with
    every component (``ncp="all"``): the Euclidean distance of the standardized known
    attributes (numbers centred on the originals' mean and divided by their standard
    deviation; each category an indicator centred on its share ``p`` and divided by
    ``sqrt(p)``, as FAMD weighs them). Every target is attacked, the originals (the members)
    and the holdout (the control); ties among nearest records are shared
    ([`InferenceRisk`][polars_hidden_rate.InferenceRisk]), a record being tied nearest when its
    squared distance is within ``tie_tol`` (relative, default 1e-9) of the nearest's, as a
    rival ties with one's own avatar in the local cloaking: the projection's roundings do not
    split two records at the same distance.

    Parameters
    ----------
    originals
        The records the synthetic set was generated from (the members).
    synthetic
        The synthetic records, any number of them, with the ``known`` and ``secret`` columns.
    holdout
        Real records of the same population that the generator never saw, with the
        originals' columns and types.
    known
        The attributes the attacker knows of a target: one or more columns.
    secret
        The attribute the attacker guesses, not among ``known``.
    secret_kind
        ``"categorical"``: a guess is right when equal to the secret (a missing value
        matches a missing one); ``"numeric"``: when within ``tolerance * |secret|`` of it;
        ``"auto"`` (default): numeric for a number column, categorical otherwise. A text
        secret whose values are all numbers is refused under ``"auto"``: say which it is.
    tolerance
        The share of a numeric secret's magnitude a right guess may miss it by (anonymeter's
        0.05); unused for a categorical secret.
    confidence
        The level of the rates' errors and of the risk's interval.
    **options
        ``categorical``, ``impute`` and ``ncp`` (default ``"all"``) choose the known
        attributes' space, as for [`local_cloaking`][polars_hidden_rate.local_cloaking];
        ``tie_tol``; ``threads``. ``coords`` and ``features`` are refused (the space is the
        known attributes'), and so are the link options ``on``, ``left_on`` and ``right_on``
        (the attack needs no link), ``cluster`` and ``device="gpu"``.

    Raises
    ------
    polars.exceptions.ColumnNotFoundError
        When a known or secret column is missing from a set, before anything is read.
    polars.exceptions.DuplicateError
        When ``known`` names a column twice.
    polars.exceptions.SchemaError
        When the holdout's columns or types differ from the originals', or the secret's type
        cannot be judged as asked, before anything is read.
    polars.exceptions.ComputeError
        When a known column or the secret holds values that cannot be measured: gaps without
        ``impute``, integers beyond 2^53 that float64 does not hold, text that holds numbers.
    polars.exceptions.NoDataError
        When a set holds no record.
    ValueError, TypeError
        For a bad option (the message names it); NotImplementedError for ``cluster`` or
        ``device="gpu"``.

    Examples
    --------
    >>> import polars as pl
    >>> import polars_hidden_rate as phr
    >>> originals = pl.DataFrame({"age": [30, 40, 50, 60], "ill": ["y", "n", "y", "n"]})
    >>> synthetic = originals  # copies: every secret is given away
    >>> holdout = pl.DataFrame({"age": [31, 41, 52, 58], "ill": ["n", "y", "n", "y"]})
    >>> found = phr.inference_risk(originals, synthetic, holdout, known="age", secret="ill")
    >>> found.members.successes, found.control.successes, round(found.risk, 3)
    (4.0, 0.0, 0.676)
    """
    schema = as_lazy(originals, "originals").collect_schema()
    attack = InferenceAttack.of(
        resolve_columns(known, schema, "originals", "known"), secret, secret_kind, tolerance
    )
    return attack.run(originals, synthetic, holdout, confidence=confidence, **options)


@dataclass(frozen=True)
class InferenceAttack:
    """What [`inference_risk`][polars_hidden_rate.inference_risk] is asked, checked: the
    attribute inference attack of a report is this, run on the report's sets."""

    known: tuple[str, ...]
    secret: str
    secret_kind: SecretKind = "auto"
    tolerance: float = DEFAULT_TOLERANCE

    @classmethod
    def of(
        cls,
        known: Sequence[str],
        secret: str,
        secret_kind: SecretKind = "auto",
        tolerance: float = DEFAULT_TOLERANCE,
    ) -> InferenceAttack:
        """Check the settings, ``known`` resolved to names (`resolve_columns`) beforehand."""
        names = list(known)
        _check_attack(names, secret)
        if secret_kind not in ("auto", "categorical", "numeric"):
            msg = f"`secret_kind` must be 'auto', 'categorical' or 'numeric', got {secret_kind!r}"
            raise ValueError(msg)
        return cls(tuple(names), secret, secret_kind, check_real(tolerance, "tolerance", low=0.0))

    def check(self, schemas: dict[str, pl.Schema]) -> Literal["categorical", "numeric"]:
        """Check the columns in the three sets' schemas (originals, synthetic, holdout) and
        return how the secret is judged."""
        for role, schema in schemas.items():
            resolve_columns(list(self.known), schema, role, "known")
            if self.secret not in schema:
                msg = f"secret {self.secret!r} not found in {role}; available: {schema.names()}"
                raise ColumnNotFoundError(msg)
        return _secret_kind(
            self.secret,
            schemas["originals"][self.secret],
            schemas["synthetic"][self.secret],
            self.secret_kind,
        )

    def run(
        self,
        originals: pl.DataFrame | pl.LazyFrame,
        synthetic: pl.DataFrame | pl.LazyFrame,
        holdout: pl.DataFrame | pl.LazyFrame,
        *,
        confidence: float = 0.95,
        **options: Unpack[CountOptions],
    ) -> InferenceRisk:
        """Check the sets (the holdout's schema first), read each once, and attack."""
        for option in ("coords", "features", "on", "left_on", "right_on"):
            if options.get(option) is not None:
                why = (
                    "the space is the `known` columns'"
                    if option in ("coords", "features")
                    else ("the attack needs no link between the sets")
                )
                msg = f"inference_risk() takes no `{option}`: {why}"
                raise ValueError(msg)
        check_confidence(confidence)
        tie_tol = check_tie_tol(options.get("tie_tol", 1e-9))
        names = list(self.known)
        frames = {
            "originals": as_lazy(originals, "originals"),
            "synthetic": as_lazy(synthetic, "synthetic"),
            "holdout": as_lazy(holdout, "holdout"),
        }
        schemas = {role: frame.collect_schema() for role, frame in frames.items()}
        check_holdout(schemas["originals"], schemas["holdout"])
        kind = self.check(schemas)
        asked = options.get("ncp")
        ncp: int | AllComponents = "all" if asked is None else asked  # every one unless asked
        space_options: CountOptions = {**options, "features": names, "ncp": ncp}
        sets = (frames["originals"], frames["synthetic"], frames["holdout"])
        _holdout_plan(*sets, space_options, "inference_risk")
        # Read each set once, the secret with the known attributes: a lazy plan that gives its
        # rows in another order on a second read cannot pair a record with another's secret.
        read = {
            role: frame.select([*names, self.secret]).collect() for role, frame in frames.items()
        }
        for role, frame in read.items():
            if frame.height == 0:
                raise NoDataError(f"{role}: no record, so there is nothing to attack")
        secrets = _secret_values(read, self.secret, kind, chosen=self.secret_kind != "auto")
        request = _holdout_plan(
            read["originals"], read["synthetic"], read["holdout"], space_options, "inference_risk"
        ).fitted()
        fitted = request.projection.fitted if request.projection is not None else None
        found = InferenceRisk.of_arrays(
            request.coordinates_of(request.originals, "originals"),
            request.coordinates_of(request.avatars, "synthetic"),
            request.coordinates_of(read["holdout"].lazy(), "holdout"),
            secrets,
            secret_kind=kind,
            tolerance=self.tolerance,
            tie_tol=tie_tol,
            threads=request.threads,
            confidence=confidence,
        )
        categorical = () if fitted is None else tuple(f.name for f in fitted.scaling.categorical)
        return replace(
            found, known=self.known, secret=self.secret, ncp=ncp, categorical=categorical
        )


def _check_attack(names: Sequence[str], secret: object) -> None:
    """The secret against the known names, which `resolve_columns` (or `check_known`) has
    already checked: present, none twice, at least one."""
    if not isinstance(secret, str):
        msg = f"`secret` must be one column name, got {secret!r}"
        raise TypeError(msg)
    if secret in names:
        msg = f"secret {secret!r} is among the known columns: the attacker would know it"
        raise ValueError(msg)


def _secret_kind(
    secret: str, originals: pl.DataType, synthetic: pl.DataType, asked: SecretKind
) -> Literal["categorical", "numeric"]:
    """How the secret is judged; a SchemaError where its types cannot be compared so."""
    try:
        common_feature_type(secret, originals, synthetic)
    except SchemaError:
        msg = (
            f"secret {secret!r} is {originals} in originals but {synthetic} in synthetic; "
            "cast one side to the other's type first"
        )
        raise SchemaError(msg) from None
    numbers = originals.is_numeric() and synthetic.is_numeric()
    if asked == "numeric" and not numbers:
        msg = (
            f"secret {secret!r} is {originals} in originals and {synthetic} in synthetic: "
            "secret_kind='numeric' needs numbers"
        )
        raise SchemaError(msg)
    if asked == "auto":
        return "numeric" if numbers else "categorical"
    return asked


def _secret_values(
    read: dict[str, pl.DataFrame],
    secret: str,
    kind: Literal["categorical", "numeric"],
    *,
    chosen: bool,
) -> tuple[Float64Array, Float64Array, Float64Array]:
    """The three sets' secrets as float64, in the order of their coordinates: numbers as
    they are, categories as codes shared by the three sets; a missing value as NaN. Text that
    holds numbers is refused unless the kind was ``chosen``."""
    columns = [frame.get_column(secret) for frame in read.values()]
    dtypes = [column.dtype for column in columns]
    if kind == "numeric" or (len(set(dtypes)) > 1 and not all(map(is_text, dtypes))):
        # Compared as float64, which must hold every value.
        for (role, frame), column in zip(read.items(), columns, strict=True):
            wanted = {secret: column.dtype}
            raise_inexact(inexact_counts(frame, wanted), wanted, "secret", role)
    if kind == "numeric":
        return tuple(  # type: ignore[return-value]
            column.cast(pl.Float64).fill_null(float("nan")).to_numpy() for column in columns
        )
    if all(is_text(dtype) for dtype in dtypes):
        columns = [column.cast(pl.String) for column in columns]
        found = text_numbers_example(columns[0].drop_nulls().unique().to_list())
        if found is not None and not chosen:
            example, how = found
            msg = (
                f"secret {secret!r} of originals is text but every value is a number written "
                f"with {' and '.join(how)}, e.g. {example!r}: cast it to a number, or pass "
                "secret_kind='categorical' to compare the texts"
            )
            raise ComputeError(msg)
    elif len(set(dtypes)) > 1:
        columns = [column.cast(pl.Float64) for column in columns]
    codes = pl.concat(columns).rank("dense").cast(pl.Float64).fill_null(float("nan")).to_numpy()
    ends = np.cumsum([len(column) for column in columns])
    return codes[: ends[0]], codes[ends[0] : ends[1]], codes[ends[1] :]


@dataclass(frozen=True)
class HoldoutFigures:
    """What a report shows of a holdout: the membership attack, the DCR overfitting
    protection, and the holdout's own DCR and NNDR against the originals (the Avatar paper's
    "Reference": what real records the generator never saw look like from the originals)."""

    membership: MembershipRisk
    overfitting: DcrOverfitting
    reference_distance_to_closest_median: float
    reference_closest_distances_ratio_median: float
    inference: InferenceRisk | None = None

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
        confidence: float = 0.95,
    ) -> HoldoutFigures:
        """The figures from the three sets' coordinates (`with_nearest`, less the synthetic
        records' nearest originals)."""
        walks = _SharedWalks.of(originals, synthetic, holdout, threads)
        return walks.figures(originals, holdout, confidence)

    @classmethod
    def with_nearest(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int | None = None,
        confidence: float = 0.95,
        overwrite_input: bool = False,
        cloaking: LinkedCloaking | None = None,
        exponent: int = 0,
    ) -> tuple[NearestTwo, HoldoutFigures]:
        """The figures and each synthetic record's two nearest originals (a report's DCR and
        NNDR: `nearest_two` of the originals and the synthetic records), from walks they
        share.

        The three arrays are brought to one canonical scale once and each set gets one
        kd-tree (its scaled copy reordered in place, no other copy). The walk of the
        synthetic records through the originals' tree gives both the DCR and the DCR
        overfitting's distances to the training records, and the originals' tree serves
        the holdout's reference DCR too, wherever the scale of the pair that `nearest_two`
        would take is that of the three (else those walk on their own, as before): every
        number is the one the separate functions give, bit for bit.

        With ``overwrite_input``, the caller no longer needs the three arrays: where every
        walk is shared they are scaled and become the trees' points in place (no copy).

        With ``cloaking``, the synthetic records are the originals' avatars (row ``i`` of
        one linked to row ``i`` of the other) and their local cloaking is known: an original
        that no rival hides has its own avatar nearest, so its membership score is that
        ``d2``, and the others' walks start from it (`LinkedCloaking`); with its ``tree``,
        the synthetic records are its points (`counts_and_figures`).

        ``exponent``: the power of two the three arrays were multiplied by already (one
        for all three, as `canonical_scale` gives it); the distances come back in the units
        before it.
        """
        walks = _SharedWalks.of(
            originals, synthetic, holdout, threads, overwrite_input, cloaking, given=exponent
        )
        if walks.same_as_dcr:
            found = NearestTwo.from_squared(
                _in_rows(walks.synthetic_to_originals(), walks.synthetic), walks.units
            )
        else:
            found = walks.in_units(nearest_two(originals, synthetic, threads=walks.threads))
        return found, walks.figures(originals, holdout, confidence)

    def rows(self) -> list[tuple[str, str]]:
        """The figures as (label, value) lines, for the text and the page of a report."""
        risk, overfit = self.membership, self.overfitting
        low, high = risk.auc_interval
        level = f"{100 * risk.confidence:g} %"
        return [
            ("holdout records", f"{len(risk.holdout):,}"),
            (
                "membership AUC",
                f"{risk.auc:.4f} ({low:.4f} to {high:.4f}, DeLong {level}; random 0.5)",
            ),
            ("membership TPR at 10 % FPR", f"{100 * risk.tpr_at_fpr(0.1):.2f} % (random 10 %)"),
            (
                "DCR overfitting protection",
                f"{overfit.score:.4f} ({100 * overfit.closer_to_training:.2f} % of synthetic "
                "records closer to the originals than to the holdout)",
            ),
            ("holdout DCR median", f"{self.reference_distance_to_closest_median:.4g}"),
            ("holdout NNDR median", f"{self.reference_closest_distances_ratio_median:.4g}"),
            *([] if self.inference is None else _inference_rows(self.inference)),
        ]

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON values: ``membership``, ``dcr_overfitting_protection``,
        ``reference`` (the holdout's ``records``, ``distance_to_closest_median`` and
        ``closest_distances_ratio_median``) and ``inference`` (None unless asked)."""
        return {
            "membership": self.membership.to_dict(),
            "inference": None if self.inference is None else self.inference.to_dict(),
            "dcr_overfitting_protection": self.overfitting.to_dict(),
            "reference": {
                "records": len(self.membership.holdout),
                "distance_to_closest_median": self.reference_distance_to_closest_median,
                "closest_distances_ratio_median": self.reference_closest_distances_ratio_median,
            },
        }


def _inference_rows(found: InferenceRisk) -> list[tuple[str, str]]:
    low, high = found.risk_interval
    level = f"{100 * found.confidence:g} %"
    judged = (
        "equal"
        if found.secret_kind == "categorical"
        else f"within {100 * found.tolerance:g} % of the secret"
    )
    members, control = found.members, found.control
    return [
        (
            f"inference risk on {found.secret!r}",
            f"{found.risk:.4f} ({low:.4f} to {high:.4f}, {level}; 0: no more than on the holdout)",
        ),
        (
            "  attacker knows",
            f"{', '.join(map(repr, found.known))}; a guess is right when {judged}",
        ),
        (
            "  right guesses",
            f"{100 * members.successes / members.records:.2f} % of originals, "
            f"{100 * control.successes / control.records:.2f} % of the holdout (Wilson rates "
            f"{100 * members.rate:.2f} % and {100 * control.rate:.2f} %, which the risk compares)",
        ),
    ]


@dataclass(frozen=True)
class LinkedCloaking:
    """The local cloaking of each original against the synthetic records, row ``i`` of
    the synthetic set being row ``i``'s own avatar, as `count_cloaking` counts it with
    ``tie_tol`` from the same two arrays: a count of 0 says that every rival lies
    strictly beyond the own avatar, which is then the nearest synthetic record.

    That holds at the count's canonical scale; the holdout's walks use it only where the
    three sets' scale is the same power of two (the same floats), and walk every original
    elsewhere. There too they walk ``tree``, when given: the kd-tree of the synthetic
    records that the count walked (`count_cloaking`'s ``keep_tree``), its points at the
    count's scale, instead of building it again."""

    counts: CountArray
    tie_tol: float
    tree: KdTree | None = None


def counts_and_figures(
    request: CountPlan,
    inspector: ReadInspector,
    aligned: Aligned,
    holdout: Float64Array,
    *,
    confidence: float,
) -> tuple[CountArray, NearestTwo, HoldoutFigures]:
    """`CountPlan.counts_for` ``inspector`` and `HoldoutFigures.with_nearest` of ``aligned``
    and the ``holdout`` coordinates, arrays the caller no longer needs, on this machine's
    CPU: the same counts and figures as the two, from fewer copies and trees.

    Where the count's canonical scale is that of the three sets and of each pair the
    separate walks take (``tie_tol`` below 1 and no set with a larger power of two), the
    three arrays are scaled in place once; the count takes them as they are, builds its
    kd-tree of the avatars on their array, and the holdout's walks take that tree rather
    than building it again. Elsewhere the count copies the arrays and the figures scale
    them on their own."""
    originals, avatars = aligned.originals, aligned.avatars
    o_largest, s_largest, h_largest = (
        largest_magnitude(array, name)
        for array, name in ((originals, "originals"), (avatars, "avatars"), (holdout, "holdout"))
    )
    dim = originals.shape[1] if originals.ndim == 2 else 0
    three = exponent_for(max(o_largest, s_largest, h_largest), dim)
    scales = {
        exponent_for(max(o_largest, s_largest), dim, request.tie_tol),  # the count's
        exponent_for(max(o_largest, s_largest), dim),  # the avatars' nearest originals'
        exponent_for(max(o_largest, h_largest), dim),  # the holdout's nearest originals'
    }
    options: dict[str, Any] = {"threads": request.threads, "confidence": confidence}
    if request.device != "cpu" or scales != {three}:
        counts = request.counts_for(inspector, aligned)
        cloaking = LinkedCloaking(counts, request.tie_tol)
        with stage("nearest records, with the holdout", enabled=request.progress):
            found, figures = HoldoutFigures.with_nearest(
                originals, avatars, holdout, overwrite_input=True, cloaking=cloaking, **options
            )
        return counts, found, figures
    (originals, avatars, holdout), _ = canonical_scale(
        originals, avatars, holdout, overwrite_input=True
    )
    # With the count's tree of the avatars, their array reordered into it.
    scaled = replace(aligned, originals=originals, avatars=avatars)
    counted = request.result_for(inspector, scaled, consume=True, keep_tree=True)
    counts, cloaking = counted.counts, LinkedCloaking(counted.counts, request.tie_tol, counted.tree)
    with stage("nearest records, with the holdout", enabled=request.progress):
        found, figures = HoldoutFigures.with_nearest(
            originals,
            avatars,
            holdout,
            overwrite_input=True,
            cloaking=cloaking,
            exponent=three,
            **options,
        )
    return counts, found, figures


def _in_rows(values: Float64Array, tree: KdTree) -> Float64Array:
    """Values given per point of ``tree`` (in tree order), back in the rows as given."""
    rows = np.empty_like(values)
    rows[tree.order] = values
    return rows


class _SharedWalks:
    """The three sets at one canonical scale, each the points of its own kd-tree (its
    scaled copy reordered in place: ``tree.order`` maps a point back to its row), and the
    walks between them that several figures share, each walked once."""

    def __init__(
        self,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        *,
        threads: int,
        overwrite_input: bool = False,
        cloaking: LinkedCloaking | None = None,
        given: int = 0,
    ) -> None:
        # NaN checks in the order of the separate walks: the reference's pair first.
        sets = ((originals, "originals"), (holdout, "holdout"), (synthetic, "synthetic"))
        o_largest, h_largest, s_largest = (
            largest_magnitude(np.asarray(array), name) for array, name in sets
        )
        largest = max(o_largest, h_largest, s_largest)
        dim = np.shape(originals)[1] if np.ndim(originals) == 2 else 0
        self.exponent = exponent_for(largest, dim)
        # The distances' power of two: the arrays came multiplied by 2^given already.
        self.units = self.exponent + given
        # The pairs' own scales (`nearest_two` of two sets): where one is that of the three,
        # its walk on these arrays gives the very floats of the pair's; else the pair walks
        # on its own, from the arrays as given (which must then be kept).
        self.same_as_dcr = exponent_for(max(o_largest, s_largest), dim) == self.exponent
        self.same_as_reference = exponent_for(max(o_largest, h_largest), dim) == self.exponent
        in_place = overwrite_input and self.same_as_dcr and self.same_as_reference
        # The count's scale is that of the originals and the synthetic records.
        self._largest = max(o_largest, s_largest)
        counted = self._counted_tree(cloaking, synthetic, s_largest, dim)
        checked = same_columns(originals, holdout, synthetic)
        # The count's tree holds the synthetic records at this scale already.
        scaled_o, scaled_h, *scaled = scaled_by(
            checked if counted is None else checked[:2], self.exponent, overwrite_input=in_place
        )
        scaled_s = counted.points if counted is not None else scaled[0]
        # All zeros: the arrays keep their values, and are the caller's.
        owned = in_place or largest != 0.0
        if len(scaled_o) == 0:
            raise ValueError("there are no originals to measure the avatars' distances to")
        if len(scaled_s) == 0:
            raise ValueError("there are no synthetic records to measure the distances to")
        self.threads = threads
        trees = build_side_by_side(
            [scaled_o, scaled_h] if counted else [scaled_o, scaled_h, scaled_s],
            threads=threads,
            overwrite_input=owned,
        )
        self.originals, self.holdout = trees[:2]
        self.synthetic = counted or trees[2]
        self._to_originals: Float64Array | None = None
        self.cloaking = cloaking

    def _counted_tree(
        self, cloaking: LinkedCloaking | None, synthetic: Float64Array, s_largest: float, dim: int
    ) -> KdTree | None:
        """The count's tree of the synthetic records, whose points are the scaled
        synthetic records reordered (the array given is theirs): it must be at the three
        sets' scale, where no walk reads the synthetic records as given."""
        if cloaking is None or cloaking.tree is None:
            return None
        tree = cloaking.tree
        if tree.points.shape != np.shape(synthetic) or tree.weights is not None:
            msg = (
                f"the count's tree holds {tree.points.shape[0]} points for "
                f"{np.shape(synthetic)[0]} synthetic records, or stands for several at once"
            )
            raise ValueError(msg)
        # Scaled by 2^e, the largest coordinate is the points' largest (rounding is monotone).
        at_scale = largest_magnitude(tree.points) == math.ldexp(s_largest, self.exponent)
        if not (at_scale and self._at_count_scale(cloaking, dim) and self.same_as_dcr):
            msg = "the count's tree of the synthetic records is not at the three sets' scale"
            raise ValueError(msg)
        return tree

    def _at_count_scale(self, cloaking: LinkedCloaking, dim: int) -> bool:
        return exponent_for(self._largest, dim, cloaking.tie_tol) == self.exponent

    def in_units(self, found: NearestTwo) -> NearestTwo:
        """``found`` of arrays as given to the walks, in the units before ``given``."""
        return replace(found, exponent=found.exponent + self.units - self.exponent)

    @classmethod
    def of(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        threads: int | None,
        overwrite_input: bool = False,
        cloaking: LinkedCloaking | None = None,
        *,
        given: int = 0,
    ) -> _SharedWalks:
        return cls(
            originals,
            synthetic,
            holdout,
            threads=threads or usable_cores(),
            overwrite_input=overwrite_input,
            cloaking=cloaking,
            given=given,
        )

    def _walk(self, tree: KdTree, of: KdTree, *, two: bool = False) -> Float64Array:
        """The ``d2`` of each point of ``of`` to its nearest point of ``tree`` (with ``two``,
        its two nearest), in ``of``'s tree order: its points walked as they come, neighbours
        already together (no sort by leaf)."""
        walk = squared_nearest_two if two else squared_nearest
        kept = np.arange(len(of.points), dtype=np.int64)
        return walk(tree, of.points, threads=self.threads, rows=kept)

    def synthetic_to_originals(self) -> Float64Array:
        """Each synthetic record's two smallest ``d2`` to the originals, in the synthetic
        tree's order."""
        if self._to_originals is None:
            self._to_originals = self._walk(self.originals, self.synthetic, two=True)
        return self._to_originals

    def _members_scores(self) -> Float64Array:
        """Each original's ``d2`` to its nearest synthetic record, in the originals' tree
        order: walked, or, with `cloaking` at this scale, its own avatar's ``d2`` where no
        rival hides it, and walked from that ``d2`` elsewhere."""
        cloaking = self.cloaking
        if cloaking is None:
            return self._walk(self.synthetic, self.originals)
        rows = self.originals.order  # the original (and its avatar's row) at each point
        if not cloaking.counts.shape == rows.shape == self.synthetic.order.shape:
            msg = (
                f"linked counts need one per original and one avatar each, got "
                f"{len(cloaking.counts)} counts for {len(rows)} originals and "
                f"{len(self.synthetic.order)} synthetic records"
            )
            raise ValueError(msg)
        if not self._at_count_scale(cloaking, self.originals.points.shape[1]):
            return self._walk(self.synthetic, self.originals)  # other floats: walk them all
        points, their_own = self.synthetic.points, self.synthetic.position[rows]
        own = squared_distances(self.originals.points, points, slice(None), their_own)
        hidden = np.flatnonzero(cloaking.counts[rows] > 0)
        return squared_nearest(
            self.synthetic, self.originals.points, threads=self.threads, rows=hidden, seed=own
        )

    def figures(
        self, originals: Float64Array, holdout: Float64Array, confidence: float
    ) -> HoldoutFigures:
        if self.same_as_reference:
            reference = NearestTwo.from_squared(
                self._walk(self.originals, self.holdout, two=True), self.units
            )  # in the holdout's tree order: the medians do not depend on it
        else:
            reference = self.in_units(nearest_two(originals, holdout, threads=self.threads))
        membership = MembershipRisk(
            _in_rows(self._members_scores(), self.originals),
            _in_rows(self._walk(self.synthetic, self.holdout), self.holdout),
            len(self.synthetic.points),
            confidence,
        )
        if self._to_originals is not None:
            to_training = np.ascontiguousarray(self._to_originals[:, 0])
        else:
            to_training = self._walk(self.originals, self.synthetic)
        in_order = np.arange(len(to_training), dtype=np.int64)  # the synthetic tree's own
        members, points = len(self.originals.points), self.synthetic.points
        overfitting = DcrOverfitting.of_nearest(
            to_training, self.holdout, points, members, self.threads, rows=in_order
        )
        return HoldoutFigures(
            membership,
            overfitting,
            float(np.median(reference.nearest)),
            float(np.median(reference.ratio)),
        )


def _holdout_plan(
    originals: pl.DataFrame | pl.LazyFrame,
    synthetic: pl.DataFrame | pl.LazyFrame,
    holdout: pl.DataFrame | pl.LazyFrame,
    options: CountOptions,
    caller: str,
) -> CountPlan:
    if options.get("cluster") is not None or options.get("device", "cpu") != "cpu":
        msg = (
            f"{caller}() runs on this machine's CPU: drop `cluster` and `device` (its exact "
            "nearest-record walks have no cluster or GPU path yet)"
        )
        raise NotImplementedError(msg)
    check_holdout(
        as_lazy(originals, "originals").collect_schema(),
        as_lazy(holdout, "holdout").collect_schema(),
    )
    return plan(originals, synthetic, options, caller=caller)
