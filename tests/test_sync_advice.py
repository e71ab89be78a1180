"""What `filemem sync`, `filemem clone` and `filemem remote add` say when a remote is
unusable: each refusal is true (nothing was done), and its advice, followed, works.

Real stores, real git, the real `filemem` CLI.
"""

from __future__ import annotations

import json
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
