"""Whether a link carries anything: own avatars ranked against other records' avatars.

Under an avatar link, a record's own avatar is built from its neighbourhood, so it lies
closer to the record than the avatar of another record does, for most records. Under a
random link (avatars shuffled, or the wrong key) the own avatar is just another avatar:
for each record, its distance and the distance to the avatar of another record are
exchangeable, and the own one is the closer of the two for half of the records.

`link_test` compares every record ``i``'s own avatar with the avatars of
``partner_k[i]`` for `PARTNERS` fixed random derangements (one cycle through every
record each, seeded), and counts the comparisons its own avatar wins. Under a random link
the own avatar's rank among its ``m + 1`` is uniform, so the wins have mean ``n m / 2`` and
variance ``n m (m + 2) / 12``, and their tail is taken from the normal law. The link
is taken as random when the one-sided chance of so many wins exceeds `ALPHA`. Several
partners give the test its power at a few hundred records and large ``k``, where an avatar
is only weakly its record's. Beyond `SAMPLE` records, a fixed random sample of that
many is tested: a random link is then still refused with the same chance, a real one passes
with a margin of hundreds of standard deviations, and the test costs the same at any size.
`link_test_within` runs the same test with each record's partners drawn from its own group
only: what the sorted-link rule asks of a row order within one value of a sorted feature.
Arrays in, a value out: no frames here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from polars_hidden_rate._types import Float64Array, IndexArray
from polars_hidden_rate.engine.scale import exponent_for
from polars_hidden_rate.stats import percent, upper_tail

MIN_RECORDS = 50
"""Below this many records the test is not run: too few to tell a random link apart."""
ALPHA = 1e-3
"""The test's level: a random link passes for linked with about this chance. Real avatar
links sit far beyond it: their own avatar is the closer one for 89 to 100 % of records on the
paper's releases and the benchmark profiles, where 50 records need 74 % (docs/guarantees.md)."""
SEED = 0
PARTNERS = 8
"""Derangements each record is compared through."""
SAMPLE = 20_000
"""At most this many records are tested: a seeded random sample beyond."""
MIN_GROUP = 5
"""`link_test_within` compares the records of groups of at least this many: in smaller ones the
records' wins depend on one another too much for the normal law of independent records (two
records of a pair win or lose together), which then passes a random pairing several times as
often as `ALPHA` says; from 5 a random pairing within groups passes at most as often
(`tests/link/test_sorted.py`)."""


@dataclass(frozen=True)
class LinkTest:
    """The outcome of `link_test`.

    Attributes
    ----------
    n
        Records compared (at most `SAMPLE` of ``population``).
    partners
        Comparisons per record (derangements).
    closer, farther, ties
        Comparisons where the own avatar is strictly closer than, strictly farther than, or
        at the same distance as the partner's avatar.
    p_value
        How likely so many wins are under a random link (1 when every pair ties).
    """

    n: int
    closer: int
    farther: int
    ties: int
    p_value: float
    partners: int = 1
    population: int | None = None

    @property
    def closer_share(self) -> float:
        """Percentage of comparisons the own avatar wins, ties counting half."""
        total = self.closer + self.farther + self.ties
        return percent(self.closer + 0.5 * self.ties, total) if total else math.nan

    @property
    def tested(self) -> bool:
        """Whether there are enough records (`MIN_RECORDS`) to run the test."""
        return self.n >= MIN_RECORDS

    @property
    def linked(self) -> bool:
        """False only when the test ran and a random link cannot be rejected at `ALPHA`."""
        return not self.tested or self.p_value <= ALPHA

    def to_dict(self) -> dict[str, object]:
        return {
            "tested": self.tested,
            "linked": self.linked,
            "n": self.n,
            "population": self.n if self.population is None else self.population,
            "partners": self.partners,
            "own_closer": self.closer,
            "own_farther": self.farther,
            "ties": self.ties,
            "own_closer_percent": self.closer_share,
            "p_value": self.p_value,
            "alpha": ALPHA,
        }


def derangement(n: int, seed: int | tuple[int, int] = SEED) -> IndexArray:
    """A fixed random permutation of ``range(n)`` with no fixed point (one cycle), ``n >= 2``.

    Examples
    --------
    >>> partner = derangement(5)
    >>> sorted(partner.tolist()), bool((partner != np.arange(5)).all())
    ([0, 1, 2, 3, 4], True)
    """
    order = np.random.default_rng(seed).permutation(n)
    partner = np.empty(n, dtype=np.int64)
    partner[order] = np.roll(order, -1)
    return partner


def link_test(originals: npt.ArrayLike, avatars: npt.ArrayLike) -> LinkTest:
    """Compare each record's distance to its own avatar with that to its partner's avatar.

    Row ``i`` of ``avatars`` is the avatar of row ``i`` of ``originals`` (finite float64
    arrays of one shape). The distances are taken at one power-of-two scale, so the outcome
    does not change when every coordinate is multiplied by a power of two.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> x = rng.normal(size=(200, 3))
    >>> link_test(x, x + rng.normal(scale=0.1, size=x.shape)).linked
    True
    >>> link_test(x, rng.permutation(x + rng.normal(scale=0.1, size=x.shape))).linked
    False
    """
    x = np.asarray(originals, dtype=np.float64)
    y = np.asarray(avatars, dtype=np.float64)
    if x.ndim != 2 or x.shape != y.shape:
        msg = f"originals and avatars must be 2-D of one shape, got {x.shape} and {y.shape}"
        raise ValueError(msg)
    population = len(x)
    rows = sampled_rows(population)
    if rows is not None:
        x, y = x[rows], y[rows]
    return _test(x, y, population)


