"""Small inline SVG charts (no JavaScript, no network): line charts with a log or linear x axis and
horizontal bar charts with a reference mark. Every data point is a <circle class="point"> (or a <rect
class="bar">) carrying data-x/data-y, so tests and readers can check the numbers behind the picture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

WIDTH, HEIGHT = 640, 320
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 150, 30, 48
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"]


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    dashed: bool = False
    markers: bool = True
    color: str | None = None
    css_class: str = "series"


@dataclass
class Axis:
    label: str
    log: bool = False
    ticks: list[float] = field(default_factory=list)
    tick_format: object = None  # callable(value) -> str


def human_bytes(value: float) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    exponent = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exponent:
            return step * exponent
    return 10 * exponent


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


class _Scale:
    def __init__(self, low: float, high: float, start: float, end: float, log: bool):
        self.log = log
        self.low, self.high = (math.log2(low), math.log2(high)) if log else (low, high)
        if self.high == self.low:
            self.high = self.low + 1
        self.start, self.end = start, end

    def __call__(self, value: float) -> float:
        position = math.log2(value) if self.log else value
        return self.start + (position - self.low) / (self.high - self.low) * (self.end - self.start)


def _log_ticks(low: float, high: float) -> list[float]:
    ticks, value = [], 2 ** math.ceil(math.log2(low))
    step = max(1, round((math.log2(high) - math.log2(low)) / 8))
    while value <= high:
        ticks.append(value)
        value *= 2**step
    return ticks


@dataclass
class Threshold:
    """A horizontal line at a gate's value (class "threshold"), labelled at the right edge."""

    label: str
    value: float
    color: str = "#b00020"


def _threshold_line(item: Threshold, y, left: float, right: float) -> str:
    return (
        f'<g class="threshold" data-y="{item.value:g}" data-label="{escape(item.label)}">'
        f'<line x1="{left}" x2="{right}" y1="{y(item.value):.1f}" y2="{y(item.value):.1f}" stroke="{item.color}" '
        f'stroke-width="1.5" stroke-dasharray="4 3"/><title>{escape(item.label)}</title></g>'
    )


def line_chart(
    chart_id: str,
    title: str,
    series: list[Series],
    x_axis: Axis,
    y_axis: Axis,
    thresholds: list[Threshold] | None = None,
) -> str:
    points = [point for item in series for point in item.points]
    if not points:
        return f'<p class="not-run" id="{escape(chart_id)}-empty">no data points</p>'
    thresholds = thresholds or []
    xs = [x for x, _ in points if not x_axis.log or x > 0]
    low_x, high_x = min(xs), max(xs)
    high_y = _nice_max(max([y for _, y in points] + [item.value for item in thresholds]))
    x = _Scale(low_x, high_x, MARGIN_LEFT, WIDTH - MARGIN_RIGHT, x_axis.log)
    y = _Scale(0, high_y, HEIGHT - MARGIN_BOTTOM, MARGIN_TOP, False)
    x_format = x_axis.tick_format or _fmt
    x_ticks = x_axis.ticks or (_log_ticks(low_x, high_x) if x_axis.log else sorted(set(xs)))
    parts = [_frame(chart_id, title)]
    for value in (high_y * i / 4 for i in range(5)):
        parts.append(
            f'<line class="grid" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y(value):.1f}" '
            f'y2="{y(value):.1f}"/><text class="tick" x="{MARGIN_LEFT - 6}" y="{y(value) + 4:.1f}" '
            f'text-anchor="end">{_fmt(value)}</text>'
        )
    for value in x_ticks:
        parts.append(
            f'<text class="tick" x="{x(value):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 16}" '
            f'text-anchor="middle">{escape(x_format(value))}</text>'
        )
    for index, item in enumerate(series):
        color = item.color or PALETTE[index % len(PALETTE)]
        coords = [(x(px), y(py), px, py) for px, py in sorted(item.points) if not x_axis.log or px > 0]
        path = " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy, _, _ in coords)
        dash = ' stroke-dasharray="6 4"' if item.dashed else ""
        values = " ".join(f"{px:g}:{py:g}" for _, _, px, py in coords)
        parts.append(
            f'<g class="{escape(item.css_class)}" data-label="{escape(item.label)}" data-points="{values}">'
            f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{path}"/>'
        )
        if item.markers:
            parts += [
                f'<circle class="point" cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{color}" '
                f'data-x="{px:g}" data-y="{py:g}"><title>{escape(item.label)}: '
                f"{escape(x_format(px))} → {py:g}</title></circle>"
                for cx, cy, px, py in coords
            ]
        parts.append("</g>")
        legend_y = MARGIN_TOP + 18 * index
        parts.append(
            f'<line x1="{WIDTH - MARGIN_RIGHT + 12}" x2="{WIDTH - MARGIN_RIGHT + 32}" y1="{legend_y}" '
            f'y2="{legend_y}" stroke="{color}" stroke-width="2"{dash}/><text class="legend" '
            f'x="{WIDTH - MARGIN_RIGHT + 36}" y="{legend_y + 4}">{escape(item.label)}</text>'
        )
    parts += [_threshold_line(item, y, MARGIN_LEFT, WIDTH - MARGIN_RIGHT) for item in thresholds]
    parts.append(_axis_labels(x_axis.label, y_axis.label))
    parts.append("</svg>")
    return "".join(parts)


