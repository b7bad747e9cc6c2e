"""Charts as inline SVG, drawn on the server: no JavaScript library, nothing fetched."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from markupsafe import Markup, escape

__all__ = ["histogram_svg", "seconds_tick", "series_svg"]

W, H, PAD_L, PAD_B, PAD_T = 320, 150, 34, 22, 18
CHAR_W = 6.2  # a tick label's character at 10px, wide enough for digits and "$"


def seconds_tick(v: float) -> str:
    """A latency axis's label in seconds: three significant digits below 100 s (runs of a
    millisecond or less read "0.00 - 0.00" at two decimals), whole seconds above."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _pad_left(*labels: str) -> int:
    """The left margin that fits the y axis's labels (right-aligned against the axis)."""
    return max(PAD_L, round(CHAR_W * max(len(t) for t in labels)) + 8)


def histogram_svg(
    values: Sequence[float],
    *,
    title: str,
    bins: int = 12,
    value_range: tuple[float, float] | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
) -> Markup:
    """A histogram with a tooltip per bar; ``value_range`` fixes the axis (e.g. 0..1 scores)."""
    vals = np.asarray([v for v in values if v is not None], dtype=float)
    label = escape(title)
    head = (f'<svg class="chart" role="img" aria-label="{label} histogram" width="{W}" '
            f'height="{H}" viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg">'
            f'<text x="{W / 2}" y="12" text-anchor="middle" class="chart-title">{label}</text>')
    if vals.size == 0:
        empty = f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle">no data</text></svg>'
        return Markup(head + empty)
    lo, hi = value_range if value_range else (float(vals.min()), float(vals.max()))
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    counts, edges = np.histogram(vals, bins=bins, range=(lo, hi))
    top = int(counts.max()) or 1
    plot_w, plot_h = W - PAD_L - 6, H - PAD_B - PAD_T
    bar_w = plot_w / len(counts)
    parts = [head]
    for i, c in enumerate(counts):
        h = plot_h * c / top
        x = PAD_L + i * bar_w
        y = PAD_T + plot_h - h
        tip = escape(f"{fmt(edges[i])} – {fmt(edges[i + 1])}: {c}")
        parts.append(f'<rect class="bar" x="{x + 1:.1f}" y="{y:.1f}" '
                     f'width="{max(bar_w - 2, 1):.1f}" '
                     f'height="{h:.1f}" data-count="{c}"><title>{tip}</title></rect>')
    base = PAD_T + plot_h
    parts.append(f'<line x1="{PAD_L}" y1="{base}" x2="{W - 6}" y2="{base}" class="axis"/>')
    parts.append(f'<line x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{base}" class="axis"/>')
    parts.append(f'<text x="{PAD_L}" y="{H - 6}" class="tick">{escape(fmt(lo))}</text>')
    parts.append(f'<text x="{W - 6}" y="{H - 6}" text-anchor="end" '
                 f'class="tick">{escape(fmt(hi))}</text>')
    parts.append(f'<text x="{PAD_L - 4}" y="{PAD_T + 8}" text-anchor="end" '
                 f'class="tick">{top}</text>')
    parts.append(f'<text x="{PAD_L - 4}" y="{base}" text-anchor="end" class="tick">0</text>')
    parts.append(f'<text x="{W - 6}" y="12" text-anchor="end" '
                 f'class="tick">n={vals.size}</text></svg>')
    return Markup("".join(parts))


_COLORS = ("#5b7be0", "#e0703a", "#2e9d6a", "#9b59b6", "#c0392b", "#16a085")


def series_svg(
    labels: Sequence[str],
    lines: dict[str, Sequence[float | None]],
    *,
    title: str,
    bars: bool = False,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
    links: Sequence[str | None] | None = None,
    width: int = 420,
) -> Markup:
    """Values over time (one line per series, or bars for a single count series): a tooltip per
    point, ``links`` make each point a link (e.g. to the experiment it is)."""
    label = escape(title)
    w, h = width, H
    head = (f'<svg class="chart series" role="img" aria-label="{label}" width="{w}" '
            f'height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">'
            f'<text x="{w / 2}" y="12" text-anchor="middle" class="chart-title">{label}</text>')
    values = [v for vs in lines.values() for v in vs if v is not None]
    if not labels or not values:
        return Markup(head + f'<text x="{w / 2}" y="{h / 2}" text-anchor="middle">no data'
                      '</text></svg>')
    top = max(values) or 1.0
    lo = min(0.0, min(values))
    span = (top - lo) or 1.0
    top_label, lo_label = fmt(top), fmt(lo)
    pad = _pad_left(top_label, lo_label)
    plot_w, plot_h = w - pad - 8, h - PAD_B - PAD_T
    n = len(labels)
    step = plot_w / max(n, 1)
    base = PAD_T + plot_h

    def x_at(i: int) -> float:
        return pad + step * (i + 0.5)

    def y_at(v: float) -> float:
        return PAD_T + plot_h * (1 - (v - lo) / span)

    parts = [head]
    for k, (name, vs) in enumerate(lines.items()):
        color = _COLORS[k % len(_COLORS)]
        if bars:
            for i, v in enumerate(vs):
                if v is None:
                    continue
                y = y_at(v)
                tip = escape(f"{labels[i]} · {name}: {fmt(v)}")
                parts.append(f'<rect class="bar" x="{x_at(i) - step / 2 + 1:.1f}" y="{y:.1f}" '
                             f'width="{max(step - 2, 1):.1f}" height="{base - y:.1f}" '
                             f'data-value="{v!r}"><title>{tip}</title></rect>')
            continue
        pts = [(x_at(i), y_at(v)) for i, v in enumerate(vs) if v is not None]
        if len(pts) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" '
                         f'points="{path}"/>')
        for i, v in enumerate(vs):
            if v is None:
                continue
            tip = escape(f"{labels[i]} · {name}: {fmt(v)}")
            dot = (f'<circle cx="{x_at(i):.1f}" cy="{y_at(v):.1f}" r="3" fill="{color}" '
                   f'data-value="{v!r}"><title>{tip}</title></circle>')
            href = links[i] if links is not None and i < len(links) else None
            parts.append(f'<a href="{escape(href)}">{dot}</a>' if href else dot)
    parts.append(f'<line x1="{pad}" y1="{base}" x2="{w - 8}" y2="{base}" class="axis"/>')
    parts.append(f'<line x1="{pad}" y1="{PAD_T}" x2="{pad}" y2="{base}" class="axis"/>')
    parts.append(f'<text x="{pad - 4}" y="{PAD_T + 8}" text-anchor="end" '
                 f'class="tick">{escape(top_label)}</text>')
    parts.append(f'<text x="{pad - 4}" y="{base}" text-anchor="end" class="tick">'
                 f'{escape(lo_label)}</text>')
    parts.append(f'<text x="{pad}" y="{h - 6}" class="tick">{escape(labels[0])}</text>')
    parts.append(f'<text x="{w - 8}" y="{h - 6}" text-anchor="end" class="tick">'
                 f'{escape(labels[-1])}</text>')
    if len(lines) > 1:
        for k, name in enumerate(lines):
            parts.append(f'<text x="{w - 8}" y="{24 + 11 * k}" text-anchor="end" '
                         f'class="tick legend" style="fill:{_COLORS[k % len(_COLORS)]}">'
                         f'{escape(name)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
