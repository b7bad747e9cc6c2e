"""A body's post and patch parts grouped into runs in C (``_csplit.runs``) against the Python
walk of ``_ingest.from_parts`` it stands in for.

``from_parts`` hands the parts to C first; C takes only a body of post.<id>[.<field>] and
patch.<id>[.<field>] parts in the usual form and declines anything else, which Python then
walks (and words the errors of). So on every list of parts, both ways must give the same
batch (posts and patches, in order, value for value, of the same classes) or the same error:
checked on the SDKs' bodies and on ~3,000 lists of parts mutated at random.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import orjson
import pytest
from compiled_paths import is_in_use, needs_c

from assay.server import _ingest
from assay.server._body import Part
from assay.server._errors import ApiError

JSON = {"content-type": "application/json"}


def test_the_compiled_walk_is_what_ingest_uses() -> None:
    if not is_in_use(_ingest._RUNS, "assay.server._csplit"):
        return
    parts = _parts(_run_parts(str(uuid.uuid4())))
    got = _ingest._RUNS(parts, _ingest._loads, _ingest._ADMIT)
    assert got is not None and len(got) == 1 and got[0]["inputs"] == '{"q": "hi"}'.replace(" ", "")


def _run_parts(rid: str, kind: str = "post", **fields: Any) -> list[tuple[str, Any]]:
    main = {"id": rid, "trace_id": rid, "name": "Target", "run_type": "chain",
            "start_time": "2026-11-29T05:30:38.123456+00:00",
            "dotted_order": f"20261129T053038123456Z{rid}", "session_name": "p"}
    if kind == "patch":
        main = {"id": rid, "trace_id": rid, "end_time": "2026-11-29T05:30:39+00:00",
                "dotted_order": main["dotted_order"]}
    out: list[tuple[str, Any]] = [(f"{kind}.{rid}", main)]
    values = {"inputs": {"q": "hi"}, "outputs": {"a": 1}, "events": [], "extra": {"metadata": {}}}
    values.update(fields)
    for field, value in values.items():
        if value is not None:
            out.append((f"{kind}.{rid}.{field}", value))
    return out


def _parts(spec: list[tuple[str, Any]], headers: dict[str, str] | None = None,
           plain: bool = True, compact: bool = False) -> list[Part]:
    """Parts of ``spec`` (name, value or raw bytes). ``compact``: the JSON as the SDKs write
    it (orjson's text, which C keeps as it is for a post's object fields); else with spaces
    (which C decodes)."""
    def text(value: Any) -> bytes:
        if isinstance(value, bytes):
            return value
        return orjson.dumps(value) if compact else json.dumps(value).encode()

    return [Part(name, text(value), dict(JSON if headers is None else headers), None, plain)
            for name, value in spec]


def _outcome(parts: list[Part]) -> Any:
    try:
        batch = _ingest.from_parts(parts)
    except ApiError as exc:
        return exc.status, exc.kind, exc.detail
    return ([(p.__class__, list(p.items())) for p in batch.posts],
            [(p.__class__, list(p.items())) for p in batch.patches],
            batch.feedback, batch.attachments)


def _both(parts: list[Part], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, bool]:
    """(the outcome with the C walk, without it, whether C took the parts)."""
    took = _ingest._RUNS(parts, _ingest._loads, _ingest._ADMIT) is not None  # type: ignore[misc]
    fast = _outcome(parts)
    with monkeypatch.context() as m:
        m.setattr(_ingest, "_RUNS", None)
        slow = _outcome(parts)
    return fast, slow, took


@needs_c
@pytest.mark.parametrize("case", ["posts", "posts and patches", "fields first", "no fields",
                                  "a patch alone", "an odd post", "error field"])
def test_the_usual_bodies_walk_alike(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    spec = {
        "posts": _run_parts(a) + _run_parts(b),
        "posts and patches": _run_parts(a) + _run_parts(b, "patch") + _run_parts(
            str(uuid.uuid4())),
        "fields first": list(reversed(_run_parts(a))),
        "no fields": _run_parts(a, inputs=None, outputs=None, events=None, extra=None),
        "a patch alone": _run_parts(a, "patch", inputs=None, events=None, extra=None),
        # a post C's admission declines (an event time in epoch ms): checked by Python, in place
        "an odd post": _run_parts(a, events=[{"name": "new_token", "time": 1795930371704}]),
        "error field": _run_parts(a, error="Boom"),
    }[case]
    for compact in (False, True):
        fast, slow, took = _both(_parts(spec, compact=compact), monkeypatch)
        # a post the admission declines, whose fields C kept as text: the whole body again
        assert took is not (compact and case == "an odd post") and fast == slow


@needs_c
@pytest.mark.parametrize("case", ["feedback", "attachment", "upper-case id", "bad field",
                                  "twice", "orphan field", "not json", "a list", "other type",
                                  "not plain"])
def test_declined_bodies_are_walked_in_python(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a = str(uuid.uuid4())
    spec = _run_parts(a)
    headers, plain = None, True
    if case == "feedback":
        spec.append((f"feedback.{uuid.uuid4()}", {"run_id": a, "key": "k", "score": 1}))
    elif case == "attachment":
        spec.append((f"attachment.{a}.file", b"raw bytes"))
    elif case == "upper-case id":
        spec[0] = (f"post.{a.upper()}", spec[0][1])
    elif case == "bad field":
        spec.append((f"post.{a}.unknown", {}))
    elif case == "twice":
        spec.append(spec[1])
    elif case == "orphan field":
        spec.append((f"post.{uuid.uuid4()}.inputs", {}))
    elif case == "not json":
        spec[1] = (spec[1][0], b"{not json")
    elif case == "a list":
        spec[0] = (spec[0][0], [1, 2])
    elif case == "other type":
        headers = {"content-type": "text/plain"}
    else:
        plain = False
    fast, slow, took = _both(_parts(spec, headers, plain), monkeypatch)
    assert not took and fast == slow


_NAMES = ["post.{a}", "post.{a}.inputs", "post.{a}.outputs", "post.{a}.error", "patch.{a}",
          "patch.{a}.outputs", "post.{b}", "post.{b}.events", "post.{A}", "post.{a}.", "post.{a}x",
          "post.{a}.Inputs", "post", "post.", "patch.{b}.extra", "feedback.{a}", "{a}",
          "post.{a}.serialized"]
_VALUES: list[Any] = [
    {}, {"name": "x"}, {"id": "{a}"}, {"id": "{b}"}, {"id": 1}, {"start_time": "yesterday"},
    {"run_type": "llm", "start_time": "2026-11-29T05:30:38Z"}, [], [{"name": "e"}], "text", 1,
    None, b"{", b"[1,", b"\"\\ud800\"", b"NaN", b'{"a":1,"a":2}', {"\x00": "\x00"},
]


@needs_c
def test_mutated_bodies_walk_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    taken = 0
    for _ in range(3000):
        ids = {"a": str(uuid.uuid4()), "b": str(uuid.uuid4())}
        ids["A"] = ids["a"].upper()
        spec = _run_parts(ids["a"]) + (_run_parts(ids["b"], "patch") if rng.random() < 0.5
                                       else [])
        for _ in range(rng.randint(0, 3)):
            what = rng.random()
            if what < 0.4 and spec:
                spec.pop(rng.randrange(len(spec)))
            elif what < 0.7:
                value = rng.choice(_VALUES)
                if isinstance(value, dict):
                    value = {k: (v.format(**ids) if isinstance(v, str) else v)
                             for k, v in value.items()}
                spec.insert(rng.randrange(len(spec) + 1),
                            (rng.choice(_NAMES).format(**ids), value))
            elif spec:
                i = rng.randrange(len(spec))
                spec[i] = (spec[i][0], rng.choice(_VALUES))
        headers = {"content-type": "application/json; charset=utf-8"} if rng.random() < 0.05 \
            else None
        fast, slow, took = _both(_parts(spec, headers, compact=rng.random() < 0.5), monkeypatch)
        assert fast == slow, spec
        taken += took
    assert taken > 500  # C walked a good share of them: this compared something


_TEXTS: list[Any] = [
    "", "x", "é", "\u00e9", "a\"b", "a\\b", "tab\tnew\nline", "\x7f", "\u2028", "😀", "\ufdd0",
    "\x00", "\ud800", 0, -1, 7, 123456789012345678, -0.0, 0.0, 1.0, 1.5, 0.001, 0.0001, 1e-7,
    0.1 + 0.2, 1 / 3, 123456789012345.5, 1e16, 1e300, 2.5e-5, True, False, None,
]


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 4 and roll < 0.25:
        return {rng.choice(["a", "b", "ké", "c d", "a\"", ""]) + str(rng.randrange(3)):
                _value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if depth < 4 and roll < 0.4:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return rng.choice(_TEXTS)


_EDITS = [(b":", b": "), (b",", b", "), (b"1.5", b"1.50"), (b"0.001", b"1e-3"), (b"7", b"-0"),
          (b"\xc3\xa9", b"\\u00e9"), (b"a", b"\\/"),
          (b"\"a", b"\"\\u0061"), (b"}", b"} "), (b"{", b" {"), (b"null", b"nul"),
          (b"\xf0\x9f", b"\xed\xa0"), (b"1", b"01"), (b"true", b"True")]


@needs_c
def test_only_orjsons_own_text_is_kept_as_it_came() -> None:
    """``canonical_object`` says yes only to a text orjson writes for the value it reads from
    it, which is the text the store keeps (``column_text``): checked on random values' texts
    and on texts edited one way or another (spaces, number forms, escapes, broken UTF-8, a key
    twice...)."""
    from assay.server import _csplit
    from assay.store._fold_columns import column_text

    rng = random.Random(5)
    kept = 0
    for _ in range(6000):
        value = {k: _value(rng) for k in ("x", "y", "z")[:rng.randrange(1, 4)]}
        try:
            text = orjson.dumps(value)
        except TypeError:  # a lone surrogate: orjson refuses the value itself
            continue
        if rng.random() < 0.5:
            old, new = rng.choice(_EDITS)
            text = text.replace(old, new, 1)
        if rng.random() < 0.05:
            text = text[:-1] + text[-1:] * 2 + b"," + text  # a key twice, trailing bytes...
        if not _csplit.canonical_object(text):
            continue
        kept += 1
        read = orjson.loads(text)
        assert orjson.dumps(read) == text, text
        assert column_text(read) == text.decode(), text
    assert kept > 1500  # most of orjson's own texts are taken