VERDICT_COLOR = {"PASS": "#2e7d32", "WARN": "#b26a00", "FAIL": "#c62828", "UNKNOWN": "#757575"}


def dot_chart(chart_id: str, title: str, dots: list[tuple[str, float, str]], unit: str, thresholds: list[Threshold]):
    """One dot per (label, value, verdict), sorted by value (lowest left), thresholds as horizontal lines: a
    strip that stays readable for hundreds of nodes (each dot's <title> names it)."""
    if not dots:
        return f'<p class="not-run" id="{escape(chart_id)}-empty">no data points</p>'
    ordered = sorted(dots, key=lambda dot: (dot[1], dot[0]))
    high = _nice_max(max([value for _, value, _ in ordered] + [item.value for item in thresholds]))
    left, right = MARGIN_LEFT, WIDTH - 20
    y = _Scale(0, high, HEIGHT - MARGIN_BOTTOM, MARGIN_TOP, False)
    step = (right - left) / max(len(ordered), 1)
    radius = 3 if len(ordered) <= 150 else 2
    parts = [_frame(chart_id, title)]
    for value in (high * i / 4 for i in range(5)):
        parts.append(
            f'<line class="grid" x1="{left}" x2="{right}" y1="{y(value):.1f}" y2="{y(value):.1f}"/>'
            f'<text class="tick" x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_fmt(value)}</text>'
        )
    for index, (label, value, verdict) in enumerate(ordered):
        color = VERDICT_COLOR.get(verdict, VERDICT_COLOR["UNKNOWN"])
        parts.append(
            f'<circle class="point v-{escape(verdict)}" cx="{left + step * (index + 0.5):.1f}" cy="{y(value):.1f}" '
            f'r="{radius}" fill="{color}" data-x="{escape(label)}" data-y="{value:g}"><title>{escape(label)}: '
            f"{value:g} {escape(unit)} ({escape(verdict)})</title></circle>"
        )
    if len(ordered) <= 24:
        parts += [
            f'<text class="tick" x="{left + step * (index + 0.5):.1f}" y="{HEIGHT - MARGIN_BOTTOM + 14}" '
            f'text-anchor="middle">{escape(label)}</text>'
            for index, (label, _, _) in enumerate(ordered)
        ]
    parts += [_threshold_line(item, y, left, right) for item in thresholds]
    parts.append(
        f'<line class="axis" x1="{left}" x2="{right}" y1="{HEIGHT - MARGIN_BOTTOM}" y2="{HEIGHT - MARGIN_BOTTOM}"/>'
        f'<text class="axis-label" x="{(left + right) / 2}" y="{HEIGHT - 10}" text-anchor="middle">'
        f"{len(ordered)} results, lowest first; dashed: threshold</text>"
        f'<text class="axis-label" x="16" y="{(MARGIN_TOP + HEIGHT - MARGIN_BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {(MARGIN_TOP + HEIGHT - MARGIN_BOTTOM) / 2})">{escape(unit)}</text></svg>'
    )
    return "".join(parts)


