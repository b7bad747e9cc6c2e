"""The compiled multipart split (``server/_csplit.c``) against the Python parser it stands in for.

``parse_multipart`` hands a body to C first; C takes only the SDKs' usual layout and declines
anything else, which Python then parses (and words the errors of). So on every body, the C
path and the Python path must give equal parts or the same error: checked here on the SDKs'
layouts, on the odd ones, and on ~3,000 bodies mutated at random.
"""

from __future__ import annotations

import random
import uuid

import pytest
from compiled_paths import is_in_use, needs_c

from assay.server import _body
from assay.server._body import Part, parse_multipart
from assay.server._errors import ApiError

from ._wire import BOUNDARY, multipart

CTYPE = f"multipart/form-data; boundary={BOUNDARY}"


def test_the_compiled_split_is_what_ingest_uses() -> None:
    if not is_in_use(_body._CSPLIT, "assay.server._csplit"):
        return
    body, _ = multipart([(f"post.{uuid.uuid4()}", {"a": 1}), (f"post.{uuid.uuid4()}", b"{}")])
    parts = _body._CSPLIT.split(body, BOUNDARY.encode(), 100)
    assert parts is not None and [p.name[:5] for p in parts] == ["post.", "post."]
    assert parts[0].headers == {"content-type": "application/json", "content-length": "8"}
    assert parts[0].json() == {"a": 1} and parts[0].plain


def _outcome(data: bytes, content_type: str = CTYPE, max_parts: int = 100_000
             ) -> list[Part] | tuple[int, str, str]:
    try:
        return parse_multipart(data, content_type, max_parts=max_parts)
    except ApiError as exc:
        return exc.status, exc.kind, exc.detail


def _both(data: bytes, monkeypatch: pytest.MonkeyPatch, max_parts: int = 100_000
          ) -> tuple[object, object]:
    fast = _outcome(data, max_parts=max_parts)
    with monkeypatch.context() as m:
        m.setattr(_body, "_CSPLIT", None)
        slow = _outcome(data, max_parts=max_parts)
    return fast, slow


def _part(name: str, data: bytes, *, filename: str | None = None, ctype: str | None = None,
          length: bool = False, head: bytes | None = None) -> bytes:
    if head is None:
        head = f'Content-Disposition: form-data; name="{name}"'.encode()
        if filename is not None:
            head += f'; filename="{filename}"'.encode()
        head += b"\r\n"
        if ctype is not None:
            head += f"Content-Type: {ctype}\r\n".encode()
        if length:
            head += f"Content-Length: {len(data)}\r\n".encode()
    return f"--{BOUNDARY}\r\n".encode() + head + b"\r\n" + data + b"\r\n"


def _body_of(*parts: bytes, close: bytes = b"--\r\n", preamble: bytes = b"") -> bytes:
    return preamble + b"".join(parts) + f"--{BOUNDARY}".encode() + close


CASES = {
    "sdk layout": _body_of(_part("post.1", b'{"a":1}', ctype="application/json", length=True),
                           _part("post.1.inputs", b'{"q":"x"}', ctype="application/json",
                                 length=True)),
    "no headers but the name": _body_of(_part("feedback.2", b'{"score":1}')),
    "a file": _body_of(_part("attachment.1.img", b"\x00\x01\xff", filename="a.png",
                             ctype="image/png", length=True)),
    "an empty filename": _body_of(_part("attachment.1.x", b"x", filename="")),
    "utf-8 and latin-1": _body_of(_part("post.é", b"{}", filename="ü.txt",
                                        ctype="text/plain; charset=é")),
    "an empty part": _body_of(_part("post.1", b"")),
    "no parts": _body_of(),
    "an epilogue": _body_of(_part("post.1", b"{}"), close=b"--\r\ntrailing words"),
    "a preamble": _body_of(_part("post.1", b"{}"), preamble=b"this is a preamble\r\n"),
    "lowercase headers": _body_of(_part("x", b"{}", head=b'content-disposition: form-data; '
                                                         b'name="x"\r\n')),
    "headers in another order": _body_of(_part("x", b"{}", head=(
        b'Content-Disposition: form-data; name="x"\r\nContent-Length: 2\r\n'
        b"Content-Type: application/json\r\n"))),
    "another header": _body_of(_part("x", b"{}", head=(
        b'Content-Disposition: form-data; name="x"\r\nX-Extra: 1\r\n'))),
    "transport padding": _body_of(f"--{BOUNDARY}  \r\n".encode()
                                  + b'Content-Disposition: form-data; name="x"\r\n\r\n{}\r\n'),
    "a quote escaped in the name": _body_of(_part("x", b"{}", head=(
        b'Content-Disposition: form-data; name="a\\"b"\r\n'))),
    "no name": _body_of(_part("x", b"{}", head=b"Content-Disposition: form-data\r\n")),
    "no blank line": f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"x\"\r\n{{}}"
                     f"\r\n--{BOUNDARY}--\r\n".encode(),
    "not closed": _body_of(_part("post.1", b"{}"))[: -len(f"--{BOUNDARY}--\r\n")],
    "no boundary at all": b"just some bytes",
    "a bare LF in the content type": _body_of(_part("x", b"{}", head=(
        b'Content-Disposition: form-data; name="x"\r\nContent-Type: a\nb\r\n'))),
    "a content length without digits": _body_of(_part("x", b"{}", head=(
        b'Content-Disposition: form-data; name="x"\r\nContent-Length: \r\n'))),
    "a NUL escape": _body_of(_part("x", b'{"s":"a\\u0000b"}')),
    "a big integer": _body_of(_part("x", b'{"n":12345678901234567890}')),
}


