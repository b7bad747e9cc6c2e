"""How metric values and differences are written (the UI and the CLI show the same text)."""

from __future__ import annotations

__all__ = ["secs", "usd", "pct", "num", "signed", "metric_value"]


def secs(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s"


def usd(value: float | None) -> str:
    if value is None:
        return "–"
    if value != 0 and abs(value) < 0.001:
        return f"${value:.6f}"
    return f"${value:.4f}"


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def num(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def signed(value: float | None, kind: str = "") -> str:
    """A difference with its sign, in the metric's unit."""
    if value is None:
        return "–"
    sign = "+" if value > 0 else "−" if value < 0 else ""
    mag = abs(value)
    body = {"latency": secs, "cost": usd, "error": pct}.get(kind, lambda v: num(v, 3))(mag)
    return sign + body


def metric_value(value: float | None, kind: str) -> str:
    return {"latency": secs, "cost": usd, "error": pct, "tokens": lambda v: num(v, 1)}.get(
        kind, lambda v: num(v, 3))(value)
