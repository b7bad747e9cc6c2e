"""Retries with exponential backoff that honour a server's ``Retry-After``.

The SDKs' own retries are switched off (``max_retries=0``) so that exactly one policy applies,
its waits are configurable (short in tests) and the final error can say how many attempts were
made and why each failed.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from ..errors import JudgeError
from ._types import JudgeOptions

__all__ = ["Failure", "MalformedReply", "backoff_delay", "call_with_retries", "parse_retry_after"]

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """A provider error classified: retryable or not, what the server asked us to wait, why."""

    retryable: bool
    message: str
    status_code: int | None = None
    retry_after: float | None = None
    timed_out: bool = False


class MalformedReply(JudgeError):
    """A reply arrived but cannot be read (no ``choices``, a body that is not JSON): a fault of
    the endpoint like a 500, retried under the same policy."""


def _reply_failure(exc: BaseException) -> Failure | None:
    """Failures every provider shares: a reply that is there but unreadable."""
    if isinstance(exc, MalformedReply):
        return Failure(True, str(exc))
    if isinstance(exc, json.JSONDecodeError):  # the SDK could not parse the response body
        return Failure(True, f"the reply body is not JSON: {exc}")
    return None


def parse_retry_after(headers: Mapping[str, str] | Any | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff_delay(attempt: int, options: JudgeOptions, retry_after: float | None = None) -> float:
    """Delay before retry number ``attempt`` (0-based): the server's wish wins when it gave one."""
    if retry_after is not None:
        return min(retry_after, options.max_retry_after)
    base = min(options.backoff_max, options.backoff_initial * options.backoff_multiplier**attempt)
    return base * (1.0 + options.jitter * random.random())


async def call_with_retries(
    send: Callable[[], Awaitable[T]],
    *,
    classify: Callable[[BaseException], Failure | None],
    options: JudgeOptions,
    judge_name: str,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> T:
    """Call ``send`` until it succeeds, a failure is not retryable, or retries run out.

    ``classify`` maps a provider exception to a ``Failure``; ``None`` means "not a provider error"
    and the exception propagates unchanged (a bug should not be retried). Unreadable replies
    (``MalformedReply``, a body that is not JSON) are retried for every provider.
    """
    attempt = 0
    while True:
        try:
            return await send()
        except Exception as exc:
            failure = _reply_failure(exc) or classify(exc)
            if failure is None:
                raise
            attempt += 1
            if not failure.retryable or attempt > options.max_retries:
                what = f"{attempt} attempt" + ("s" if attempt != 1 else "")
                msg = (f"judge {judge_name} timed out after {options.timeout:g}s ({what})"
                       if failure.timed_out else
                       f"judge {judge_name} failed after {what}: {failure.message}")
                err = JudgeError(msg)
                err.attempts = attempt
                err.status_code = failure.status_code
                raise err from exc
            await sleep(backoff_delay(attempt - 1, options, failure.retry_after))