@needs_c
@pytest.mark.parametrize("name", list(CASES))
def test_c_and_python_agree_on_each_layout(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = _both(CASES[name], monkeypatch)
    assert fast == slow


@needs_c
def test_the_usual_layout_is_split_in_c_and_the_rest_declined() -> None:
    split = _body._CSPLIT.split
    boundary = BOUNDARY.encode()
    for name in ("sdk layout", "a file", "utf-8 and latin-1", "no parts", "an epilogue"):
        assert split(CASES[name], boundary, 100) is not None, name
    for name in ("a preamble", "lowercase headers", "another header", "transport padding",
                 "not closed", "a quote escaped in the name"):
        assert split(CASES[name], boundary, 100) is None, name


@needs_c
def test_too_many_parts_is_refused_as_python_refuses_it(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    body = _body_of(*(_part(f"post.{i}", b"{}") for i in range(5)))
    for limit in (4, 5, 6):
        fast, slow = _both(body, monkeypatch, max_parts=limit)
        assert fast == slow
        assert isinstance(fast, tuple) == (limit < 5)


@needs_c
def test_plain_sees_every_19_digit_run_and_nul_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    """C looks at every 19th byte only: a run of 18 or 19 digits at each alignment."""
    for offset in range(45):
        for run in (18, 19, 20):
            data = b"x" * offset + b"1" * run + b"y" * (offset % 7)
            fast, slow = _both(_body_of(_part("p", data)), monkeypatch)
            assert fast == slow
            assert isinstance(fast, list) and fast[0].plain == (run < 19), (offset, run)
    for escape, plain in ((b"\\u0000", False), (b"\\u0001", True), (b"\\\\u0000", False)):
        fast, slow = _both(_body_of(_part("p", b'"' + escape + b'"')), monkeypatch)
        assert fast == slow and isinstance(fast, list) and fast[0].plain == plain


def _mutated(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data) + 1)
        kind = rng.random()
        if kind < 0.3 and data:  # a byte changed
            data[min(at, len(data) - 1)] = rng.choice(b'\r\n"\\-:; 0123456789aZ\x00\xe9')
        elif kind < 0.5:  # a byte inserted
            data[at:at] = bytes([rng.choice(b'\r\n"\\-: 9')])
        elif kind < 0.7:  # a byte dropped
            del data[at:at + 1]
        elif kind < 0.85:  # cut short
            del data[at:]
        else:  # a piece of the body doubled
            data[at:at] = data[max(0, at - rng.randint(1, 60)):at]
    return bytes(data)


@needs_c
def test_c_and_python_agree_on_mutated_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20261129)
    bases = [CASES["sdk layout"], CASES["a file"], CASES["utf-8 and latin-1"],
             _body_of(*(_part(f"post.{uuid.UUID(int=rng.getrandbits(128))}.{f}",
                              b'{"k":"v","n":123}', ctype="application/json", length=True)
                        for f in ("inputs", "outputs", "events", "extra")))]
    differing, taken = [], 0
    for i in range(3_000):
        body = _mutated(rng, bases[i % len(bases)])
        fast, slow = _both(body, monkeypatch)
        if fast != slow:
            differing.append(body)
        taken += _body._CSPLIT.split(body, BOUNDARY.encode(), 100_000) is not None
    assert not differing, differing[:3]
    assert taken >= 200  # the comparison covers bodies C took, not only ones it declined
