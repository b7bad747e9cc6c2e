"""Checks on attachments before anything is stored: names, sizes, declared MIME types.

Shared by the store (local ``Client``), the server's multipart endpoints and remote mode, so
every path refuses the same input with the same words. A name is a label, never a path; a
declared type of a common binary format must match the content's magic bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

__all__ = [
    "DEFAULT_MAX_ATTACHMENT_BYTES",
    "MAX_NAME",
    "AttachmentTooLarge",
    "LazyReader",
    "StoredAttachment",
    "Upload",
    "check_name",
    "check_upload",
    "operations",
    "uploads_from_sdk",
]

DEFAULT_MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024
MAX_NAME = 256

_TOKEN = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"  # RFC 6838 type and subtype names
_MIME = re.compile(rf"^{_TOKEN}/{_TOKEN}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class AttachmentTooLarge(InvalidInputError):
    """An attachment over the configured limit (the server answers 413 naming it)."""

    def __init__(self, name: str, size: int, limit: int) -> None:
        super().__init__(f"attachment {name!r} is {size} bytes, over the limit of {limit} bytes "
                         "(assay serve: ASSAY_MAX_ATTACHMENT_BYTES)")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Upload:
    """One attachment to store: its name, declared MIME type and bytes (already checked)."""

    name: str
    mime_type: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredAttachment:
    name: str
    sha256: str
    mime_type: str
    size: int


def _loaded_reader(data: bytes, size: int | None) -> LazyReader:
    """An unpickled ``LazyReader``: its bytes already in memory."""
    reader = LazyReader(None, size)
    reader._buf = io.BytesIO(data)
    return reader


class LazyReader(io.BufferedIOBase):
    """A file-like reader of one attachment that fetches its bytes on first use.

    Listing a dataset with its attachments (an experiment whose target asks for them) then
    costs no memory for files nobody reads yet: 10,000 images of 100 KB are 1 GB read eagerly.
    """

    def __init__(self, load: Any, size: int | None = None) -> None:
        super().__init__()
        self._load = load
        self._buf: io.BytesIO | None = None
        self.size = size

    def _io(self) -> io.BytesIO:
        if self._buf is None:
            self._buf = io.BytesIO(self._load())
        return self._buf

    def __reduce__(self) -> tuple[Any, tuple[bytes, int | None]]:
        """Pickled with its bytes (fetched now if unread, not kept here): the copy is read
        where no store is, e.g. by a target taking ``attachments`` on a Ray worker
        (``executor="ray"``), and this reader stays as light as it was."""
        data = self._buf.getvalue() if self._buf is not None else self._load()
        return _loaded_reader, (data, self.size)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._io().read(size)

    def read1(self, size: int = -1) -> bytes:
        return self._io().read1(size)

    def readinto(self, b: Any) -> int:
        return self._io().readinto(b)

    def readline(self, size: int | None = -1) -> bytes:
        return self._io().readline(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        if self._buf is None and offset == 0 and whence == 0:
            return 0  # a rewind of an unread file (evaluate() rewinds each) loads nothing
        return self._io().seek(offset, whence)

    def tell(self) -> int:
        return 0 if self._buf is None else self._buf.tell()

    def getvalue(self) -> bytes:
        return self._io().getvalue()

    def getbuffer(self) -> memoryview:
        return self._io().getbuffer()


# -- checks ------------------------------------------------------------------------------------
def check_name(name: Any) -> str:
    """An attachment name: a label, never a path (no separators, no ``..``, no controls)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInputError(f"attachment name must be a non-empty string, got {name!r}")
    if len(name) > MAX_NAME:
        raise InvalidInputError(f"attachment name {name[:40]!r}... is longer than {MAX_NAME} "
                                "characters")
    if "/" in name or "\\" in name or ".." in name or _CONTROL.search(name):
        raise InvalidInputError(f"attachment name {name!r} may not contain path separators, "
                                "'..' or control characters")
    return name


def _ftyp(d: bytes) -> bool:
    return d[4:8] == b"ftyp"


def _mp3(d: bytes) -> bool:
    return d.startswith(b"ID3") or (len(d) > 1 and d[0] == 0xFF and d[1] & 0xE0 == 0xE0)


def _riff(kind: bytes) -> Any:
    return lambda d: d.startswith(b"RIFF") and d[8:12] == kind


def _prefix(*heads: bytes) -> Any:
    return lambda d: d.startswith(heads)


