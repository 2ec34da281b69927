"""Sizing a chart from its labels, so an exported picture never cuts a name.

Plotly's ``automargin`` grows a margin to fit its tick labels only inside the figure's fixed
size: a hundred-character run name at the default 700 x 500 pixels leaves no room for the
plot, and the label runs off the picture. So the builders (``analysis.charts``) wrap long
labels onto a few lines (shortening only what is longer still, the full text in the hover)
and choose the figure's margins, width and height from the longest label and the number of
rows and columns. ``automargin`` stays on as the last resort.

Text widths are estimated from the character count; the estimate is deliberately generous
(wide sans-serif capitals); tests/analysis/test_chart_fit.py checks the margins against it. A
check of the rendered PNG's text against the picture's edges is still to be written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape, unescape

import plotly.graph_objects as go

#: Plotly's default font size, and a generous width per character and height per line.
FONT_PX = 12
CHAR_PX = 0.66 * FONT_PX
LINE_PX = 1.35 * FONT_PX
#: A label wraps after this many characters a line, onto at most ``MAX_LINES`` lines.
WRAP_CHARS = 34
MAX_LINES = 3
#: The characters a label breaks after by preference (run names are words joined by these).
_BREAK_AFTER = re.compile(r"[^\s\-_/.:,=+]*[\s\-_/.:,=+]?")
ELLIPSIS = "…"
#: Room for the title (and the page's one-line note under it) above the plot.
TOP_PX = 100
#: The plot area is never smaller than this, whatever the labels take.
MIN_PLOT_W = 460
MIN_PLOT_H = 280
#: Width a horizontal row of x labels may take before they are turned upright.
MAX_FLAT_W = 1100


def _lines(text: str, width: int) -> list[str]:
    """``text`` broken into lines of at most ``width`` characters, at separators when it can."""
    lines: list[str] = []
    current = ""
    for piece in (p for p in _BREAK_AFTER.findall(text) if p):
        while len(piece) > width:  # a word longer than a line is cut where the line ends
            room = width - len(current)
            lines.append(current + piece[:room])
            current, piece = "", piece[room:]
        if len(current) + len(piece) > width:
            lines.append(current)
            current = ""
        current += piece
    if current or not lines:
        lines.append(current)
    return [line.strip() or line for line in lines]


def _shortened(text: str, budget: int) -> str:
    """At most ``budget`` characters: the start, an ellipsis and the end, since what tells
    runs apart (a temperature, a date, a seed) is usually at the end of their names."""
    if len(text) <= budget:
        return text
    head = max(1, budget // 5)
    tail = budget - head - 1
    return text[:head] + ELLIPSIS + text[-tail:]


def _markup(lines: Sequence[str]) -> str:
    # Plotly reads a subset of HTML in labels: a name's own "<" or "&" is escaped, so it
    # shows as typed and never becomes a link or a line break.
    return "<br>".join(escape(line, quote=False) for line in lines)


def wrap_label(text: str, width: int = WRAP_CHARS, max_lines: int | None = MAX_LINES) -> str:
    """One label as plotly markup: wrapped, shortened past ``max_lines`` (None: never)."""
    if max_lines is None:
        return _markup(_lines(text, width))
    # Breaking at separators leaves lines short, so a name shortened to max_lines x width
    # characters can still need another line (a legend entry then ran past the picture's
    # edge): shorten further until it fits.
    budget = width * max_lines
    lines = _lines(_shortened(text, budget), width)
    while len(lines) > max_lines and budget > width:
        budget -= 4
        lines = _lines(_shortened(text, budget), width)
    return _markup(lines)


def display_labels(names: Sequence[str], width: int = WRAP_CHARS,
                   max_lines: int | None = MAX_LINES) -> list[str]:
    """Plotly markup for each of ``names``, in order, as distinct as the names themselves.

    Long names are wrapped, and shortened when longer than ``max_lines`` lines; a shortened
    name that would read like another one is shown whole instead (more lines), so two runs
    differing only in the middle of their names (``...-t0.0-...`` / ``...-t0.6-...``) never
    share a row or a legend entry.
    """
    short = [wrap_label(str(n), width, max_lines) for n in names]
    named: dict[str, set[str]] = {}
    for name, label in zip(names, short, strict=True):
        named.setdefault(label, set()).add(str(name))
    return [label if len(named[label]) == 1 else wrap_label(str(name), width, None)
            for name, label in zip(names, short, strict=True)]


def text_size(label: str, font_px: float = FONT_PX) -> tuple[float, float]:
    """Estimated (width, height) in pixels of a markup label (its widest line, its lines)."""
    lines = [unescape(re.sub(r"<[^>]*>", "", line)) for line in str(label).split("<br>")]
    scale = font_px / FONT_PX
    width = max((len(line) for line in lines), default=0) * CHAR_PX * scale
    return width, len(lines) * LINE_PX * scale


def _widest(labels: Sequence[str]) -> float:
    return max((text_size(label)[0] for label in labels), default=0.0)


def _tallest(labels: Sequence[str]) -> float:
    return max((text_size(label)[1] for label in labels), default=0.0)


@dataclass(frozen=True)
class Fit:
    """What a chart shows around its plot, from which ``apply`` sizes it.

    ``x_labels`` / ``y_labels`` are the categorical tick labels (markup), one per slot;
    ``legend`` the legend entries; ``panels`` the stacked subplots (rows) and ``panel_titles``
    their titles; ``colorbar`` a heat map's scale on the right.
    """

    x_labels: Sequence[str] = ()
    y_labels: Sequence[str] = ()
    legend: Sequence[str] = ()
    panels: int = 1
    panel_titles: Sequence[str] = ()
    columns: int = 1
    colorbar: bool = False
    x_title: bool = False
    y_title: bool = False
    #: Smallest width of one x slot (a heat map's cell holds its printed value).
    min_slot_px: float = 24.0
    #: Rows of x labels: 2 for a two-level (multicategory) axis, which never turns upright.
    x_levels: int = 1


@dataclass(frozen=True)
class Layout:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    x_angle: int
    #: Gap between stacked panels as a share of the plot height (``make_subplots``).
    vertical_spacing: float


def layout_for(fit: Fit) -> Layout:
    """Margins and size that give every label of ``fit`` room outside the plot."""
    y_text = _widest(fit.y_labels)
    # Numeric y axes print short numbers ("0.8", "25%", "120"): a fixed allowance.
    left = 24 + (y_text if fit.y_labels else 40) + (24 if fit.y_title else 0)

    legend_w = (48 + _widest(fit.legend)) if fit.legend else 0
    right = 24 + legend_w + (110 if fit.colorbar else 0)

    slots = max(len(fit.x_labels), 1)
    x_w, x_h = _widest(fit.x_labels), _tallest(fit.x_labels)
    flat_slot = max(fit.min_slot_px, x_w + 12)
    upright = bool(fit.x_labels) and fit.x_levels == 1 and slots * flat_slot > MAX_FLAT_W
    if upright:
        slot = max(fit.min_slot_px, x_h + 6)
        x_extent = x_w
    else:
        slot = flat_slot if fit.x_labels else 0.0
        x_extent = x_h if fit.x_labels else FONT_PX * 1.4
    panel_w = max(MIN_PLOT_W / fit.columns, slots * slot * 1.1)
    plot_w = panel_w * fit.columns
    bottom = 24 + x_extent + (30 if fit.x_title else 0) + (fit.x_levels - 1) * (x_h + 14)

    # Rows: a category row holds its label's lines; a legend entry holds its own.
    row_px = max(_tallest(fit.y_labels) + 10, 28.0) if fit.y_labels else 0.0
    # Plotly sets a legend's lines looser than tick labels (measured on rendered PNGs: about
    # 1.2 times LINE_PX, and 12 px between entries); a legend taller than the plot is cut.
    legend_h = sum(text_size(entry)[1] * 1.2 + 12 for entry in fit.legend) + 10
    title_h = _tallest(fit.panel_titles) + 10 if fit.panel_titles else 0.0
    panel_h = max(MIN_PLOT_H if fit.panels == 1 else 200.0, len(fit.y_labels) * row_px)
    gap = title_h + 24 if fit.panels > 1 else 0.0
    plot_h = max(fit.panels * panel_h + (fit.panels - 1) * gap, legend_h)
    top = TOP_PX + (title_h if fit.panel_titles else 0)
    # Left overflow of a first panel title wider than its panel is covered by the width below.
    title_w = _widest(fit.panel_titles)
    plot_w = max(plot_w, title_w + 20)
    return Layout(
        width=round(left + plot_w + right),
        height=round(top + plot_h + bottom),
        left=round(left),
        right=round(right),
        top=round(top),
        bottom=round(bottom),
        x_angle=-90 if upright else 0,
        vertical_spacing=(gap / plot_h) if fit.panels > 1 and plot_h > 0 else 0.0,
    )


def apply(fig: go.Figure, fit: Fit, layout: Layout | None = None) -> go.Figure:
    """Size ``fig`` for ``fit``: margins, width and height, every category tick shown."""
    size = layout or layout_for(fit)
    fig.update_layout(
        width=size.width,
        height=size.height,
        margin={"l": size.left, "r": size.right, "t": size.top, "b": size.bottom,
                "autoexpand": True},
    )
    fig.update_xaxes(automargin=True, tickangle=size.x_angle)
    fig.update_yaxes(automargin=True)
    if fit.x_labels:  # a category axis thins its ticks when crowded; every one is shown
        fig.update_xaxes(dtick=1)
    if fit.y_labels:
        fig.update_yaxes(dtick=1)
    if fit.legend:
        # Beside the plot, at its top: the right margin was sized for the widest entry.
        fig.update_layout(legend={"x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top"})
    return fig


__all__ = ["Fit", "Layout", "apply", "display_labels", "layout_for", "text_size", "wrap_label"]
