"""The walks that a report's holdout figures share: the originals, the synthetic records and
the holdout at one canonical scale, each the points of its own kd-tree, and each walk between
them made once (`SharedWalks`), the count's tree of the avatars lent to them where it is at
that scale (`LinkedCloaking`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from polars_hidden_rate._types import CountArray, Float64Array
from polars_hidden_rate.engine import squared_distances, usable_cores
from polars_hidden_rate.engine.kdtree import KdTree, build_side_by_side
from polars_hidden_rate.engine.nearest import (
    NearestTwo,
    squared_nearest,
    squared_nearest_two,
)
from polars_hidden_rate.engine.scale import (
    exponent_for,
    largest_magnitude,
    same_columns,
    scaled_by,
)


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


def in_rows(values: Float64Array, tree: KdTree) -> Float64Array:
    """Values given per point of ``tree`` (in tree order), back in the rows as given."""
    rows = np.empty_like(values)
    rows[tree.order] = values
    return rows


class SharedWalks:
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
    ) -> SharedWalks:
        return cls(
            originals,
            synthetic,
            holdout,
            threads=threads or usable_cores(),
            overwrite_input=overwrite_input,
            cloaking=cloaking,
            given=given,
        )

    def walk(self, tree: KdTree, of: KdTree, *, two: bool = False) -> Float64Array:
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
            self._to_originals = self.walk(self.originals, self.synthetic, two=True)
        return self._to_originals

    def members_scores(self) -> Float64Array:
        """Each original's ``d2`` to its nearest synthetic record, in the originals' tree
        order: walked, or, with `cloaking` at this scale, its own avatar's ``d2`` where no
        rival hides it, and walked from that ``d2`` elsewhere."""
        cloaking = self.cloaking
        if cloaking is None:
            return self.walk(self.synthetic, self.originals)
        rows = self.originals.order  # the original (and its avatar's row) at each point
        if not cloaking.counts.shape == rows.shape == self.synthetic.order.shape:
            msg = (
                f"linked counts need one per original and one avatar each, got "
                f"{len(cloaking.counts)} counts for {len(rows)} originals and "
                f"{len(self.synthetic.order)} synthetic records"
            )
            raise ValueError(msg)
        if not self._at_count_scale(cloaking, self.originals.points.shape[1]):
            return self.walk(self.synthetic, self.originals)  # other floats: walk them all
        points, their_own = self.synthetic.points, self.synthetic.position[rows]
        own = squared_distances(self.originals.points, points, slice(None), their_own)
        hidden = np.flatnonzero(cloaking.counts[rows] > 0)
        return squared_nearest(
            self.synthetic, self.originals.points, threads=self.threads, rows=hidden, seed=own
        )

    def to_training(self) -> Float64Array:
        """Each synthetic record's ``d2`` to its nearest original, in the synthetic tree's
        order: the first of its two nearest where those were walked already."""
        if self._to_originals is not None:
            return np.ascontiguousarray(self._to_originals[:, 0])
        return self.walk(self.originals, self.synthetic)
