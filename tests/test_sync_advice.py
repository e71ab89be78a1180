"""What `filemem sync`, `filemem clone` and `filemem remote add` say when a remote is
unusable: each refusal is true (nothing was done), and its advice, followed, works.

Real stores, real git, the real `filemem` CLI.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.conftest import git, run_cli


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()


def cli(*args: str, store: Path, code: int = 0, env: dict[str, str] | None = None) -> str:
    out = run_cli(*args, store=store, env=env)
    assert out.returncode == code, (args, out.returncode, out.stdout, out.stderr)
    return out.stdout + out.stderr


def entries(store: Path) -> list[str]:
    return sorted(e["text"] for e in json.loads(cli("list", "--json", store=store)))


def two_stores(tmp_path: Path) -> tuple[Path, Path]:
    """Store A (one entry) and store B (four others): two working stores, unrelated."""
    a, b = tmp_path / "a", tmp_path / "b"
    cli("init", str(a), store=a)
    cli("init", str(b), store=b)
    cli("add", "--yes", "--scope", "user-global", "a fact", store=a)
    for i in range(4):
        cli("add", "--yes", "--scope", "user-global", f"b fact {i}", store=b)
    return a, b


def test_a_working_store_as_remote_is_refused_before_anything_happens(tmp_path: Path) -> None:
    a, b = two_stores(tmp_path)
    before, known = head(a), entries(a)
    # filemem's own `remote add` refuses it, and adds nothing
    out = cli("remote", "add", "nb", str(b), store=a, code=1)
    assert "BAD_REMOTE" in out and "nothing was added" in out and "bare" in out
    assert "nb" not in git(a, "remote").split()
    # one added by git itself (or an older filemem): the sync refuses before it fetches
    git(a, "remote", "add", "nb", str(b))
    out = cli("sync", "nb", store=a, code=1)
    assert "BAD_REMOTE" in out and "nothing was fetched, merged or pushed" in out
    assert head(a) == before and entries(a) == known
    assert git(a, "for-each-ref", "refs/remotes").strip() == ""  # nothing fetched
    assert git(a, "cat-file", "-t", head(b), check=False) == ""  # B's commit is not here
    assert git(a, "status", "--porcelain").strip() == ""
    # the advice: a bare repository, this remote replaced by it, both stores synced with it
    bare = tmp_path / "memory.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    for advised in ("filemem remote remove nb", "filemem remote add nb PATH",
                    "filemem sync nb", f"in the store at {b} `filemem remote add origin PATH`"):
        assert advised in out, advised
    cli("remote", "remove", "nb", store=a)
    cli("remote", "add", "nb", str(bare), store=a)
    cli("sync", "nb", store=a)
    cli("remote", "add", "origin", str(bare), store=b)
    cli("sync", store=b)
    cli("sync", "nb", store=a)
    assert entries(a) == entries(b) == ["a fact", *(f"b fact {i}" for i in range(4))]
    assert head(a) == head(b)


def test_clone_of_a_wrong_url_says_to_check_it(tmp_path: Path) -> None:
    target = tmp_path / "desk"
    out = cli("clone", str(tmp_path / "typo.git"), str(target), store=target, code=1)
    assert "REMOTE_UNREACHABLE" in out and "Check the URL" in out
    assert "`filemem sync` on the machine that has it" in out
    assert "git init --bare" not in out  # an empty repository there cannot be cloned either
    assert not target.exists()


def test_a_remote_that_is_no_store_names_remote_remove(tmp_path: Path) -> None:
    other = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(other))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(other), str(work))
    (work / "notes.txt").write_text("not a store")
    git(work, "add", "notes.txt")
    git(work, "commit", "-qm", "notes")
    git(work, "push", "-q", "origin", "HEAD:main")
    a = tmp_path / "a"
    cli("init", str(a), store=a)
    cli("add", "--yes", "--scope", "user-global", "a fact", store=a)
    cli("remote", "add", "wrong", str(other), store=a)
    out = cli("sync", "wrong", store=a, code=1)
    assert "REMOTE_NOT_A_STORE" in out and "nothing was changed" in out
    assert "`filemem remote remove wrong`" in out


def test_an_unreachable_ssh_remote_is_quoted_without_a_carriage_return(tmp_path: Path) -> None:
    # ssh's own words end in "\r\n": a stand-in for ssh that says what it says for an
    # unknown host
    ssh = tmp_path / "fake-ssh"
    ssh.write_text("#!/bin/sh\nprintf 'ssh: Could not resolve hostname nohost.invalid: "
                   "Name or service not known\\r\\n' >&2\nexit 255\n")
    ssh.chmod(ssh.stat().st_mode | stat.S_IXUSR)
    a = tmp_path / "a"
    cli("init", str(a), store=a)
    cli("remote", "add", "bad", "nohost.invalid:path", store=a)
    env = {"GIT_SSH_COMMAND": str(ssh)}
    out = run_cli("sync", "--json", "bad", store=a, env=env)
    message = json.loads(out.stdout)["error"]["message"]
    assert message.endswith("Could not resolve hostname nohost.invalid: Name or service "
                            "not known"), repr(message)
    text = cli("sync", "bad", store=a, code=1, env=env)
    assert "\\r" not in text and "\r" not in text