# The declared type of a common binary format must match the content's magic bytes.
_MAGIC: dict[str, Any] = {
    "image/png": _prefix(b"\x89PNG\r\n\x1a\n"),
    "image/jpeg": _prefix(b"\xff\xd8\xff"),
    "image/jpg": _prefix(b"\xff\xd8\xff"),
    "image/gif": _prefix(b"GIF87a", b"GIF89a"),
    "image/webp": _riff(b"WEBP"),
    "image/bmp": _prefix(b"BM"),
    "image/tiff": _prefix(b"II*\x00", b"MM\x00*"),
    "application/pdf": _prefix(b"%PDF-"),
    "audio/wav": _riff(b"WAVE"),
    "audio/wave": _riff(b"WAVE"),
    "audio/x-wav": _riff(b"WAVE"),
    "audio/mpeg": _mp3,
    "audio/mp3": _mp3,
    "audio/ogg": _prefix(b"OggS"),
    "video/ogg": _prefix(b"OggS"),
    "application/ogg": _prefix(b"OggS"),
    "audio/flac": _prefix(b"fLaC"),
    "audio/mp4": _ftyp,
    "video/mp4": _ftyp,
    "video/quicktime": _ftyp,
    "video/webm": _prefix(b"\x1a\x45\xdf\xa3"),
    "audio/webm": _prefix(b"\x1a\x45\xdf\xa3"),
    "application/zip": _prefix(b"PK\x03\x04", b"PK\x05\x06"),
    "application/gzip": _prefix(b"\x1f\x8b"),
}
# a text type whose content opens like one of these is a binary file under a false label
_BINARY_HEADS = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8", b"%PDF-", b"PK\x03\x04", b"\x1f\x8b",
                 b"OggS", b"fLaC")


def check_upload(name: Any, mime_type: Any, data: Any, *,
                 max_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES) -> Upload:
    """The checked attachment, or an error naming what is wrong with it.

    The declared MIME type is checked against the content's magic bytes for the common binary
    formats (images, PDF, audio, video, zip/gzip); JSON must parse; a text type may not hold a
    known binary format. Other types (``application/octet-stream``, vendor types) are stored as
    declared: there is no magic to check them against.
    """
    name = check_name(name)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidInputError(f"attachment {name!r}: data must be bytes, got "
                                f"{type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise AttachmentTooLarge(name, len(data), max_bytes)
    if not isinstance(mime_type, str) or not _MIME.match(mime_type.split(";")[0].strip()):
        raise InvalidInputError(f"attachment {name!r}: {mime_type!r} is not a MIME type "
                                "(type/subtype)")
    mime = mime_type.split(";")[0].strip().lower()
    check = _MAGIC.get(mime)
    if check is not None and not check(data):
        raise InvalidInputError(f"attachment {name!r}: declared {mime} but the content is not "
                                f"{mime} (its first bytes are {data[:8]!r})")
    if mime == "application/json" or mime.endswith("+json"):
        try:
            json.loads(data)
        except ValueError as exc:
            raise InvalidInputError(f"attachment {name!r}: declared {mime} but the content is "
                                    f"not JSON: {exc}") from None
    elif mime.startswith("text/") and data.startswith(_BINARY_HEADS):
        raise InvalidInputError(f"attachment {name!r}: declared {mime} but the content is a "
                                f"binary file (its first bytes are {data[:8]!r})")
    return Upload(name, mime, data)


def uploads_from_sdk(attachments: Mapping[str, Any] | None, *, allow_filesystem: bool = False,
                     max_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES) -> list[Upload]:
    """LangSmith's ``attachments=`` values: ``(mime_type, data)`` or ``{"mime_type", "data"}``,
    data bytes (or a path, with ``dangerously_allow_filesystem=True`` as in the SDK)."""
    if attachments is None:
        return []
    if not isinstance(attachments, Mapping):
        raise InvalidInputError(f"attachments must be a mapping of name to (mime_type, data), "
                                f"got {type(attachments).__name__}")
    out = []
    for name, value in attachments.items():
        if isinstance(value, Mapping) and "data" in value:
            mime, data = value.get("mime_type"), value["data"]
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            mime, data = value
        else:
            raise InvalidInputError(f"attachment {name!r}: expected (mime_type, data) or "
                                    "{'mime_type': ..., 'data': ...}")
        if isinstance(data, Path):
            if not allow_filesystem:
                raise InvalidInputError(f"attachment {name!r} is a file path: pass "
                                        "dangerously_allow_filesystem=True to read files")
            data = data.read_bytes()
        out.append(check_upload(name, mime, data, max_bytes=max_bytes))
    return out


def operations(value: Any) -> tuple[list[str], dict[str, str]] | None:
    """``attachments_operations`` (``{"retain": [...], "rename": {old: new}}``) checked, or
    None when absent (then an update keeps every attachment)."""
    if value is None:
        return None
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if not isinstance(value, Mapping) or set(value) - {"retain", "rename"}:
        raise InvalidInputError("attachments_operations must be an object with 'retain' (a list "
                                "of names) and/or 'rename' (an object old name -> new name)")
    retain, rename = value.get("retain") or [], value.get("rename") or {}
    if not isinstance(retain, list) or not isinstance(rename, Mapping):
        raise InvalidInputError("attachments_operations: 'retain' must be a list and 'rename' "
                                "an object")
    retain = [check_name(n) for n in retain]
    rename = {check_name(k): check_name(v) for k, v in rename.items()}
    if len(set(rename.values())) != len(rename):
        raise InvalidInputError("attachments_operations: two attachments renamed to one name")
    return retain, rename
