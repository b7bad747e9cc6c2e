"""Feedback configs: how a workspace reads the values of one feedback key.

LangSmith's ``/feedback-configs``: a key is ``continuous`` (a score, optionally bounded),
``categorical`` (named values) or ``freeform``. Annotation queue rubrics name keys and show
their configs to reviewers, so the config is checked when written (a bad config is refused,
never stored). One live config per key; a delete is soft (``include_all_configs`` still lists
it) and the key can be configured again afterwards. Enforced configs (LangSmith's workspace-wide
rules) are not served: asking for one is refused by name.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from sqlalchemy import select, update

from .._ids import as_uuid, new_id_text, utcnow
from ..errors import ConflictError, InvalidInputError, NotFoundError
from ._tables import feedback_configs

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from ._base import Store

__all__ = ["FeedbackConfigRecord", "FeedbackConfigRepo", "check_config"]

TYPES = ("continuous", "categorical", "freeform")


class FeedbackConfigRecord(BaseModel):
    """One feedback config, shaped as LangSmith's ``FeedbackConfigSchema``."""

    id: uuid.UUID
    feedback_key: str
    feedback_config: dict[str, Any]
    tenant_id: uuid.UUID
    modified_at: datetime
    is_lower_score_better: bool | None = None
    is_enforced: bool = False
    is_first: bool = False
    is_deleted: bool = False


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInputError(f"{where} must be a finite number, got {value!r}")
    return value


