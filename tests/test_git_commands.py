"""git's own commands in a store (issue 11, point 2), with the real git CLI.

(a) After `filemem clone` and `filemem remote add`, a plain `git pull` and `git push` work:
the branch tracks the remote `filemem sync` uses, a pull merges (no "divergent branches"
stop, no rebase of the audit commits), and filemem's sync and git's push/pull agree on the
remote-tracking ref. (b) A store in the middle of a git merge, rebase, cherry-pick, revert,
`git am` or bisect refuses every write (CLI, MCP, bridge, the owner's commands) before
anyone is asked, `filemem status` says why in memory terms, reads go on, and filemem never
commits on top of the unfinished operation.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.owner import clone
from tests.conftest import GIT, run_cli

UG = {"track": "user", "scope": "user-global"}
UG_ARGS = ["--track", "user", "--scope", "user-global"]

pytestmark = pytest.mark.skipif(GIT is None, reason="git CLI not installed")


def g(path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The git CLI in ``path`` as a person runs it, without their global or system config
    (so a `pull.rebase` of the machine's owner cannot decide what these tests see)."""
    assert GIT is not None
    env = {**os.environ, "GIT_AUTHOR_NAME": "Test Person", "GIT_AUTHOR_EMAIL": "p@example.org",
           "GIT_COMMITTER_NAME": "Test Person", "GIT_COMMITTER_EMAIL": "p@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_EDITOR": "true",
           "GIT_MERGE_AUTOEDIT": "no"}
    out = subprocess.run([GIT, "-C", str(path), *args], capture_output=True, text=True,
                         env=env)
    if check and out.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({out.returncode}):\n"
                             f"{out.stdout}\n{out.stderr}")
    return out


def head(path: Path, ref: str = "HEAD") -> str:
    return g(path, "rev-parse", ref).stdout.strip()


def add(store: Path, text: str) -> dict[str, Any]:
    with filemem.open_store(store, write_policy="auto") as p:
        return dict(p.add({**UG, "text": text},
                          filemem.write_context(session_id="s", cwd=str(store.parent)))["entry"])


def replace(store: Path, match: str, text: str) -> None:
    with filemem.open_store(store, write_policy="auto") as p:
        p.replace({**UG, "match": match, "text": text},
                  filemem.write_context(session_id="s", cwd=str(store.parent)))


def texts(store: Path) -> list[str]:
    with filemem.open_store(store) as p:
        return sorted(e["text"] for e in p.list_entries())


def published(tmp_path: Path) -> tuple[Path, Path]:
    """A bare remote and a store `a` published there with `filemem remote add` + `sync`."""
    remote = tmp_path / "remote.git"
    g(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    a = tmp_path / "a"
    filemem.init_store(a).close()
    add(a, "Prefers English")
    out = run_cli("remote", "add", "origin", str(remote), store=a)
    assert out.returncode == 0, out.stderr
    assert run_cli("sync", store=a).returncode == 0
    return remote, a


# ---------------------------------------------------------------- (a) git pull / git push


def test_clone_and_remote_add_set_up_git_pull_and_push(tmp_path: Path) -> None:
    remote, a = published(tmp_path)
    for key, value in (("branch.main.remote", "origin"), ("branch.main.merge",
                                                           "refs/heads/main"),
                       ("pull.rebase", "false")):
        assert g(a, "config", key).stdout.strip() == value
    b = Path(clone(str(remote), str(tmp_path / "b")))
    assert g(b, "config", "branch.main.remote").stdout.strip() == "origin"
    assert "Your branch is up to date with 'origin/main'" in g(b, "status").stdout
    assert head(b, "origin/HEAD") == head(b)  # `git log origin` works, as after `git clone`

    # a fast-forward both ways with git alone
    add(a, "Uses fish")
    push = g(a, "push")
    assert head(remote, "main") == head(a) == head(a, "origin/main"), push.stderr
    assert g(b, "pull").returncode == 0
    assert head(b) == head(a)
    assert texts(b) == ["Prefers English", "Uses fish"]

    # diverged: a plain `git pull` merges (no "divergent branches" stop), `git push` sends it
    add(b, "Works on the api repo")
    add(a, "Runs tests with make test")
    g(b, "push")
    pull = g(a, "pull")
    assert "divergent" not in pull.stderr + pull.stdout
    assert len(g(a, "log", "-1", "--format=%P").stdout.split()) == 2  # a merge commit
    assert texts(a) == ["Prefers English", "Runs tests with make test", "Uses fish",
                        "Works on the api repo"]
    g(a, "push")
    assert head(remote, "main") == head(a)
    assert g(a, "status", "--porcelain").stdout == ""
    # filemem agrees with what git did: nothing to sync, the tracking ref where git left it
    out = run_cli("sync", "--json", store=a)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["upToDate"] is True
    assert head(a, "origin/main") == head(remote, "main")
    assert run_cli("verify", store=a).returncode == 0  # git's merge: made outside filemem


def test_filemem_sync_keeps_the_tracking_ref_git_reads(tmp_path: Path) -> None:
    remote, a = published(tmp_path)
    b = Path(clone(str(remote), str(tmp_path / "b")))
    add(b, "from b")
    assert run_cli("sync", store=b).returncode == 0
    assert head(b, "origin/main") == head(remote, "main") == head(b)
    assert "Your branch is up to date with 'origin/main'" in g(b, "status").stdout
    add(a, "from a")
    assert run_cli("sync", store=a).returncode == 0  # fetch, merge, push
    assert head(a, "origin/main") == head(remote, "main") == head(a)
    assert "Your branch is up to date with 'origin/main'" in g(a, "status").stdout
    g(b, "fetch")  # git's own fetch and filemem's agree: b is behind by what a pushed
    assert "Your branch is behind 'origin/main'" in g(b, "status").stdout
    assert g(b, "pull").returncode == 0 and head(b) == head(a)


def test_the_upstream_follows_the_remote_sync_would_use(tmp_path: Path) -> None:
    _remote, a = published(tmp_path)
    other = tmp_path / "other.git"
    g(tmp_path, "init", "-q", "--bare", "-b", "main", str(other))
    assert run_cli("remote", "add", "backup", str(other), store=a).returncode == 0
    assert g(a, "config", "branch.main.remote").stdout.strip() == "origin"  # kept
    assert run_cli("remote", "remove", "origin", store=a).returncode == 0
    # as `git remote remove` does, the upstream goes; the one remote left is sync's default
    assert g(a, "config", "branch.main.remote").stdout.strip() == "backup"
    g(a, "push")
    assert head(other, "main") == head(a)
    assert run_cli("remote", "remove", "backup", store=a).returncode == 0
    assert g(a, "config", "branch.main.remote", check=False).returncode == 1  # unset


def test_a_store_set_up_before_gets_tracking_at_its_next_sync(tmp_path: Path) -> None:
    remote, a = published(tmp_path)
    g(a, "config", "--unset", "branch.main.remote")
    g(a, "config", "--unset", "branch.main.merge")
    g(a, "config", "pull.ff", "only")  # the owner's own choice of how to pull stays
    g(a, "config", "--unset", "pull.rebase")
    assert g(a, "push", check=False).returncode != 0  # no upstream
    assert run_cli("sync", store=a).returncode == 0
    assert g(a, "config", "branch.main.remote").stdout.strip() == "origin"
    assert g(a, "config", "pull.rebase", check=False).returncode == 1
    assert g(a, "config", "pull.ff").stdout.strip() == "only"
    add(a, "after")
    g(a, "push")
    assert head(remote, "main") == head(a)
