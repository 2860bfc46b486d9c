"""The attribute inference attack's figures, from coordinate arrays and secret values.

An attacker holds the synthetic set and the ``known`` attributes of a target, a real
record, and guesses its ``secret`` attribute: the secret of the synthetic record nearest
to the target on the known attributes (anonymeter's inference evaluator, Giomi et al.,
PoPETs 2023). The guess is right when it equals the secret (a categorical secret) or lies
within ``tolerance * |secret|`` of it (a numeric one). Run against the originals (the
generator's training records, the members) and against a holdout of the same population
that the generator never saw (the control), the excess of the first success over the
second is what the synthetic set gives away about its own training records; what it
gives about any record of the population is the control's.

- Ties are shared: when several synthetic records are nearest, a guess drawn at random
  among them is right with probability ``matching / tied``, and that is the target's
  success, whatever the records' order (anonymeter takes the first). A record is tied
  nearest when its squared distance is at most the nearest's times ``1 + tie_tol``; both
  counts are exact in float64 (`tied_matches`), and the successes sum fractions (correctly
  rounded, `math.fsum`).
- Rates are Wilson's centres at one common number of trials, the smaller set's size, with
  each set's own Wilson error at ``confidence`` (`polars_hidden_rate.stats.compared_rates`:
  anonymeter's ``success_rate`` when the sets have one size; equal shares give equal rates
  whatever the sizes); the risk is ``(members - control) / (1 - control)``, its error
  propagated to first order (anonymeter's ``residual_success``), then both cut to [0, 1]
  (``bind_value``).

Arrays in, values out: no frames here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Unpack

import numpy as np
import polars as pl
from polars.exceptions import ColumnNotFoundError, NoDataError

from polars_hidden_rate._types import BoolArray, CountArray, Float64Array, IndexArray
from polars_hidden_rate.checks import (
    AllComponents,
    check_confidence,
    check_tie_tol,
    check_tolerance,
    invariant,
)
from polars_hidden_rate.engine import usable_cores
from polars_hidden_rate.engine.kdtree import COLLAPSE_SHARE, KdTree
from polars_hidden_rate.engine.nearest import (
    K_NEAREST_WALKS,
    TIED_MATCHES_WALKS,
    TreeSearch,
    distinct_groups,
    query_blocks,
    tied_matches,
)
from polars_hidden_rate.engine.scale import (
    canonical_scale,
)
from polars_hidden_rate.frames import (
    ColumnSpec,
    as_lazy,
    resolve_columns,
)
from polars_hidden_rate.measures.gower import (
    GowerColumns,
    Space,
    check_space,
    inference_shares,
    refuse_projection_options,
)
from polars_hidden_rate.measures.holdout import check_holdout, holdout_plan
from polars_hidden_rate.measures.secrets import (
    SecretKind,
    check_attack,
    secret_kind_of,
    secret_values,
)
from polars_hidden_rate.plan import CountOptions
from polars_hidden_rate.progress import Progress, stage
from polars_hidden_rate.projection.coordinates import auto_categorical
from polars_hidden_rate.stats import compared_rates, residual_risk

"""How a secret is guessed: ``"categorical"`` (right when equal), ``"numeric"`` (right within
the tolerance), or ``"auto"``: numeric for number columns, categorical otherwise."""

DEFAULT_TOLERANCE = 0.05
"""A numeric guess is right within this share of the secret's magnitude (anonymeter's)."""


@dataclass(frozen=True)
class SuccessRate:
    """An attack's success rate on ``records`` targets, as anonymeter estimates it.

    Attributes
    ----------
    successes
        The expected number of right guesses (ties shared), a sum of fractions.
    records
        The number of targets.
    rate, error
        Wilson's centre at the attack's and control's common number of trials ``t``, the
        smaller set's size, and Wilson's half-width at ``records`` (``n``), at
        ``confidence`` (`polars_hidden_rate.stats.compared_rates`):
        ``(t s / n + z^2/2) / (t + z^2)`` and ``z / (n + z^2) * sqrt(s (n - s) / n + z^2 / 4)``;
        when both sets have ``n`` records, anonymeter's ``success_rate``.
    """

    successes: float
    records: int
    rate: float
    error: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "successes": self.successes,
            "records": self.records,
            "share": self.successes / self.records,
            "rate": self.rate,
            "error": self.error,
        }


def attack_against_control(
    members_success: Float64Array,
    control_success: Float64Array,
    confidence: float,
    all_right: str,
) -> tuple[SuccessRate, SuccessRate, float, tuple[float, float]]:
    """An attack's and its control's rates from each target's chance of success
    (`polars_hidden_rate.stats.compared_rates`), and the residual risk with its
    interval (anonymeter's); ``all_right`` words a control that succeeded on every target,
    where no residual risk can be measured."""
    counts = [(math.fsum(share), len(share)) for share in (members_success, control_success)]
    rates = compared_rates(counts[0], counts[1], confidence)
    attack, control = (SuccessRate(s, n, *rate) for (s, n), rate in zip(counts, rates, strict=True))
    if control.rate >= 1.0:  # only where z rounds to 0: a confidence near 0
        msg = (
            f"the control {all_right} at confidence={confidence!r}: no residual risk can be "
            "measured; use a usual confidence level such as 0.95"
        )
        raise ValueError(msg)
    risk, interval = residual_risk((attack.rate, attack.error), (control.rate, control.error))
    return attack, control, risk, interval


@dataclass(frozen=True)
class InferenceRisk:
    """The attribute inference attack on a synthetic set, with the holdout as its control.

    Attributes
    ----------
    risk
        ``(members.rate - control.rate) / (1 - control.rate)``, cut to [0, 1]: 0 when the
        synthetic set tells no more about its training records than about any record of the
        population, 1 when it gives every training record's secret away.
    risk_interval
        The risk plus and minus its propagated error, cut to [0, 1].
    members, control
        The attack's success on the originals and on the holdout (`SuccessRate`).
    members_success, control_success
        Each target's chance of a right guess (``matching / tied``), in its set's order.
    synthetic
        The size of the synthetic set.
    secret_kind
        ``"categorical"`` or ``"numeric"``: how the guesses were judged.
    tolerance
        The share of a numeric secret's magnitude a right guess may miss it by (0 when
        categorical).
    confidence
        The level of the rates' errors and of ``risk_interval``.
    known, secret
        The attributes the attacker knows and the one guessed (empty when computed from
        arrays).
    ncp
        The components of the known attributes' projection the distances used: ``"all"``
        (the default of [`inference_risk`][polars_hidden_rate.inference_risk]) or a number.
    categorical
        The known attributes projected as categories (empty when computed from arrays).
    tie_tol
        The relative tolerance within which a record ties with the nearest.
    space
        ``"projected"`` (the package's projection) or ``"gower"`` (anonymeter's distance).
    """

    risk: float
    risk_interval: tuple[float, float]
    members: SuccessRate
    control: SuccessRate
    members_success: Float64Array
    control_success: Float64Array
    synthetic: int
    secret_kind: Literal["categorical", "numeric"]
    tolerance: float
    confidence: float = 0.95
    known: tuple[str, ...] = ()
    secret: str = ""
    ncp: int | str = "all"
    categorical: tuple[str, ...] = ()
    tie_tol: float = 1e-9
    space: Space = "projected"

    @classmethod
    def of_arrays(
        cls,
        originals: Float64Array,
        synthetic: Float64Array,
        holdout: Float64Array,
        secrets: tuple[Float64Array, Float64Array, Float64Array],
        *,
        secret_kind: Literal["categorical", "numeric"],
        tolerance: float = DEFAULT_TOLERANCE,
        tie_tol: float = 1e-9,
        threads: int | None = None,
        confidence: float = 0.95,
        progress: bool | None = None,
    ) -> InferenceRisk:
        """Attack the originals and the holdout from the synthetic set: one scale for the
        three coordinate arrays (the known attributes' space), one kd-tree of the synthetic
        records. ``secrets`` are the three sets' secret values as float64 (categories as
        codes shared by the three, a missing value as NaN). The targets' walks are the units
        of the stage ``inference attack, nearest records`` (``progress`` as
        `polars_hidden_rate.progress.stage` takes it)."""
        check_confidence(confidence)
        tolerance = 0.0 if secret_kind == "categorical" else check_tolerance(tolerance)
        (points, members, others), _ = canonical_scale(
            synthetic, originals, holdout, names=("synthetic", "originals", "holdout")
        )
        for name, values, rows in zip(
            ("originals", "synthetic", "holdout"),
            secrets,
            (originals, synthetic, holdout),
            strict=True,
        ):
            invariant(values.shape == (len(rows),), f"one secret per record of {name}")
        for name, rows in (("synthetic", points), ("originals", members), ("holdout", others)):
            if len(rows) == 0:
                msg = f"there are no {name} records to attack with or to attack"
                raise ValueError(msg)
        threads = threads or usable_cores()
        first, copies = _guess_groups(points, secrets[1])
        targets = ((members, secrets[0]), (others, secrets[2]))
        if copies is not None:
            # Where records tie by the thousand (few distinct known values), each walk would
            # pass every tied record: each group of copies is found once instead.
            tree = KdTree.build(points[first], threads=threads)
            walks = K_NEAREST_WALKS * (len(members) + len(others))
            with stage("inference attack, nearest records", walks, enabled=progress) as bar:
                members_success, control_success = (
                    _grouped_success(
                        TreeSearch(tree, queries, threads, copies=copies),
                        secrets[1][first],
                        values,
                        tolerance,
                        tie_tol,
                        bar,
                    )
                    for queries, values in targets
                )
        else:
            tree = KdTree.build(points, threads=threads)
            walks = TIED_MATCHES_WALKS * (len(members) + len(others))
            with stage("inference attack, nearest records", walks, enabled=progress) as bar:
                members_success, control_success = (
                    _success(
                        *tied_matches(
                            tree,
                            secrets[1],
                            queries,
                            values,
                            tolerance,
                            tie_tol=tie_tol,
                            threads=threads,
                            bar=bar,
                        )
                    )
                    for queries, values in targets
                )
        return cls.of_shares(
            members_success,
            control_success,
            len(points),
            secret_kind=secret_kind,
            tolerance=tolerance,
            tie_tol=tie_tol,
            confidence=confidence,
        )

    @classmethod
    def of_shares(
        cls,
        members_success: Float64Array,
        control_success: Float64Array,
        synthetic: int,
        *,
        secret_kind: Literal["categorical", "numeric"],
        tolerance: float,
        tie_tol: float,
        confidence: float,
    ) -> InferenceRisk:
        """From each target's chance of a right guess, in the originals and the holdout:
        Wilson's rates, the residual risk and its interval."""
        attack, control, risk, interval = attack_against_control(
            members_success, control_success, confidence, "guessed every secret"
        )
        return cls(
            risk,
            interval,
            attack,
            control,
            members_success,
            control_success,
            synthetic,
            secret_kind,
            tolerance,
            confidence,
            tie_tol=tie_tol,
        )

    def to_dict(self) -> dict[str, object]:
        """The figures as JSON values."""
        low, high = self.risk_interval
        return {
            "risk": self.risk,
            "risk_interval": [low, high],
            "confidence": self.confidence,
            "members": self.members.to_dict(),
            "control": self.control.to_dict(),
            "synthetic": self.synthetic,
            "known": list(self.known),
            "secret": self.secret,
            "ncp": self.ncp,
            "categorical": list(self.categorical),
            "tie_tol": self.tie_tol,
            "space": self.space,
            "secret_kind": self.secret_kind,
            "tolerance": self.tolerance,
        }