def _categories(raw: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise InvalidInputError(f"{where} must be a list of {{value, label}} objects")
    out = []
    for i, cat in enumerate(raw):
        if not isinstance(cat, Mapping):
            raise InvalidInputError(f"{where}[{i}] must be an object with 'value' and 'label'")
        unknown = sorted(set(cat) - {"value", "label"})
        if unknown:
            raise InvalidInputError(f"{where}[{i}]: unknown field(s) {unknown}")
        label = cat.get("label")
        if label is not None and not isinstance(label, str):
            raise InvalidInputError(f"{where}[{i}].label must be a string, got {label!r}")
        out.append({"value": _number(cat.get("value"), f"{where}[{i}].value"), "label": label})
    return out


def _unique(categories: list[dict[str, Any]], where: str) -> None:
    for field in ("value", "label"):
        seen = [c[field] for c in categories if c[field] is not None]
        dup = sorted({repr(v) for v in seen if seen.count(v) > 1})
        if dup:
            raise InvalidInputError(f"{where}: duplicate category {field}(s) {', '.join(dup)}")


def check_config(config: Any, where: str = "feedback_config") -> dict[str, Any]:
    """The config as stored, or InvalidInputError naming what is wrong with it."""
    if not isinstance(config, Mapping):
        raise InvalidInputError(f"{where} must be an object, got {type(config).__name__}")
    kind = config.get("type")
    if kind not in TYPES:
        raise InvalidInputError(f"{where}.type must be one of {', '.join(TYPES)}, got {kind!r}")
    allowed = {"type", "min", "max", "categories", "allows_multiple_categories"}
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise InvalidInputError(f"{where}: unknown field(s) {unknown}")
    out: dict[str, Any] = {"type": kind}
    if kind == "continuous":
        lo = None if config.get("min") is None else _number(config["min"], f"{where}.min")
        hi = None if config.get("max") is None else _number(config["max"], f"{where}.max")
        if lo is not None and hi is not None and lo > hi:
            raise InvalidInputError(f"{where}: min {lo} is above max {hi}")
        out.update(min=lo, max=hi)
    if kind == "categorical":
        cats = _categories(config.get("categories"), f"{where}.categories")
        if len(cats) < 2:
            raise InvalidInputError(f"{where}: a categorical config needs at least 2 categories")
        _unique(cats, where)
        out["categories"] = cats
        multi = config.get("allows_multiple_categories", False)
        if not isinstance(multi, bool):
            raise InvalidInputError(f"{where}.allows_multiple_categories must be a boolean")
        out["allows_multiple_categories"] = multi
    elif config.get("categories") is not None:
        raise InvalidInputError(f"{where}: categories only apply to a categorical config")
    return out


def misfit(config: Mapping[str, Any], score: Any, value: Any) -> str | None:
    """Why ``score`` / ``value`` do not fit a key's config (None when they do): a continuous
    score within its bounds, a categorical one among its categories' values or labels."""
    kind = config.get("type")
    if kind == "continuous" and score is not None:
        lo, hi = config.get("min"), config.get("max")
        if (lo is not None and score < lo) or (hi is not None and score > hi):
            return f"score {score} is outside [{lo}, {hi}]"
    if kind == "categorical":
        cats = config.get("categories") or []
        if score is not None and score not in [c.get("value") for c in cats]:
            return f"score {score} is none of the categories' values"
        if value is not None and value not in [c.get("label") for c in cats]:
            return f"value {value!r} is none of the categories' labels"
    return None


class FeedbackConfigRepo:
    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def _tenant(self) -> Any:
        return feedback_configs.c.tenant_id == self.store.tenant_id

    def _model(self, row: Any) -> FeedbackConfigRecord:
        return FeedbackConfigRecord(
            id=row.id, feedback_key=row.feedback_key, feedback_config=row.feedback_config,
            tenant_id=row.tenant_id, modified_at=row.modified_at,
            is_lower_score_better=row.is_lower_score_better, is_deleted=row.is_deleted,
            is_first=not row.is_deleted)

    def _live(self, conn: Connection, key: str | None = None,
              config_id: uuid.UUID | str | None = None) -> Any:
        q = select(feedback_configs).where(self._tenant, feedback_configs.c.is_deleted.is_(False))
        if config_id is not None:
            q = q.where(feedback_configs.c.id == str(as_uuid(config_id, "config id")))
        if key is not None:
            q = q.where(feedback_configs.c.feedback_key == key)
        return conn.execute(q).first()

    def create(self, feedback_key: str, feedback_config: Mapping[str, Any], *,
               is_lower_score_better: bool | None = None, is_enforced: bool = False
               ) -> FeedbackConfigRecord:
        """A config for ``feedback_key``; the same config again returns the stored one."""
        if not isinstance(feedback_key, str) or not feedback_key.strip():
            raise InvalidInputError("feedback_key must be a non-empty string")
        if is_enforced:
            raise InvalidInputError("enforced feedback configs (is_enforced=true) are not "
                                    "served by assay: create the config without is_enforced")
        if is_lower_score_better is not None and not isinstance(is_lower_score_better, bool):
            raise InvalidInputError("is_lower_score_better must be a boolean")
        config = check_config(feedback_config)
        now = utcnow()
        with self.store.write() as conn:
            cur = self._live(conn, feedback_key)
            if cur is not None:
                if cur.feedback_config == config:
                    return self._model(cur)
                raise ConflictError(f"feedback config already exists for key {feedback_key!r} "
                                    "with a different config: update it or delete it first")
            row = {"id": new_id_text(), "tenant_id": self.store.tenant_id,
                   "feedback_key": feedback_key, "feedback_config": config,
                   "is_lower_score_better": bool(is_lower_score_better), "is_deleted": False,
                   "created_at": now, "modified_at": now}
            conn.execute(feedback_configs.insert().values(**row))
            return self._model(self._live(conn, config_id=str(row["id"])))

    def read(self, feedback_key: str) -> FeedbackConfigRecord:
        with self.store.read() as conn:
            row = self._live(conn, feedback_key)
        if row is None:
            raise NotFoundError(f"no feedback config for key {feedback_key!r}")
        return self._model(row)

    def list(self, *, feedback_keys: Sequence[str] | None = None,
             name_contains: str | None = None, include_all_configs: bool = False,
             is_enforced: bool | None = None, offset: int = 0,
             limit: int | None = None) -> list[FeedbackConfigRecord]:
        if is_enforced:  # assay has none
            return []
        q = select(feedback_configs).where(self._tenant)
        if not include_all_configs:
            q = q.where(feedback_configs.c.is_deleted.is_(False))
        if feedback_keys is not None:
            q = q.where(feedback_configs.c.feedback_key.in_(list(feedback_keys)))
        if name_contains:
            q = q.where(feedback_configs.c.feedback_key.contains(name_contains, autoescape=True))
        q = q.order_by(feedback_configs.c.feedback_key, feedback_configs.c.created_at,
                       feedback_configs.c.id).offset(max(offset, 0))
        if limit is not None:
            q = q.limit(limit)
        with self.store.read() as conn:
            return [self._model(r) for r in conn.execute(q)]

    def update(self, feedback_key: str, *, feedback_config: Mapping[str, Any] | None = None,
               is_lower_score_better: bool | None = None,
               config_id: uuid.UUID | str | None = None,
               add_categories: Sequence[Mapping[str, Any]] | None = None,
               remove_categories: Sequence[float] | None = None) -> FeedbackConfigRecord:
        """Change the key's config: only what is given changes (LangSmith's PATCH)."""
        if is_lower_score_better is not None and not isinstance(is_lower_score_better, bool):
            raise InvalidInputError("is_lower_score_better must be a boolean")
        with self.store.write() as conn:
            cur = self._live(conn, feedback_key, config_id)
            if cur is None:
                which = f"config {config_id}" if config_id else f"key {feedback_key!r}"
                raise NotFoundError(f"no feedback config for {which}")
            config = dict(cur.feedback_config)
            if feedback_config is not None:
                config = check_config(feedback_config)
            if add_categories is not None or remove_categories is not None:
                if config["type"] != "categorical":
                    raise InvalidInputError(f"feedback config of {feedback_key!r} is "
                                            f"{config['type']}: only a categorical one has "
                                            "categories to add or remove")
                cats = list(config["categories"])
                cats += _categories(list(add_categories or ()), "add_categories")
                drop = [_number(v, "remove_categories[]") for v in remove_categories or ()]
                missing = [v for v in drop if v not in {c["value"] for c in cats}]
                if missing:
                    raise InvalidInputError(f"remove_categories: no category with value(s) "
                                            f"{missing} in {feedback_key!r}")
                config = check_config({**config,
                                       "categories": [c for c in cats if c["value"] not in drop]})
            values: dict[str, Any] = {"feedback_config": config, "modified_at": utcnow()}
            if is_lower_score_better is not None:
                values["is_lower_score_better"] = is_lower_score_better
            conn.execute(update(feedback_configs).where(feedback_configs.c.id == cur.id)
                         .values(**values))
            return self._model(self._live(conn, config_id=cur.id))

    def delete(self, feedback_key: str | None = None, *,
               config_id: uuid.UUID | str | None = None) -> int:
        """Soft-delete the key's configs (or one by id); the key can be configured again."""
        if (feedback_key is None) == (config_id is None):
            raise InvalidInputError("give exactly one of feedback_key or config id")
        q = update(feedback_configs).where(self._tenant, feedback_configs.c.is_deleted.is_(False))
        if config_id is not None:
            q = q.where(feedback_configs.c.id == str(as_uuid(config_id, "config id")))
        else:
            q = q.where(feedback_configs.c.feedback_key == feedback_key)
        with self.store.write() as conn:
            n = conn.execute(q.values(is_deleted=True, modified_at=utcnow())).rowcount
        if not n:
            which = f"config {config_id}" if config_id else f"key {feedback_key!r}"
            raise NotFoundError(f"no feedback config for {which}")
        return int(n)
