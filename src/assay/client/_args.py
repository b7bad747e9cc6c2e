"""LangSmith keyword arguments that assay's ``Client`` does not act on.

The methods take LangSmith's signatures, so code written for it runs here. An argument that
only shapes the answer (``select``, ``include_attachments``, ...) may be dropped; one that would
change what is stored or returned (a ``filter``, a ``data_type``, ``attachments``) is refused by
name, never silently dropped: a dropped filter returns every record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidInputError

__all__ = ["refuse_unknown"]


def refuse_unknown(method: str, given: Mapping[str, Any], ignored: Iterable[str] = ()) -> None:
    """Raise for each argument in ``given`` set to a value, unless it is in ``ignored``."""
    skip = frozenset(ignored)
    bad = sorted(k for k, v in given.items() if v is not None and k not in skip)
    if bad:
        names = ", ".join(f"{k}=" for k in bad)
        raise InvalidInputError(f"{method}() in assay does not support {names} (LangSmith "
                                "arguments assay cannot honour are refused, not ignored)")
