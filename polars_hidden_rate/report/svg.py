"""The report's histograms as inline SVG: round bins and ticks, a bar of its own for 0 and
for the values past the range, the target as a dashed line; every text escaped."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from polars_hidden_rate.measures.digits import exact

# The histograms' geometry, in SVG user units.
_WIDTH, _HEIGHT = 480, 290
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 28, 48, 52
_BINS = 30
_TICKS = 6  # x ticks at most, about
_GAP = 0.6  # between a bar of its own and the ranged bars, in bar widths
_SUBTITLE_CHARS = 76
_TICK_ROOM = 30  # no tick closer than this to the label of a bar of its own


@dataclass(frozen=True)
class _Bar:
    """One bar: the values in ``[low, high]`` (a bar of its own: 0, or past the range)."""

    low: float
    high: float
    count: int
    left: float  # where it starts, in bar widths from the plot's left edge
    label: str | None = None  # below the axis, for a bar of its own


def svg_histogram(
    values: npt.ArrayLike,
    title: str,
    x_label: str,
    y_label: str,
    *,
    target: float | None = None,
    limits: tuple[float, float] | None = None,
    discrete: bool = False,
    zero_bar: bool = False,
    space: str = "",
) -> str:
    """A histogram as an inline ``<figure>`` holding one ``<svg>``, with title and axis labels.

    The ranged bars run over ``limits`` (default from 0, or the smallest value when
    negative, to the 99th percentile or the target), in bins of 1, 2 or 5 times a power of
    ten (whole units when ``discrete``); the values past them have a bar of their own,
    labelled ``> edge`` and with its count. With ``zero_bar``, so do the values equal to 0
    (left of the range). The ticks are round numbers and every count has thousands
    separators; a dashed line marks ``target``; ``space`` is the subtitle. Every text is
    escaped, and each bar carries ``data-low``, ``data-high`` and ``data-count``.
    """
    data = np.asarray(values, dtype=np.float64)
    zeros = int(np.count_nonzero(data == 0.0)) if zero_bar else 0
    ranged = data[data != 0.0] if zero_bar else data
    if limits is None:
        low = min(0.0, float(data.min(initial=0.0)))
        high = float(np.quantile(data, 0.99)) if data.size else low
        if high <= low:
            high = float(data.max(initial=low))
        if target is not None:
            high = max(high, target)  # the target line stays in view
    else:
        low, high = limits
    if high <= low:  # every value at the lowest: one unit, to draw something
        high = low + 1.0
    if discrete:
        first = 1.0 if zero_bar else float(math.floor(low))
        values_wanted = math.ceil(high) - first + 1
        width = max(1.0, _round_step(values_wanted / _BINS)[0])
        bins = max(1, math.ceil(values_wanted / width))
        edges = first - 0.5 + width * np.arange(bins + 1, dtype=np.float64)
        shown = (first, float(edges[-1] - 0.5))  # the first and last values the bars hold
    else:
        step, _ = _round_step((high - low) / _BINS)
        k_low, k_high = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        edges = step * np.arange(k_low, max(k_high, k_low + 1) + 1, dtype=np.float64)
        shown = (float(edges[0]), float(edges[-1]))
    start, stop = float(edges[0]), float(edges[-1])
    beyond = int(np.count_nonzero(ranged > stop))
    heights, _ = np.histogram(np.clip(ranged[ranged <= stop], start, None), bins=edges)

    spacing = (shown[1] - shown[0]) / _TICKS
    tick_step, exponent = _round_step(max(spacing, 1.0) if discrete else spacing)
    decimals = max(0, -exponent)
    bars = []
    left = 0.0
    if zero_bar:
        bars.append(_Bar(0.0, 0.0, zeros, left, "0"))
        left += 1.0 + _GAP
    region = left
    bars.extend(
        _Bar(float(edges[b]), float(edges[b + 1]), int(h), region + b)
        for b, h in enumerate(heights.tolist())
    )
    if beyond:
        last = _tick_text(shown[1], 0 if discrete else decimals)
        bars.append(_Bar(stop, math.inf, beyond, region + len(heights) + _GAP, f"> {last}"))
    units = bars[-1].left + 1.0
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    unit = plot_w / units
    tallest = max([bar.count for bar in bars] + [1])
    y_step = max(1, int(_round_step(tallest / 4)[0]))
    y_top = math.ceil(tallest / y_step) * y_step

    def x_at(value: float) -> float:
        """Where a value of the ranged bars lies."""
        return _LEFT + unit * (region + len(heights) * (value - start) / (stop - start))

    def y_at(count: float) -> float:
        return _TOP + plot_h * (1.0 - count / y_top)

    rects = "".join(
        f'<rect class="bar" x="{_LEFT + unit * bar.left:.1f}" y="{y_at(bar.count):.1f}" '
        f'width="{max(unit - 1, 0.5):.1f}" height="{_TOP + plot_h - y_at(bar.count):.1f}" '
        f'fill="{"#4c72b0" if bar.label is None else "#8172b3"}" data-low="{bar.low!r}" '
        f'data-high="{bar.high!r}" data-count="{bar.count}"/>'
        for bar in bars
    )
    own = "".join(
        f'<text x="{_LEFT + unit * (bar.left + 0.5):.1f}" y="{y_at(bar.count) - 4:.1f}" '
        f'text-anchor="middle" font-size="10">{bar.count:,}</text>'
        f'<text x="{_LEFT + unit * (bar.left + 0.5):.1f}" y="{_TOP + plot_h + 16}" '
        f'text-anchor="middle" font-size="11">{html.escape(bar.label)}</text>'
        for bar in bars
        if bar.label is not None
    )
    first_tick = math.ceil(shown[0] / tick_step - 1e-9)
    last_tick = math.floor(shown[1] / tick_step + 1e-9)
    tick_values = [k * tick_step + 0.0 for k in range(first_tick, last_tick + 1)]
    labelled = [_LEFT + unit * (bar.left + 0.5) for bar in bars if bar.label is not None]
    ticks = "".join(
        f'<text x="{x_at(v):.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle" '
        f'font-size="11">{_tick_text(v, decimals)}</text>'
        for v in tick_values
        # 0 and the rest have their bars, labelled there
        if all(abs(x_at(v) - x) > _TICK_ROOM for x in labelled)
    ) + "".join(
        f'<text x="{_LEFT - 6}" y="{y_at(c) + 4:.1f}" text-anchor="end" font-size="11">{c:,}</text>'
        for c in range(0, y_top + 1, y_step)
    )
    marker = ""
    at = None
    if target is not None and start <= target <= stop:
        at = x_at(target)
    elif target is not None and zero_bar and 0.0 <= target < start:
        at = _LEFT + unit * (region - _GAP / 2)  # between the bar of 0 and the others
    if target is not None and at is not None:
        right = at > _LEFT + 0.75 * plot_w  # the label left of the line, to stay in view
        marker = (
            f'<line class="target" x1="{at:.1f}" y1="{_TOP}" x2="{at:.1f}" y2="{_TOP + plot_h}" '
            f'stroke="#cf222e" stroke-dasharray="4 3"/><text x="{at - 4 if right else at + 4:.1f}" '
            f'y="{_TOP + 12}" text-anchor="{"end" if right else "start"}" font-size="11" '
            f'fill="#cf222e">target {html.escape(exact(target))}</text>'
        )
    name = f"{title} — {space}" if space else title
    title_text, name_text, x_text, y_text = (
        html.escape(t) for t in (title, name, x_label, y_label)
    )
    subtitle = ""
    if space:
        shortened = space if len(space) <= _SUBTITLE_CHARS else space[: _SUBTITLE_CHARS - 1] + "…"
        subtitle = (
            f'<text x="{_WIDTH / 2}" y="34" text-anchor="middle" font-size="11">'
            f"{html.escape(shortened)}</text>"
        )
    axes = (
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" y2="{_TOP + plot_h}" '
        f'stroke="#222"/><line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" '
        'stroke="#222"/>'
    )
    return (
        f'<figure><svg width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img"><title>{name_text}</title>'
        f'<text x="{_WIDTH / 2}" y="18" text-anchor="middle" font-size="14" '
        f'font-weight="bold">{title_text}</text>{subtitle}{rects}{axes}{ticks}{own}{marker}'
        f'<text x="{_LEFT + plot_w / 2}" y="{_HEIGHT - 10}" text-anchor="middle" '
        f'font-size="12">{x_text}</text>'
        f'<text x="14" y="{_TOP + plot_h / 2}" text-anchor="middle" font-size="12" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2})">{y_text}</text></svg></figure>'
    )


def _round_step(at_least: float) -> tuple[float, int]:
    """The smallest of 1, 2 or 5 times ``10^e`` at or above ``at_least`` (> 0), and ``e``."""
    exponent = math.floor(math.log10(at_least))
    for mantissa in (1, 2, 5):
        step = mantissa * 10.0**exponent
        if step >= at_least * (1 - 1e-12):
            return step, exponent
    return 10.0 ** (exponent + 1), exponent + 1


def _tick_text(value: float, decimals: int) -> str:
    """A round value with thousands separators: ``10,000``, ``0.25``."""
    return f"{value:,.{decimals}f}"
