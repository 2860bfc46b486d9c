"""Draw the picture of the metric on docs/metric.md: one original, its ball, the avatars in it.

    python tools/metric_figure.py [PATH]    # default docs/images/local_cloaking_ball.svg

The picture is committed (the site serves it; nothing is fetched from another host). It shows
an original x_i, its own avatar y_a(i), the ball of radius d(x_i, y_a(i)) around x_i, the rival
avatars inside it (counted), one rival exactly on its boundary (a tie: counted too) and the
avatars outside (not counted): here c_i = 4, and x_i is hidden. Matplotlib only (the ``plot``
extra); the same file on every run (no date, fixed ids).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Circle

# No metadata (no date, no namespaces of other hosts): the same bytes on every run.
SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
DEFAULT = Path(__file__).resolve().parent.parent / "docs" / "images" / "local_cloaking_ball.svg"

RADIUS = 1.0
ANGLE = 30  # of the own avatar, in degrees
OWN = (math.cos(math.radians(ANGLE)), math.sin(math.radians(ANGLE)))
# On the circle exactly: as far as the own avatar, a tie.
TIE = (math.cos(math.radians(200)), math.sin(math.radians(200)))
INSIDE = [(-0.35, 0.5), (0.3, -0.55), (-0.55, -0.15)]
OUTSIDE = [(1.6, 0.9), (1.35, -1.05), (-0.4, -1.6), (0.45, 1.5), (-1.75, -0.55), (-1.2, 1.45)]

ORIGINAL_COLOUR = "#222222"
OWN_COLOUR = "#d62728"
COUNTED_COLOUR = "#1f77b4"
OUTSIDE_COLOUR = "#aaaaaa"


def draw(path: Path) -> Path:
    plt.rcParams.update(
        {"svg.fonttype": "none", "svg.hashsalt": "polars-hidden-rate", "font.size": 10}
    )
    figure, axes = plt.subplots(figsize=(6.4, 5.0))
    axes.add_patch(
        Circle((0, 0), RADIUS, facecolor="#1f77b4", alpha=0.07, edgecolor="none", zorder=0)
    )
    axes.add_patch(Circle((0, 0), RADIUS, fill=False, ls="--", lw=1.2, color="#555555"))
    axes.plot([0, OWN[0]], [0, OWN[1]], color=OWN_COLOUR, lw=1.2, zorder=1)
    axes.annotate(
        "$d(x_i, y_{a(i)})$",
        (OWN[0] * 0.25, OWN[1] * 0.25),
        xytext=(0, 4),
        size=8.5,
        textcoords="offset points",
        color=OWN_COLOUR,
        rotation=ANGLE,
        rotation_mode="anchor",
    )
    for points, colour in ((OUTSIDE, OUTSIDE_COLOUR), (INSIDE, COUNTED_COLOUR)):
        xs, ys = zip(*points, strict=True)
        axes.scatter(xs, ys, s=42, color=colour, zorder=2)
    axes.scatter(*TIE, s=60, facecolor="white", edgecolor=COUNTED_COLOUR, lw=2, zorder=3)
    axes.scatter(*OWN, s=70, color=OWN_COLOUR, zorder=3)
    axes.scatter(0, 0, s=110, marker="X", color=ORIGINAL_COLOUR, zorder=3)
    axes.annotate("original $x_i$", (0, 0), xytext=(6, -15), textcoords="offset points")
    axes.annotate(
        "its own avatar $y_{a(i)}$",
        OWN,
        xytext=(10, -4),
        textcoords="offset points",
        color=OWN_COLOUR,
    )
    axes.annotate(
        "on the boundary: a tie,\ncounted (as close as its own)",
        TIE,
        xytext=(-150, -48),
        textcoords="offset points",
        color=COUNTED_COLOUR,
        arrowprops={"arrowstyle": "-", "color": COUNTED_COLOUR, "lw": 0.8},
    )
    axes.annotate(
        "3 rivals inside the ball\n(closer than its own): counted",
        INSIDE[0],
        xytext=(-2.7, 0.95),
        textcoords="data",
        color=COUNTED_COLOUR,
        arrowprops={"arrowstyle": "-", "color": COUNTED_COLOUR, "lw": 0.8},
    )
    axes.annotate(
        "farther than its own:\nnot counted",
        OUTSIDE[2],
        xytext=(12, -6),
        textcoords="offset points",
        color="#777777",
    )
    axes.set_title("$c_i$ = 3 inside + 1 on the boundary = 4: $x_i$ is hidden", fontsize=10, pad=10)
    axes.set_xlim(-2.6, 2.6)
    axes.set_ylim(-1.9, 1.9)
    axes.set_aspect("equal")
    axes.axis("off")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(
        path, bbox_inches="tight", metadata=SVG_METADATA if path.suffix == ".svg" else None
    )
    plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT)
    args = parser.parse_args(argv)
    print(f"wrote {draw(args.path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