def bar_chart(
    chart_id: str,
    title: str,
    bars: list[tuple[str, float, float | None]],
    unit: str,
    thresholds: list[float | None] | None = None,
    verdicts: list[str] | None = None,
    legend: str | None = None,
) -> str:
    """Horizontal bars (label, value, reference); the reference (line rate) is a dark tick on the bar, the
    gate's threshold of each bar a red dashed tick (class "threshold"); ``legend`` replaces the axis text."""
    if not bars:
        return f'<p class="not-run" id="{escape(chart_id)}-empty">no data points</p>'
    thresholds = thresholds or [None] * len(bars)
    row = 26
    height = MARGIN_TOP + MARGIN_BOTTOM + row * len(bars)
    high = _nice_max(
        max(
            max(value, reference or 0, limit or 0)
            for (_, value, reference), limit in zip(bars, thresholds, strict=True)
        )
    )
    left, right = 190, WIDTH - 60
    scale = _Scale(0, high, left, right, False)
    parts = [_frame(chart_id, title, height)]
    for index, (label, value, reference) in enumerate(bars):
        top = MARGIN_TOP + index * row
        ratio = value / reference if reference else None
        color = PALETTE[0] if ratio is None or ratio >= 0.9 else PALETTE[1]
        if verdicts:
            color = VERDICT_COLOR.get(verdicts[index], VERDICT_COLOR["UNKNOWN"])
        parts.append(
            f'<text class="tick" x="{left - 6}" y="{top + 15}" text-anchor="end">{escape(label)}</text>'
            f'<rect class="bar" x="{left}" y="{top + 3}" width="{scale(value) - left:.1f}" height="{row - 8}" '
            f'fill="{color}" data-x="{escape(label)}" data-y="{value:g}"><title>{escape(label)}: {value:g} '
            f"{escape(unit)}</title></rect>"
            f'<text class="tick" x="{scale(value) + 4:.1f}" y="{top + 15}">{value:g}</text>'
        )
        limit = thresholds[index]
        if limit is not None:
            parts.append(
                f'<g class="threshold" data-y="{limit:g}"><line x1="{scale(limit):.1f}" x2="{scale(limit):.1f}" '
                f'y1="{top}" y2="{top + row - 2}" stroke="#b00020" stroke-width="2" stroke-dasharray="3 2"/>'
                f"<title>threshold {limit:g} {escape(unit)}</title></g>"
            )
        if reference:
            parts.append(
                f'<line class="reference" x1="{scale(reference):.1f}" x2="{scale(reference):.1f}" '
                f'y1="{top}" y2="{top + row - 2}" stroke="#222" stroke-width="2" data-y="{reference:g}"/>'
            )
    parts.append(
        f'<text class="axis-label" x="{(left + right) / 2}" y="{height - 12}" text-anchor="middle">'
        f"{escape(legend or f'{unit} (black mark: line rate; red dashed: threshold)')}</text></svg>"
    )
    return "".join(parts)


def _frame(chart_id: str, title: str, height: int = HEIGHT) -> str:
    return (
        f'<svg id="{escape(chart_id)}" class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">'
        f'<title>{escape(title)}</title><rect class="plot-bg" x="0" y="0" width="{WIDTH}" height="{height}"/>'
    )


def _axis_labels(x_label: str, y_label: str) -> str:
    middle_x = (MARGIN_LEFT + WIDTH - MARGIN_RIGHT) / 2
    middle_y = (MARGIN_TOP + HEIGHT - MARGIN_BOTTOM) / 2
    return (
        f'<line class="axis" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{HEIGHT - MARGIN_BOTTOM}" '
        f'y2="{HEIGHT - MARGIN_BOTTOM}"/><line class="axis" x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" '
        f'y1="{MARGIN_TOP}" y2="{HEIGHT - MARGIN_BOTTOM}"/>'
        f'<text class="axis-label" x="{middle_x}" y="{HEIGHT - 10}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text class="axis-label" x="16" y="{middle_y}" text-anchor="middle" '
        f'transform="rotate(-90 16 {middle_y})">{escape(y_label)}</text>'
    )