def sampled_rows(population: int) -> IndexArray | None:
    """The records `link_test` compares, in order: None for all of them (up to
    `SAMPLE`), else a fixed random sample of `SAMPLE` (the same for every path
    that sees those records in that order: local, file by file, or on a cluster)."""
    if population <= SAMPLE:
        return None
    return np.sort(np.random.default_rng(SEED).choice(population, SAMPLE, replace=False))


def link_test_of_sample(x: Float64Array, y: Float64Array, population: int) -> LinkTest:
    """`link_test` of ``population`` records, given only the rows of `sampled_rows`
    (all of them when it is None), in order: what a cluster gathers."""
    return _test(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), population)


def _test(x: Float64Array, y: Float64Array, population: int) -> LinkTest:
    """The test on the records compared, ``population`` records in all."""
    n = len(x)
    if n < 2:
        return LinkTest(n, 0, 0, n, 1.0, 1, population)
    m = PARTNERS
    partners = [derangement(n, (SEED, k)) for k in range(m)]
    closer, farther = _wins(x, y, partners)
    ties = n * m - closer - farther
    # The own avatar's rank among its m + 1 is uniform under a random link.
    z = (closer + 0.5 * ties - n * m / 2.0) / math.sqrt(n * m * (m + 2) / 12.0)
    p_value = upper_tail(z)
    return LinkTest(n, closer, farther, ties, p_value, m, population)


def _wins(x: Float64Array, y: Float64Array, partners: list[IndexArray]) -> tuple[int, int]:
    """The comparisons each record's own avatar wins and loses against its partners' avatars,
    distances taken at one power-of-two scale."""
    dim = x.shape[1]
    n = len(x)
    largest = max(max(float(a.max(initial=0.0)), -float(a.min(initial=0.0))) for a in (x, y))
    exponent = exponent_for(largest, dim)
    own: Float64Array = np.zeros(n)
    others: Float64Array = np.zeros((len(partners), n))
    for k in range(dim):
        xk, yk = np.ldexp(x[:, k], exponent), np.ldexp(y[:, k], exponent)
        diff = xk - yk
        own += diff * diff
        for row, partner in zip(others, partners, strict=True):
            diff = xk - yk[partner]
            row += diff * diff
    return int(np.count_nonzero(own < others)), int(np.count_nonzero(own > others))


def link_test_within(
    x: Float64Array, y: Float64Array, groups: npt.ArrayLike, population: int
) -> LinkTest:
    """`link_test` with each record's partners drawn from its own group only (the rows of
    one label of ``groups``): whether the row order still links records where the groups
    do not tell them apart. Records of groups of fewer than `MIN_GROUP` are not compared.

    Each partner is a seeded random cycle through each group, so a record of a small group
    meets the same partner several times; the variance counts those repeats: with ``c_j``
    comparisons against partner ``j``, the own avatar's rank among its distinct partners
    is uniform under a random pairing within groups, so the wins have variance
    ``m^2 / 12 + sum_j c_j^2 / 6`` (``m (m + 2) / 12`` when the ``m`` partners differ).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> x = rng.normal(size=(200, 3))
    >>> y = x + rng.normal(scale=0.1, size=x.shape)
    >>> groups = np.repeat([0, 1], 100)
    >>> link_test_within(x, y, groups, 200).linked
    True
    >>> shuffled = np.concatenate([rng.permutation(y[:100]), rng.permutation(y[100:])])
    >>> link_test_within(x, shuffled, groups, 200).linked
    False
    """
    labels = np.unique(np.asarray(groups), return_inverse=True)[1].astype(np.int64)
    shared = np.bincount(labels)[labels] >= MIN_GROUP
    x = np.asarray(x, dtype=np.float64)[shared]
    y = np.asarray(y, dtype=np.float64)[shared]
    labels = labels[shared]
    n = len(x)
    m = PARTNERS
    if n < 2:
        return LinkTest(n, 0, 0, n, 1.0, m, population)
    partners = [_cycles(labels, (SEED, k)) for k in range(m)]
    closer, farther = _wins(x, y, partners)
    ties = n * m - closer - farther
    # sum_j c_j^2 of each record: its ordered pairs of comparisons against one partner.
    repeats = np.full(n, float(m))
    for a in range(m):
        for b in range(a + 1, m):
            repeats += 2.0 * (partners[a] == partners[b])
    variance = float(np.sum(m * m / 12.0 + repeats / 6.0))
    z = (closer + 0.5 * ties - n * m / 2.0) / math.sqrt(variance)
    return LinkTest(n, closer, farther, ties, upper_tail(z), m, population)


def _cycles(labels: IndexArray, seed: tuple[int, int]) -> IndexArray:
    """Each record's partner: the next record of a seeded random cycle through its group
    (every group holds `MIN_GROUP` records or more)."""
    n = len(labels)
    order = np.lexsort((np.random.default_rng(seed).random(n), labels))
    grouped = labels[order]
    first = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    starts = first[np.cumsum(np.r_[True, grouped[1:] != grouped[:-1]]) - 1]
    following = np.r_[order[1:], order[:1]]
    last = np.r_[grouped[1:] != grouped[:-1], True]
    partner = np.empty(n, dtype=np.int64)
    partner[order] = np.where(last, order[starts], following)
    return partner
