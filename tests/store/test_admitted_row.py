"""The fold's row of an admitted post built in C (``_cencode.admitted_row``, through
``_fold_rows._row`` with it) against the Python it stands in for (``_row`` without it).

The fold builds the server's runs' rows ahead of each transaction (``prebuilt_rows``). C sets
the columns and says whether usage is to be derived; Python derives it, and builds (or
refuses) every post C declines. So for every post both give the same row, or both refuse it:
checked on the ingest benchmark's runs as the server admits them, on hand-picked posts, and on
~3,000 posts mutated at random.
"""

from __future__ import annotations

import copy
import random
import uuid
from typing import Any

import pytest
from compiled_paths import PURE, is_in_use, needs_c, posted_run

from assay.server import _ingest
from assay.store import _fold_rows, _fold_usage

_TENANT = "tenant-1"


def test_the_compiled_row_is_what_the_fold_uses() -> None:
    if is_in_use(_fold_rows._CROW, "assay.store._cencode"):
        post = _admitted()
        row, usage = _fold_rows._CROW(post, _TENANT, "")
        assert row[_fold_rows._ID] == post["id"] and row[_fold_rows._TENANT] == _TENANT
        assert usage == 0 and len(row) == len(_fold_rows._ORDER)


def _raw(**fields: Any) -> dict[str, Any]:
    """A chain run without events: nothing to derive unless a test adds it."""
    return posted_run(**{"outputs": {"a": "b"}, "events": [], **fields})


def _admitted(**fields: Any) -> dict[str, Any]:
    """A run as ``Journal.admit`` journals it (a plain dict again, as the fold decodes it)."""
    post = _ingest._ADMIT(_raw(**fields), None) if _ingest._ADMIT else None
    if post is None:  # pure Python: what the Python admission journals
        from assay.server._wire import run_in
        from assay.store._journal_admit import _as_text
        from assay.store._runs import _clean

        post = _clean(run_in(_raw(**fields)))
        _as_text([post])
    return dict(post)


def _built(post: dict[str, Any], c_row: Any) -> Any:
    """``_row`` of an admitted post as the fold calls it, with C (``c_row``) or without."""
    saved, _fold_rows._CROW = _fold_rows._CROW, c_row
    try:
        return _fold_rows._row(post, post["id"], _TENANT, "", True, {}, True)
    except Exception as exc:  # noqa: BLE001 - compared by type
        return type(exc)
    finally:
        _fold_rows._CROW = saved


def _python(post: dict[str, Any]) -> Any:
    return _built(post, None)


def _compare(post: dict[str, Any]) -> bool:
    """Whether C took ``post``; fails the test where C and Python disagree."""
    before = copy.deepcopy(post)
    slow = _python(post)
    taken = _fold_rows._CROW(post, _TENANT, "") is not None
    fast = _built(post, _fold_rows._CROW)
    assert post == before  # the journaled post is left as it was
    assert fast == slow, post
    if isinstance(fast, list):  # the same types too (True is 1, 1.0 is 1)
        assert [type(v) for v in fast] == [type(v) for v in slow], post
    return taken


_LLM = {"run_type": "llm", "parent_run_id": None,
        "extra": {"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                               "usage_metadata": {"input_tokens": 120, "output_tokens": 40,
                                                  "total_tokens": 160}}},
        "events": [{"name": "new_token", "time": "2026-11-29T05:30:38.2+00:00"}]}


@needs_c
@pytest.mark.parametrize("fields", [
    {},
    _LLM,
    {"run_type": "llm", "extra": {}, "events": []},  # llm: usage derived, none found
    {"events": [{"name": "new_token", "time": "2026-11-29T05:30:38.2Z"}]},  # a chain's events
    {"outputs": {"usage_metadata": {"input_tokens": 3, "output_tokens": 4}}},  # named: decoded
    {"outputs": {"llm_output": {"token_usage": {"prompt_tokens": 5}}}},
    {"outputs": {"text": "\"usage_metadata\" only as text"}},  # named, not a key: no usage
    {"extra": {"metadata": {"usage_metadata": {"input_tokens": 1}}}},
    {"extra": {"usage_metadata": {"input_tokens": 1}}},  # not under metadata: no usage
    {"end_time": None, "outputs": None},  # pending
    {"error": "Boom", "end_time": None},
    {"error": ""},  # empty: not failed
    {"name": None, "reference_example_id": None, "tags": None, "serialized": None,
     "extra": None, "inputs": None},
])
def test_built_as_python_builds(fields: dict[str, Any]) -> None:
    assert _compare(_admitted(**fields))


@needs_c
@pytest.mark.parametrize("change", [
    {"parent_run_id": str(uuid.uuid4()), "dotted_order": None},  # a child's order kept as is
    {"parent_run_id": str(uuid.uuid4()), "dotted_order": ""},
    {"dotted_order": None},  # a root's order derived
    {"dotted_order": ""},
    {"trace_id": None},  # a root is its own trace
])
def test_orders_and_traces_as_python_sets_them(change: dict[str, Any]) -> None:
    post = _admitted()
    post.update(change)
    assert _compare(post)


@needs_c
@pytest.mark.parametrize("change", [
    {"status": "success"}, {"start_time": "2026-11-29T05:30:38Z"}, {"start_time": 1.5},
    {"start_time": True}, {"end_time": "x"}, {"run_type": None}, {"run_type": 3},
    {"id": 7}, {"inputs": {"q": 1}}, {"inputs": "[1]"}, {"outputs": ""}, {"tags": "{}"},
    {"events": "{}"}, {"extra": 3}, {"trace_id": None, "parent_run_id": "p"},
])
def test_declined_to_python(change: dict[str, Any]) -> None:
    """Each of these is a post C does not take as it is: Python builds it, or both refuse."""
    post = _admitted()
    post.update(change)
    assert not _compare(post)


