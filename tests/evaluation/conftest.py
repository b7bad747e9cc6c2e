"""Helpers shared by the experiment tests."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from assay.client import Client
from assay.store import Store

ROOT = Path(__file__).resolve().parents[2]


def make_dataset(client: Client, name: str, n: int, *, split: str | None = None) -> str:
    ds = client.create_dataset(name)
    client.create_examples(dataset_id=ds.id, examples=[
        {"inputs": {"x": i}, "outputs": {"y": 2 * i}, **({"split": split} if split else {})}
        for i in range(n)])
    return str(ds.id)


@pytest.fixture
def tenant_env(store: Store, store_url: str) -> dict[str, str]:
    """Environment for a subprocess that must see the same store and workspace as ``store``."""
    env = dict(os.environ)
    env["ASSAY_DATABASE_URL"] = store_url
    env["ASSAY_TEST_TENANT"] = store.tenant_id
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_python(code: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> str:
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"
