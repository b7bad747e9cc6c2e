"""Charts as inline SVG, drawn on the server: no JavaScript library, nothing fetched."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from markupsafe import Markup, escape

__all__ = ["histogram_svg"]

W, H, PAD_L, PAD_B, PAD_T = 320, 150, 34, 22, 18


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