def _success(tied: np.ndarray, matching: np.ndarray) -> Float64Array:
    share: Float64Array = matching / tied
    return share


def _guess_groups(
    points: Float64Array, guesses: Float64Array
) -> tuple[IndexArray, CountArray | None]:
    """The synthetic records identical in their coordinates and their secret, as groups:
    each group's first record and its copies, or no copies where fewer than one record in
    `COLLAPSE_SHARE` repeats another (the plain walk is then the cheaper)."""
    _, on_point, _ = distinct_groups(points)
    as_bits = np.asarray(guesses, dtype=np.float64).view(np.int64)
    _, by_guess = np.unique(as_bits, return_inverse=True)
    _, first, copies = np.unique(
        on_point * (int(by_guess.max(initial=0)) + 1) + by_guess.reshape(-1),
        return_index=True,
        return_counts=True,
    )
    if (len(points) - len(first)) * COLLAPSE_SHARE < len(points):
        return first.astype(np.int64), None
    return first.astype(np.int64), copies.astype(np.int64)


def _grouped_success(
    search: TreeSearch,
    guesses: Float64Array,
    secrets: Float64Array,
    tolerance: float,
    tie_tol: float,
    bar: Progress | None,
) -> Float64Array:
    """`tied_matches`' share ``matching / tied`` for each of ``search``'s queries, from its
    nearest groups of copies (`k_nearest` with ``k = 1``: the same nearest ``d2``, the same
    threshold, the same points within it); ``guesses`` are the groups' secrets."""
    shares = np.empty(len(search.queries), dtype=np.float64)

    def share(rows: slice) -> int:
        nearest = search.k_nearest(rows, 1, tie_tol=tie_tol, bar=bar)
        guess, secret = guesses[nearest.rows], secrets[nearest.queries + rows.start]
        shares[rows] = _success(nearest.counts(), nearest.counts(_match(guess, secret, tolerance)))
        return len(nearest.rows)

    query_blocks(len(search.queries), share)
    return shares


