"""``expect``: LangSmith-style assertions that also record feedback on the test's run.

``expect(x).to_equal(y)`` asserts like ``assert x == y`` and, inside a marked test, records
feedback ``expectation`` (1 passed, 0 failed, the message as comment) whether it passed or not;
``expect.score(0.8, key="relevance")`` and ``expect.edit_distance(...)`` record the value under
their key first. Outside a marked test they only assert.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidInputError, require
from ._case import _CASE

__all__ = ["expect"]


def _record(key: str, score: Any = None, comment: str | None = None, **extra: Any) -> None:
    case = _CASE.get()
    if case is not None:
        case.add_feedback(key, score, None, comment, **extra)


class Matcher:
    """Assertions on one value (``key`` names it in messages)."""

    def __init__(self, key: str, value: Any) -> None:
        self.key = key
        self.value = value

    def _assert(self, ok: bool, message: str, method: str) -> None:
        if ok:
            _record("expectation", 1, f"Success: {self.key}.{method}")
            return
        _record("expectation", 0, f"AssertionError: {message}")
        raise AssertionError(message)

    def to_be_less_than(self, value: float) -> None:
        self._assert(self.value < value,
                     f"Expected {self.key} to be less than {value}, but got {self.value}",
                     "to_be_less_than")

    def to_be_greater_than(self, value: float) -> None:
        self._assert(self.value > value,
                     f"Expected {self.key} to be greater than {value}, but got {self.value}",
                     "to_be_greater_than")

    def to_be_between(self, min_value: float, max_value: float) -> None:
        self._assert(min_value < self.value < max_value,
                     f"Expected {self.key} to be between {min_value} and {max_value}, but got "
                     f"{self.value}", "to_be_between")

    def to_be_approximately(self, value: float, precision: int = 2) -> None:
        self._assert(round(self.value - value, precision) == 0,
                     f"Expected {self.key} to be approximately {value}, but got {self.value}",
                     "to_be_approximately")

    def to_equal(self, value: Any) -> None:
        self._assert(self.value == value,
                     f"Expected {self.key} to be equal to {value!r}, but got {self.value!r}",
                     "to_equal")

    def to_be_none(self) -> None:
        self._assert(self.value is None, f"Expected {self.key} to be None, but got {self.value!r}",
                     "to_be_none")

    def to_contain(self, value: Any) -> None:
        self._assert(value in self.value,
                     f"Expected {self.value!r} to contain {value!r}", "to_contain")

    def against(self, func: Callable[[Any], bool], /) -> None:
        name = getattr(func, "__name__", "predicate")
        self._assert(bool(func(self.value)),
                     f"Expected {self.key} to satisfy {name}, but got {self.value!r}", "against")


_DISTANCES = ("cosine", "euclidean", "manhattan", "chebyshev", "hamming")


class Expect:
    """``expect(value)``, ``expect.value``, ``expect.score``, ``expect.edit_distance``,
    ``expect.embedding_distance``."""

    def __call__(self, value: Any, /) -> Matcher:
        return Matcher("value", value)

    def value(self, value: Any) -> Matcher:
        return Matcher("value", value)

    def score(self, score: float | bool, *, key: str = "score", comment: str | None = None,
              source_run_id: Any = None) -> Matcher:
        """Record ``score`` as feedback ``key`` and return a matcher on it."""
        _record(key, score, comment, source_run_id=source_run_id)
        return Matcher(key, score)

    def edit_distance(self, prediction: str, reference: str, *,
                      config: dict[str, Any] | None = None) -> Matcher:
        """The string distance between ``prediction`` and ``reference`` (Damerau-Levenshtein,
        normalized to 0-1 by default; ``config``: ``metric`` one of damerau_levenshtein,
        levenshtein, jaro, jaro_winkler, hamming, indel; ``normalize_score``), recorded as
        feedback ``edit_distance``."""
        require("rapidfuzz", "pytest", "expect.edit_distance")
        from rapidfuzz import distance

        config = dict(config or {})
        metric = config.get("metric", "damerau_levenshtein")
        normalize = config.get("normalize_score", True)
        names = {"damerau_levenshtein": "DamerauLevenshtein", "levenshtein": "Levenshtein",
                 "jaro": "Jaro", "jaro_winkler": "JaroWinkler", "hamming": "Hamming",
                 "indel": "Indel"}
        if metric not in names:
            raise InvalidInputError(f"expect.edit_distance: unknown metric {metric!r}; one of "
                                    + ", ".join(names))
        algo = getattr(distance, names[metric])
        value = (algo.normalized_distance(prediction, reference) if normalize
                 else algo.distance(prediction, reference))
        _record("edit_distance", value, f"Using {metric}, Normalize: {normalize}",
                source_info={"metric": metric, "normalize": normalize})
        return Matcher("edit_distance", value)

    def embedding_distance(self, prediction: str, reference: str, *,
                           config: dict[str, Any] | None = None) -> Matcher:
        """The distance between the embeddings of ``prediction`` and ``reference``, recorded
        as feedback ``embedding_distance``. assay never calls an embedding API on its own:
        give ``config={"encoder": fn}`` (a list of texts -> a list of vectors) and optionally
        ``metric`` (cosine, euclidean, manhattan, chebyshev, hamming)."""
        config = dict(config or {})
        encoder = config.get("encoder")
        if not callable(encoder):
            raise InvalidInputError(
                "expect.embedding_distance needs an embedder: pass config={'encoder': fn}, "
                "fn taking a list of strings and returning a list of vectors")
        metric = config.get("metric", "cosine")
        if metric not in _DISTANCES:
            raise InvalidInputError(f"expect.embedding_distance: unknown metric {metric!r}; "
                                    "one of " + ", ".join(_DISTANCES))
        import numpy as np

        vectors: Sequence[Any] = encoder([prediction, reference])
        a, b = (np.asarray(v, dtype=float) for v in vectors)
        if metric == "cosine":
            denom = float(np.linalg.norm(a) * np.linalg.norm(b))
            value = 1.0 - (float(a @ b) / denom if denom else 0.0)
        elif metric == "euclidean":
            value = float(np.linalg.norm(a - b))
        elif metric == "manhattan":
            value = float(np.abs(a - b).sum())
        elif metric == "chebyshev":
            value = float(np.abs(a - b).max())
        else:
            value = float(np.mean(a != b))
        _record("embedding_distance", value, f"Using custom encoder, Metric: {metric}",
                source_info={"encoder": "custom", "metric": metric})
        return Matcher("embedding_distance", value)


expect = Expect()
