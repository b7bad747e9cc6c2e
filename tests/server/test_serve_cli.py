"""``assay serve`` and ``assay keys`` as real processes, the way a team runs them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from ._wire import make_run

ASSAY = [str(Path(sys.executable).parent / "assay")]  # the installed console script


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(proc: subprocess.Popen[str], url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "assay serve did not come up"
        time.sleep(0.1)


def test_assay_serve_with_workers_keys_and_body_limit(sqlite_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    env["ASSAY_AUTH_CACHE_TTL"] = "0.5"  # a key revoked by another process: refused within it
    made = subprocess.run([*ASSAY, "keys", "create", "--workspace", "team", "--db", sqlite_url],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("asy_") and "not shown again" in made.stderr
    port = _free_port()
    proc = subprocess.Popen([*ASSAY, "serve", "--db", sqlite_url, "--port", str(port),
                             "--workers", "2", "--max-body-bytes", "4096", "--log-level",
                             "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(proc, url)
        h = {"x-api-key": key}
        info = httpx.get(f"{url}/info").json()
        assert info["batch_ingest_config"]["size_limit_bytes"] <= 4096
        for i in range(4):  # several requests, served by either worker
            run = make_run(f"r{i}", session="cli")
            assert httpx.post(f"{url}/runs", json=run, headers=h).status_code == 202
        stats = httpx.get(f"{url}/sessions", params={"name": "cli", "include_stats": True},
                          headers=h).json()[0]
        assert stats["run_count"] == 4
        big = httpx.post(f"{url}/runs", json=make_run(inputs={"x": "y" * 5000}), headers=h)
        assert big.status_code == 413 and "4096" in big.json()["detail"]
        assert httpx.get(f"{url}/sessions").status_code == 401
        listed = subprocess.run([*ASSAY, "keys", "list", "--db", sqlite_url, "--json"],
                                capture_output=True, text=True, env=env, timeout=60, check=False)
        key_id = next(k["id"] for k in json.loads(listed.stdout) if k["workspace"] == "team")
        revoked = subprocess.run([*ASSAY, "keys", "revoke", key_id, "--db", sqlite_url],
                                 capture_output=True, text=True, env=env, timeout=60, check=False)
        assert revoked.returncode == 0, revoked.stderr
        refused_by = time.monotonic() + 3  # the workers' cached authentications expire
        while httpx.get(f"{url}/sessions", headers=h).status_code != 401:
            assert time.monotonic() < refused_by, "revoked key still accepted after the TTL"
            time.sleep(0.1)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_assay_serve_no_auth_serves_the_default_workspace(tmp_path: Path) -> None:
    """A one-person server: no key needed, and it sees what the local Client wrote."""
    from assay.client import Client

    db = tmp_path / "local.db"
    Client(database_url=db).create_dataset("mine")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    refused = subprocess.run([*ASSAY, "serve", "--db", str(db), "--no-auth", "--host", "0.0.0.0"],
                             capture_output=True, text=True, env=env, timeout=60, check=False)
    assert refused.returncode == 2 and "only listens on 127.0.0.1" in refused.stdout
    port = _free_port()
    proc = subprocess.Popen([*ASSAY, "serve", "--db", str(db), "--port", str(port), "--no-auth",
                             "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(proc, url)
        assert [d["name"] for d in httpx.get(f"{url}/datasets").json()] == ["mine"]
        page = httpx.get(f"{url}/")
        assert page.status_code == 200 and "mine" in page.text and "login" not in str(page.url)
        # no keys: a page of another site cannot post to it (the UI's forms, the API), and a
        # DNS-rebinding name (another Host) gets no answer at all
        ds = httpx.get(f"{url}/datasets").json()[0]["id"]
        crossed = httpx.post(f"{url}/datasets/{ds}/share",
                             headers={"Origin": "http://evil.example"})
        assert crossed.status_code == 403 and "cannot change it" in crossed.text
        form = httpx.post(f"{url}/ui/datasets/{ds}/share", data={},
                          headers={"Origin": "http://evil.example"})
        assert form.status_code == 403
        rebound = httpx.get(f"{url}/datasets", headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 421 and "mine" not in rebound.text
        same = httpx.post(f"{url}/datasets", json={"name": "from-the-ui"},
                          headers={"Origin": url})  # the server's own page
        assert same.status_code == 200, same.text
        assert httpx.post(f"{url}/datasets", json={"name": "from-a-script"}).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of ``pid``'s child processes (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == pid:
            out.append((int(entry.name), cmd))
    return out


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":  # exited, not yet reaped by its (dead) parent's successor
            return True
        time.sleep(0.05)
    return False


def _counts(db: str, session: str) -> tuple[int, int]:
    """(journal rows, runs of ``session``) read straight from the database: an API read would
    fold first."""
    query = ("SELECT (SELECT count(*) FROM journal), (SELECT count(*) FROM runs r JOIN sessions "
             "s ON s.id = r.session_id WHERE s.name = {})")
    if db.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db.replace("postgresql+psycopg://", "postgresql://")) as conn:
            row = conn.execute(query.format("%s"), (session,)).fetchone()
    else:
        from assay.store import sqlite_driver

        conn = sqlite_driver().connect(db.removeprefix("sqlite:///"), timeout=30)
        try:
            row = conn.execute(query.format("?"), (session,)).fetchone()
        finally:
            conn.close()
    assert row is not None
    return int(row[0]), int(row[1])


def _indexed_unread(db: str, session: str, n: int) -> None:
    """Wait until the journal is empty and ``session`` holds ``n`` runs, reading nothing
    through the store (whose reads fold)."""
    deadline = time.monotonic() + 30
    while _counts(db, session) != (0, n):
        assert time.monotonic() < deadline, _counts(db, session)
        time.sleep(0.05)


def _serve_no_auth(db: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSAY_")}
    port = _free_port()
    proc = subprocess.Popen([*ASSAY, "serve", "--db", str(db), "--port", str(port), "--no-auth",
                             "--log-level", "warning", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    _wait_until_up(proc, url)
    return proc, url


def _post_batch(url: str, n: int, session: str) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    posts = [make_run(f"r{i}", session=session, start=start, end_time="2026-01-01T00:00:01Z")
             for i in range(n)]
    assert httpx.post(f"{url}/runs/batch", json={"post": posts}).status_code == 202


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_assay_serve_indexes_in_a_fold_process_of_its_own(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A fold process beside the worker (the default, ``--fold auto``, on both backends;
    PostgreSQL's asked for by name) folds what ingest journals with no read asking for it;
    killed, reads still fold and the server starts another; and it does not outlive a server
    killed with SIGKILL."""
    db = (f"sqlite:///{tmp_path / 'served.db'}" if backend == "sqlite"
          else request.getfixturevalue("pg_url"))
    extra = ("--fold", "process") if backend == "postgres" else ()
    tag = uuid.uuid4().hex[:8]
    proc, url = _serve_no_auth(db, *extra)
    try:
        folders = [(pid, cmd) for pid, cmd in _children(proc.pid) if "_fold_process" in cmd]
        assert len(folders) == 1, _children(proc.pid)
        folder = folders[0][0]
        _post_batch(url, 50, f"by-the-fold-process-{tag}")
        _indexed_unread(db, f"by-the-fold-process-{tag}", 50)

        os.kill(folder, 9)  # the fold process dies: the server goes on, reads fold
        assert _gone(folder, 10)
        _post_batch(url, 30, f"after-it-{tag}")
        stats = httpx.get(f"{url}/sessions", params={"name": f"after-it-{tag}",
                                                     "include_stats": True}).json()[0]
        assert stats["run_count"] == 30
        assert _counts(db, f"after-it-{tag}") == (0, 30)
        # and the server starts another, which indexes again with nobody reading
        deadline = time.monotonic() + 20
        while not (again := [pid for pid, cmd in _children(proc.pid)
                             if "_fold_process" in cmd and pid != folder]):
            assert time.monotonic() < deadline, "no fold process started again"
            time.sleep(0.1)
        _post_batch(url, 20, f"by-the-next-{tag}")
        _indexed_unread(db, f"by-the-next-{tag}", 20)
        assert again
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    proc, url = _serve_no_auth(db, *extra)
    folder = next(pid for pid, cmd in _children(proc.pid) if "_fold_process" in cmd)
    proc.kill()  # no chance to stop its fold process: that one notices and exits
    proc.wait(timeout=10)
    assert _gone(folder, 10), "the fold process outlived its server"


def test_the_fold_process_starts_with_the_store_alone() -> None:
    """The fold process (``python -m assay.store._fold_process``) imports the store and not the
    web app: as ``assay.server._fold_process`` it started by importing the whole app (the
    server package's ``__init__``)."""
    code = ("import sys, assay.store._fold_process, assay.store._fold_ready; "
            "print([m for m in ('fastapi', 'starlette', 'assay.server') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_assay_serve_fold_thread_folds_in_a_thread_of_the_worker(tmp_path: Path) -> None:
    """``--fold thread``: no fold process; the worker's own folder thread indexes, unasked."""
    db = f"sqlite:///{tmp_path / 'served.db'}"
    proc, url = _serve_no_auth(db, "--fold", "thread")
    try:
        assert not [cmd for _, cmd in _children(proc.pid) if "_fold_process" in cmd]
        _post_batch(url, 40, "by-the-thread")
        _indexed_unread(db, "by-the-thread", 40)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
