"""One sample's reference answer, token by token, each cell shaded by the token's
certainty spread across the group's rollouts (the R3 weighting's input): the
reasoning-reflective tokens stand out. `curate plot RUN --kind reflective SAMPLE`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from curate.plots._common import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from curate.analysis.reflective import ReflectiveTokens

# Tokens per row of the drawing, and the widest token text shown in a cell.
PER_ROW = 12
CELL_CHARS = 10
# The spread of a probability in [0, 1] is at most 0.5 (half the rollouts at 0, half at 1).
MAX_SPREAD = 0.5


def cell_text(token: str) -> str:
    """A token as a cell shows it: whitespace and control characters escaped, cut to
    CELL_CHARS (drawn with math text off, so "$" is a dollar)."""
    from curate.analysis.reflective import shown_token

    text = shown_token(token)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "\u2026"


def reflective_figure(item: ReflectiveTokens, *, title: str | None = None) -> Figure:
    """The reference of `item` as a grid of token cells shaded by spread."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    n = len(item.tokens)
    rows = max(1, -(-n // PER_ROW))
    fig = new_figure(min(14.0, 1.0 + 1.05 * min(n, PER_ROW)), 1.4 + 0.6 * rows)
    ax = fig.add_subplot()
    norm = Normalize(0.0, MAX_SPREAD)
    cmap = colormaps["Oranges"]
    for j, token in enumerate(item.tokens):
        x, y = j % PER_ROW, -(j // PER_ROW)
        shade = cmap(norm(item.spread[j]))
        ax.add_patch(Rectangle((x, y), 0.96, 0.9, facecolor=shade, edgecolor="#999999"))
        dark = norm(item.spread[j]) > 0.6
        ax.text(
            x + 0.48,
            y + 0.45,
            cell_text(token),
            ha="center",
            va="center",
            fontsize=9,
            family="monospace",
            color="white" if dark else "black",
            parse_math=False,
        )
    ax.set_xlim(-0.1, min(n, PER_ROW) + 0.1)
    ax.set_ylim(-(rows - 1) - 0.1, 1.0)
    ax.set_aspect("auto")
    ax.set_axis_off()
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, orientation="horizontal")
    bar.set_label("certainty spread across rollouts (std of the token's probability)")
    heading = title or f"reflective tokens: {item.sample_id}"
    fig.suptitle(f"{heading} ({item.rollouts} rollouts)", fontsize=11)
    return fig
