"""One exception hierarchy for everything assay raises on purpose.

    AssayError
    ├── NotFoundError          a dataset, example, project, run or key does not exist
    ├── ConflictError          a unique name is already taken (e.g. duplicate dataset name)
    ├── InvalidInputError      the caller passed something malformed (message names what)
    │   └── ExampleValidationError   one item of a batch is bad (carries its index)
    ├── AuthError              a missing, unknown or revoked API key (remote mode)
    ├── StoreError             the database failed (locked, unreachable, migration failed)
    ├── RemoteError            the assay / LangSmith server answered with an error
    ├── JudgeError             an LLM judge could not produce a verdict
    └── MissingDependencyError an optional extra is not installed (message says which)

Every message names the object or field at fault so a user never has to guess.
"""

from __future__ import annotations

from types import ModuleType

__all__ = [
    "AssayError",
    "NotFoundError",
    "ConflictError",
    "InvalidInputError",
    "ExampleValidationError",
    "ExpiredError",
    "AuthError",
    "StoreError",
    "RemoteError",
    "JudgeError",
    "MissingDependencyError",
]


class AssayError(Exception):
    """Base class of every error assay raises on purpose."""


class NotFoundError(AssayError, LookupError):
    """The named object does not exist."""


class ConflictError(AssayError):
    """A unique name or id is already taken."""


class InvalidInputError(AssayError, ValueError):
    """The caller passed something malformed."""


class ExampleValidationError(InvalidInputError):
    """One item in a batch is invalid; nothing in the batch was stored."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"example at index {index}: {problem}")


class ExpiredError(InvalidInputError):
    """A time-limited grant (a presigned feedback token) is past its expiry."""


class AuthError(AssayError):
    """Missing, unknown or revoked API key."""


class StoreError(AssayError):
    """The database failed underneath an operation."""


class RemoteError(AssayError):
    """A server answered with an error status."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


class JudgeError(AssayError):
    """An LLM judge could not produce a valid verdict."""

    attempts: int | None = None  # the calls made before giving up
    status_code: int | None = None  # the provider's HTTP status of the last failure, if any
    last_output: str | None = None  # the start of the last answer that did not validate


class MissingDependencyError(AssayError, ImportError):
    """An optional integration is used without its extra installed."""

    def __init__(self, package: str, extra: str, feature: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{feature} needs the '{package}' package: pip install 'assay[{extra}]'"
        )


def require(module: str, extra: str, feature: str) -> ModuleType:
    """Import an optional module lazily, or raise an install hint naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on environment
        raise MissingDependencyError(module.split(".")[0], extra, feature) from exc