def _match(guess: Float64Array, secret: Float64Array, tolerance: float) -> BoolArray:
    """`values_match` elementwise, the same float64 steps: equal (NaN matches NaN only), or
    within ``tolerance * |secret|`` of a finite ``secret``."""
    with np.errstate(invalid="ignore"):
        near = np.isfinite(secret) & (np.abs(guess - secret) <= tolerance * np.abs(secret))
    found: BoolArray = (guess == secret) | (np.isnan(guess) & np.isnan(secret)) | near
    return found


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
    space: Space = "projected",
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
        ``"auto"`` (default): numeric for a number column, categorical otherwise, and
        categorical for a secret declared so: named in ``categorical``, or, with
        ``categorical="auto"``, a number column with at most 10 distinct values in the
        originals (the rule that projects the known attributes). A text secret whose values
        are all numbers (``'1.5'``, ``'3'``) is refused under ``"auto"``: cast it to a number,
        or pass ``"categorical"`` to compare the texts.
    tolerance
        The share of a numeric secret's magnitude a right guess may miss it by (anonymeter's
        0.05); unused for a categorical secret.
    confidence
        The level of the rates' errors and of the risk's interval.
    space
        ``"projected"`` (default): the projection above. ``"gower"``: anonymeter's own
        distance and rule of a right guess (`polars_hidden_rate.measures.gower`): numbers
        divided by their range over the synthetic set and the targets, categories 0 or 1,
        summed; a numeric guess ``g`` right when ``|g - s| / (g + 1e-12) <= tolerance``. A
        record ties with the nearest when its distance is at most the nearest's times ``1 +
        tie_tol``, and ties are shared; where none ties, the risk is anonymeter's run on
        every record (``n_attacks`` the sets' sizes). ``categorical``, ``impute``, ``ncp``
        are then refused.
    **options
        ``categorical``, ``impute`` and ``ncp`` (default ``"all"``) choose the known
        attributes' space, as for [`local_cloaking`][polars_hidden_rate.local_cloaking]
        (``categorical`` may also name the secret, which is no attribute of that space: it
        is then judged by equality);
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
    return attack.run(originals, synthetic, holdout, confidence=confidence, space=space, **options)


@dataclass(frozen=True)
class InferenceAttack:
    """What [`inference_risk`][polars_hidden_rate.inference_risk] is asked, checked: the
    attribute inference attack of a report is this, run on the report's sets."""

    known: tuple[str, ...]
    secret: str
    secret_kind: SecretKind = "auto"
    tolerance: float = DEFAULT_TOLERANCE
    # Where a report runs it (`run`'s ``space``).
    space: Space = "projected"

    @classmethod
    def of(
        cls,
        known: Sequence[str],
        secret: str,
        secret_kind: SecretKind = "auto",
        tolerance: float = DEFAULT_TOLERANCE,
        space: Space = "projected",
    ) -> InferenceAttack:
        """Check the settings, ``known`` resolved to names (`resolve_columns`) beforehand."""
        names = list(known)
        check_attack(names, secret)
        if secret_kind not in ("auto", "categorical", "numeric"):
            msg = f"`secret_kind` must be 'auto', 'categorical' or 'numeric', got {secret_kind!r}"
            raise ValueError(msg)
        check_space(space, "inference_risk")
        return cls(tuple(names), secret, secret_kind, check_tolerance(tolerance), space)

    def check(
        self, schemas: dict[str, pl.Schema], *, declared: bool = False
    ) -> Literal["categorical", "numeric"]:
        """Check the columns in the three sets' schemas (originals, synthetic, holdout) and
        return how the secret is judged (``declared``: the secret was declared categorical,
        `secret_kind_of`)."""
        for role, schema in schemas.items():
            resolve_columns(list(self.known), schema, role, "known")
            if self.secret not in schema:
                msg = f"secret {self.secret!r} not found in {role}; available: {schema.names()}"
                raise ColumnNotFoundError(msg)
        return secret_kind_of(
            self.secret,
            schemas["originals"][self.secret],
            schemas["synthetic"][self.secret],
            self.secret_kind,
            declared=declared,
        )

    def run(
        self,
        originals: pl.DataFrame | pl.LazyFrame,
        synthetic: pl.DataFrame | pl.LazyFrame,
        holdout: pl.DataFrame | pl.LazyFrame,
        *,
        confidence: float = 0.95,
        space: Space = "projected",
        **options: Unpack[CountOptions],
    ) -> InferenceRisk:
        """Check the sets (the holdout's schema first), read each once, and attack."""
        if check_space(space, "inference_risk") == "gower":
            refuse_projection_options(options, "inference_risk")
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
        self.check(schemas)
        categorical, named = _secret_out_of(options.get("categorical"), self.secret)
        asked = options.get("ncp")
        ncp: int | AllComponents = "all" if asked is None else asked  # every one unless asked
        space_options: CountOptions = {**options, "features": names, "ncp": ncp}
        if named:
            space_options["categorical"] = categorical
        sets = (frames["originals"], frames["synthetic"], frames["holdout"])
        holdout_plan(*sets, space_options, "inference_risk")
        # Read each set once, the secret with the known attributes: a lazy plan that gives its
        # rows in another order on a second read cannot pair a record with another's secret.
        read = {
            role: frame.select([*names, self.secret]).collect() for role, frame in frames.items()
        }
        for role, frame in read.items():
            if frame.height == 0:
                raise NoDataError(f"{role}: no record, so there is nothing to attack")
        declared = named or (
            categorical == "auto"
            and bool(auto_categorical(read["originals"].lazy(), [self.secret]))
        )
        kind = self.check(schemas, declared=declared)
        chosen = self.secret_kind != "auto" or named
        secrets = secret_values(read, self.secret, kind, chosen=chosen)
        if space == "gower":
            return self._in_gower(
                read, schemas, secrets, kind, tie_tol, confidence, options.get("progress")
            )
        request = holdout_plan(
            read["originals"], read["synthetic"], read["holdout"], space_options, "inference_risk"
        ).fitted()
        fitted = request.projection.fitted if request.projection is not None else None
        coordinates = (
            request.coordinates_of(request.originals, "originals"),
            request.coordinates_of(request.avatars, "synthetic"),
            request.coordinates_of(read["holdout"].lazy(), "holdout"),
        )
        with stage("inference attack", enabled=options.get("progress")):
            found = InferenceRisk.of_arrays(
                *coordinates,
                secrets,
                secret_kind=kind,
                tolerance=self.tolerance,
                tie_tol=tie_tol,
                threads=request.threads,
                confidence=confidence,
                progress=options.get("progress"),
            )
        categorical = () if fitted is None else tuple(f.name for f in fitted.scaling.categorical)
        return replace(
            found, known=self.known, secret=self.secret, ncp=ncp, categorical=categorical
        )

    def _in_gower(
        self,
        read: dict[str, pl.DataFrame],
        schemas: dict[str, pl.Schema],
        secrets: tuple[Float64Array, Float64Array, Float64Array],
        kind: Literal["categorical", "numeric"],
        tie_tol: float,
        confidence: float,
        progress: bool | None = None,
    ) -> InferenceRisk:
        """The attack in anonymeter's space (`polars_hidden_rate.measures.gower`), its
        right guesses judged by anonymeter's rule."""
        columns = GowerColumns.of(self.known, schemas)
        arrays = columns.arrays({role: frame.select(columns.names) for role, frame in read.items()})
        tolerance = 0.0 if kind == "categorical" else self.tolerance
        targets = read["originals"].height + read["holdout"].height
        with stage(
            "inference attack, nearest records", K_NEAREST_WALKS * targets, enabled=progress
        ) as bar:
            members, control = (
                inference_shares(
                    columns,
                    arrays["synthetic"],
                    arrays[role],
                    secrets[1],
                    secrets[k],
                    kind=kind,
                    tolerance=tolerance,
                    tie_tol=tie_tol,
                    bar=bar,
                )
                for role, k in (("originals", 0), ("holdout", 2))
            )
        found = InferenceRisk.of_shares(
            members,
            control,
            read["synthetic"].height,
            secret_kind=kind,
            tolerance=tolerance,
            tie_tol=tie_tol,
            confidence=confidence,
        )
        return replace(
            found,
            known=self.known,
            secret=self.secret,
            ncp="all",
            categorical=columns.categorical,
            space="gower",
        )


def _secret_out_of(categorical: ColumnSpec | None, secret: str) -> tuple[ColumnSpec | None, bool]:
    """The ``categorical`` option less the secret, and whether it named the secret: the
    secret is no feature of the known attributes' space, but naming it says how to judge it.
    A selector picks among the known attributes only."""
    if isinstance(categorical, str):
        return (None, True) if categorical == secret else (categorical, False)
    if isinstance(categorical, Sequence) and secret in categorical:
        rest = [name for name in categorical if name != secret]
        return (rest or None), True
    return categorical, False
