"""Git facts about the code under evaluation, recorded in the experiment's metadata.

Same keys as LangSmith's ``git`` metadata (tags, dirty, branch, commit, repo_name, remote_url,
author_name, commit_time, author_email). Outside a work tree, or without a ``git`` binary, there
is no ``git`` key at all rather than a dict of nulls: "not in a repository" is not the same as
"in a repository with unknown facts".
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["git_info"]


def _git(cwd: str, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip()


def _sanitize(url: str | None) -> str | None:
    """Drop credentials from an http(s) remote (``https://user:token@host/...``)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url


@functools.lru_cache(maxsize=16)
def _cached(cwd: str) -> dict[str, Any] | None:
    if shutil.which("git") is None:
        return None
    if _git(cwd, "rev-parse", "--is-inside-work-tree") != "true":
        return None
    commit = _git(cwd, "rev-parse", "HEAD")  # None in a repository without commits
    log = _git(cwd, "log", "-1", "--format=%an%x00%ae%x00%cI") if commit else None
    author_name = author_email = commit_time = None
    if log:
        author_name, author_email, commit_time = (log.split("\x00") + [None, None, None])[:3]
    branch = _git(cwd, "rev-parse", "--abbrev-ref", "HEAD") if commit else (
        _git(cwd, "symbolic-ref", "--short", "HEAD"))
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    tags = _git(cwd, "tag", "--points-at", "HEAD") if commit else None
    toplevel = _git(cwd, "rev-parse", "--show-toplevel")
    remote = _git(cwd, "remote", "get-url", "origin")
    if remote is None:
        remotes = (_git(cwd, "remote") or "").split()
        remote = _git(cwd, "remote", "get-url", remotes[0]) if remotes else None
    return {
        "tags": ",".join(tags.split()) if tags else None,
        "dirty": bool(status) if status is not None else None,
        "branch": branch or None,
        "commit": commit,
        "repo_name": Path(toplevel).name if toplevel else None,
        "remote_url": _sanitize(remote),
        "author_name": author_name or None,
        "commit_time": commit_time or None,
        "author_email": author_email or None,
    }


def git_info(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """The git facts of ``cwd`` (default: the current directory), or None outside a work tree.

    Cached per directory for the life of the process: an experiment's code does not change
    commit while it runs, and git subprocesses cost milliseconds.
    """
    return _cached(str(Path(cwd or os.getcwd()).resolve()))
