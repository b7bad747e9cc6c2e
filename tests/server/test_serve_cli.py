"""``assay serve`` and ``assay keys`` as real processes, the way a team runs them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

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
    finally:
        proc.terminate()
        proc.wait(timeout=30)