_VALUES: list[Any] = [
    None, 0, 7, -3, 2 ** 70, 1.5, True, "", "x", "null", "[]", "{}", "[1]", '{"a":1}',
    '{"usage_metadata":{"input_tokens":2}}', '{"metadata":{"usage_metadata":{"output_tokens":1}}}',
    '{"llm_output":{"token_usage":{"total_tokens":9}}}', '[{"name":"new_token","time":"2026-11-'
    '29T05:30:38Z"}]', '[{"name":"new_token","time":"bad"}]', "llm", "chain", [], {}, "é\x00",
    1795930371704000, str(uuid.uuid4()),
]
_FIELDS = ["id", "trace_id", "parent_run_id", "reference_example_id", "name", "run_type",
           "status", "error", "dotted_order", "start_time", "end_time", "inputs", "outputs",
           "extra", "serialized", "events", "tags", "session_id"]


@needs_c
def test_mutated_posts_are_built_as_python_builds_them() -> None:
    rng = random.Random(27)
    base = [_admitted(), _admitted(**_LLM), _admitted(end_time=None, outputs=None),
            _admitted(parent_run_id=str(uuid.uuid4()), run_type="tool")]
    taken = 0
    for _ in range(3000):
        post = dict(rng.choice(base))
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            field = rng.choice(_FIELDS)
            if rng.random() < 0.2:
                post.pop(field, None)
            else:
                post[field] = rng.choice(_VALUES)
        taken += _compare(post)
    assert taken > 600  # C takes a good share; the rest is Python's, compared the same


def test_prebuilt_rows_are_the_rows_python_builds() -> None:
    posts = [_admitted(), _admitted(**_LLM), _admitted(status="x")]
    got: dict[int, list[Any]] = {}
    _fold_rows.prebuilt_rows(posts, _TENANT, got)
    assert id(posts[2]) not in got  # a post with a status takes the general path
    for post in posts[:2]:
        assert got[id(post)] == _python(post)
    if not PURE:
        assert len(got[id(posts[1])]) == len(_fold_rows._FULL_ORDER)  # with its usage
        assert got[id(posts[1])][-3:] == _python(posts[1])[-3:]


@needs_c
def test_a_fold_without_prepared_rows_stores_what_python_stores(
        store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL's fold prepares no rows ahead: its transaction builds them, with C where it
    can. The same admitted runs folded with C and without it store the same columns."""
    from store._stored import stored_runs  # type: ignore[import-not-found]

    monkeypatch.setenv("ASSAY_BACKGROUND_FOLD", "0")
    c_row = _fold_rows._CROW
    fields = [{}, _LLM, {"end_time": None, "outputs": None}, {"error": "Boom"},
              {"outputs": {"usage_metadata": {"input_tokens": 3, "output_tokens": 4}}},
              {"run_type": "tool", "events": [{"name": "new_token",
                                               "time": "2026-11-29T05:30:38.2Z"}]}]
    ids = [str(uuid.uuid4()) for _ in fields]
    got = []
    for use_c in (True, False):
        monkeypatch.setattr(_fold_rows, "_CROW", c_row if use_c else None)
        st = store.for_tenant(str(uuid.uuid4()))
        # as /runs/multipart does; a second apart each, so that they are stored in this order
        posts = [_ingest._ADMIT(_raw(**f, start_time=f"2026-11-29T05:30:3{i}.5Z"), None)
                 for i, f in enumerate(fields)]
        labels = {post["id"]: label for post, label in zip(posts, ids, strict=True)}
        labels.update({post["reference_example_id"]: f"example {i}"
                       for i, post in enumerate(posts)})
        st.journal.admit(posts)
        while st.journal.fold_some(20)[1]:
            pass
        assert st.journal.pending() == 0
        got.append(stored_runs(st, labels))
    assert len(got[0]) == len(fields) and got[0] == got[1]


@pytest.mark.parametrize("outputs", [
    {"content": "answer"},  # nothing about usage: left undecoded
    {"usage_metadata": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}},
    {"llm_output": {"token_usage": {"prompt_tokens": 5, "completion_tokens": 2}}},
    {"note": "the words usage_metadata and llm_output, as text"},
    {"nested": {"usage_metadata": {"input_tokens": 1}}},  # not where derive_usage looks
    {"usage_metadata": "not a mapping"}, {"llm_output": None},
])
@pytest.mark.parametrize("run_type", ["llm", "chain"])
def test_usage_is_derived_from_the_view_as_from_the_whole_run(outputs: dict[str, Any],
                                                               run_type: str) -> None:
    """``usage_view`` leaves an llm run's outputs undecoded when their text names no usage:
    what ``derive_usage`` finds in the view is what it finds in the whole decoded run."""
    from assay._usage import derive_usage_us

    extra = {"metadata": {"ls_provider": "openai", "ls_model_name": "gpt-4o-mini",
                          "usage_metadata": {"input_tokens": 11, "output_tokens": 4}}}
    for ex in (extra, {"metadata": {"ls_model_name": "gpt-4o-mini"}}):
        post = _admitted(run_type=run_type, outputs=outputs, extra=ex, events=[
            {"name": "new_token", "time": "2026-11-29T05:30:38.2+00:00"}])
        view = _fold_usage.usage_view(post)
        assert derive_usage_us(view) == derive_usage_us(_fold_rows.from_text(post))
        named = '"usage_metadata"' in post["outputs"] or '"llm_output"' in post["outputs"]
        assert (view["outputs"] is None) is not named
