"""Git metadata: every key inside a work tree, no git key at all outside one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from assay.client import Client
from assay.evaluation import git_info


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit_one(repo: Path, branch: str = "main") -> None:
    """A fresh repository at ``repo`` with one commit by Ada on ``branch``."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", branch)
    git(repo, "config", "user.name", "Ada")
    git(repo, "config", "user.email", "ada@example.com")
    (repo / "a.txt").write_text("1")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "one")


def test_outside_a_repository_there_is_nothing(tmp_path: Path) -> None:
    assert git_info(tmp_path) is None


def test_outside_a_repository_no_git_process_is_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``.git`` here or above and no ``GIT_DIR``: git would find nothing, so it is not run
    (a ``git`` first on PATH records every call)."""
    from assay.evaluation import _git

    calls = tmp_path / "calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexit 128\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("GIT_DIR", raising=False)
    outside = tmp_path / "work"
    outside.mkdir()
    _git._cached.cache_clear()
    assert git_info(outside) is None and not calls.exists()
    (outside / ".git").mkdir()  # something git may take for a repository: it is asked
    _git._cached.cache_clear()
    assert git_info(outside) is None and calls.exists()


def test_a_worktree_and_git_dir_are_repositories(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A linked worktree has a ``.git`` file, not a directory; ``GIT_DIR`` names a repository
    elsewhere: both give the facts."""
    from assay.evaluation import _git

    repo = tmp_path / "main-repo"
    _commit_one(repo)
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    info = git_info(tmp_path / "wt")
    assert info is not None and info["branch"] == "side"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    _git._cached.cache_clear()
    info = git_info(elsewhere)
    assert info is not None and info["commit"] == git(repo, "rev-parse", "HEAD")


def test_inside_a_repository(tmp_path: Path) -> None:
    repo = tmp_path / "my-agent"
    _commit_one(repo, "feature/x")
    git(repo, "tag", "v1.0")
    git(repo, "tag", "-a", "release", "-m", "annotated tags count too")
    git(repo, "remote", "add", "origin", "https://user:secret@example.com/org/my-agent.git")
    info = git_info(repo)
    assert info == {
        "tags": "release,v1.0",
        "dirty": False,
        "branch": "feature/x",
        "commit": git(repo, "rev-parse", "HEAD"),
        "repo_name": "my-agent",
        "remote_url": "https://example.com/org/my-agent.git",  # credentials dropped
        "author_name": "Ada",
        "commit_time": git(repo, "log", "-1", "--format=%cI"),
        "author_email": "ada@example.com",
    }
    sub = repo / "pkg"
    sub.mkdir()
    (repo / "a.txt").write_text("2")
    fresh = git_info(sub)  # another directory of the same repo: read afresh
    assert fresh is not None and fresh["dirty"] is True and fresh["repo_name"] == "my-agent"


def test_repository_without_commits(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    info = git_info(tmp_path)
    assert info is not None and info["commit"] is None and info["branch"] == "main"


def test_experiment_metadata_has_no_git_key_outside_a_repo(tmp_path: Path, client,
                                                           monkeypatch) -> None:
    from assay import evaluate

    monkeypatch.chdir(tmp_path)
    res = evaluate(lambda i: i, data=[{"inputs": {"a": 1}}], client=client)
    meta = client.read_project(project_id=res.experiment_id).metadata
    assert "git" not in meta
    assert {"revision_id", "dataset_version", "dataset_splits", "num_repetitions"} <= set(meta)


class _Stop(BaseException):
    """Stops an experiment (an Exception would only be recorded on the run)."""


def test_an_experiment_records_git_facts_even_when_it_stops(
        client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The facts are read while the examples run (git subprocesses are slow), yet they land
    whether the experiment finishes or is stopped midway; outside a work tree there are none."""
    from assay import evaluate

    repo = tmp_path / "agent"
    _commit_one(repo)
    ds = client.create_dataset("d")
    client.create_examples(dataset_id=ds.id, examples=[{"inputs": {"x": i}} for i in range(3)])
    monkeypatch.chdir(repo)
    done = evaluate(lambda inputs: inputs, data="d", client=client, experiment_prefix="done")

    def stop(inputs: dict) -> dict:
        raise _Stop

    with pytest.raises(_Stop):
        evaluate(stop, data="d", client=client, experiment_prefix="stopped")
    monkeypatch.chdir(tmp_path)  # not a work tree
    outside = evaluate(lambda inputs: inputs, data="d", client=client, experiment_prefix="out")

    commit = git(repo, "rev-parse", "HEAD")
    finished = client.read_project(project_name=done.experiment_name)
    assert finished.metadata["git"]["commit"] == commit and finished.end_time is not None
    (stopped,) = [p for p in client.list_projects() if p.name.startswith("stopped-")]
    assert stopped.metadata["git"]["commit"] == commit and stopped.end_time is None
    assert stopped.metadata["dataset_version"]  # what resuming needs was there from the start
    assert "git" not in client.read_project(project_name=outside.experiment_name).metadata
