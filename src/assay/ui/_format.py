"""Jinja filters: how numbers, times and JSON look on every page (one place, so pages agree)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from .._json import jsonable
from ..analysis._format import metric_value, num, pct, secs, signed, usd

__all__ = ["FILTERS", "secs", "usd", "pct", "num", "pretty", "signed"]


def when(value: datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def pretty(value: Any) -> str:
    """JSON for people: a lone string stays a string; everything else is indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str):
            return only
    return json.dumps(jsonable(value), indent=2, ensure_ascii=False)


def as_json(value: Any) -> str:
    """Full indented JSON (the run tree shows argument names, not just values)."""
    if value is None:
        return ""
    return json.dumps(jsonable(value), indent=2, ensure_ascii=False)


def user_meta(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """An example's metadata without the split copy the store adds (shown as badges)."""
    rest = {k: v for k, v in (meta or {}).items() if k != "dataset_split"}
    return rest or None


def short(value: Any, n: int = 8) -> str:
    return str(value)[:n]


def id_tail(value: Any) -> str:
    """The distinctive end of an id: uuid7 ids made together share their first (time) digits."""
    return "…" + str(value)[-8:]


def error_line(value: Any, n: int = 200) -> str:
    """The line of an error people read first: a traceback's last line (the exception and its
    message), cut to ``n`` characters; the whole text stays one click away."""
    lines = [ln for ln in str(value or "").splitlines() if ln.strip()]
    line = lines[-1].strip() if lines else ""
    return line if len(line) <= n else line[: n - 1] + "…"


def raw(value: float | None) -> str:
    """The exact number for data-value attributes (sorting, tests); empty when missing."""
    return "" if value is None else repr(float(value))


FILTERS = {"secs": secs, "usd": usd, "pct": pct, "num": num, "signed": signed, "when": when,
           "pretty": pretty, "as_json": as_json, "short": short, "raw": raw, "id_tail": id_tail,
           "user_meta": user_meta, "metric_value": metric_value, "error_line": error_line}
