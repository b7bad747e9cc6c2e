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


_ENV_EXTRA = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}


def _git_all(cwd: str, *commands: tuple[str, ...]) -> list[str | None]:
    """Run the git commands at once (their start-up dominates), stdout of each or None."""
    env = {**os.environ, **_ENV_EXTRA}
    procs: list[subprocess.Popen[str] | None] = []
    for args in commands:
        try:
            procs.append(subprocess.Popen(["git", *args], cwd=cwd, env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        except OSError:
            procs.append(None)
    out: list[str | None] = []
    for proc in procs:
        if proc is None:
            out.append(None)
            continue
        try:
            stdout, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out.append(None)
            continue
        out.append(stdout.strip() if proc.returncode == 0 else None)
    return out


def _git(cwd: str, *args: str) -> str | None:
    return _git_all(cwd, args)[0]


def _sanitize(url: str | None) -> str | None:
    """Drop credentials from an http(s) remote (``https://user:token@host/...``)."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and "@" in parts.netloc:
        return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return url


def _maybe_in_work_tree(cwd: str) -> bool:
    """False when git surely finds no repository here: no ``.git`` in ``cwd`` or above it and
    no ``GIT_DIR`` telling git where one is. Spares the subprocesses (a fork and an exec each,
    milliseconds of an experiment's CPU) where most experiments outside a checkout run."""
    if os.environ.get("GIT_DIR"):
        return True
    path = Path(cwd)
    return any((p / ".git").exists() for p in (path, *path.parents))


@functools.lru_cache(maxsize=16)
def _cached(cwd: str) -> dict[str, Any] | None:
    if not _maybe_in_work_tree(cwd) or shutil.which("git") is None:
        return None
    # Two rounds of as few subprocesses as give every fact (each costs a fork and exec): one
    # to learn where we are (and the commit and branch), then log, status and remote at once.
    where = _git(cwd, "rev-parse", "--is-inside-work-tree", "--show-toplevel", "HEAD",
                 "--abbrev-ref", "HEAD")
    if where is None:  # not a work tree, or one without commits (no HEAD to show)
        where = _git(cwd, "rev-parse", "--is-inside-work-tree", "--show-toplevel")
    lines = (where or "").split("\n")
    if lines[0] != "true":
        return None
    toplevel = lines[1] if len(lines) > 1 and lines[1] else None
    commit = lines[2] if len(lines) > 2 and lines[2] else None
    branch = lines[3] if len(lines) > 3 and lines[3] else None
    tags: list[str] = []
    if commit:
        log, status, remote = _git_all(
            cwd, ("log", "-1", "--format=%an%x00%ae%x00%cI%x00%D"),
            ("status", "--porcelain", "--untracked-files=no"), ("remote", "get-url", "origin"))
    else:
        branch, status, remote = _git_all(cwd, ("symbolic-ref", "--short", "HEAD"),
                                          ("status", "--porcelain", "--untracked-files=no"),
                                          ("remote", "get-url", "origin"))
        log = None
    author_name = author_email = commit_time = None
    if log:
        author_name, author_email, commit_time, refs = (log.split("\x00") + [None] * 4)[:4]
        # the refs at HEAD ("HEAD -> main, tag: v1, origin/main"): its tags, as `tag --points-at`
        tags = sorted(r[5:] for r in (refs or "").split(", ") if r.startswith("tag: "))
    if remote is None:
        remotes = (_git(cwd, "remote") or "").split()
        remote = _git(cwd, "remote", "get-url", remotes[0]) if remotes else None
    return {
        "tags": ",".join(tags) if tags else None,
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

