"""A second machine joining a store, and filemem.yaml changed on two machines.

Real bare remotes in tmp, real git, the real `filemem` CLI: the README's join sequence
(`filemem init`, `filemem remote add`, `filemem sync` on a machine whose remote already
holds a store), stores that are not new, and filemem.yaml merged key by key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from filemem.owner import filemerge
from tests.conftest import assert_clean_repo, git, run_cli

TEMPLATE = (Path(__file__).resolve().parents[1] / "store-template" / "filemem.yaml").read_bytes()


def head(path: Path, ref: str = "HEAD") -> str:
    return git(path, "rev-parse", ref).strip()


def cli(*args: str, store: Path, code: int = 0) -> str:
    out = run_cli(*args, store=store)
    assert out.returncode == code, (args, out.returncode, out.stdout, out.stderr)
    return out.stdout + out.stderr


def edit_config(store: Path, old: str, new: str, message: str = "config") -> None:
    """What the README says: edit filemem.yaml, then commit it with git."""
    cfg = store / "filemem.yaml"
    text = cfg.read_text(encoding="utf-8")
    assert old in text, (old, text)
    cfg.write_text(text.replace(old, new, 1), encoding="utf-8")
    git(store, "commit", "-qm", message, "filemem.yaml")


def budgets(store: Path) -> dict[str, int]:
    rows = json.loads(cli("budgets", "--json", store=store))
    return {f"{r['track']}/{r['scope']}": r["limit"] for r in rows}


def verified(store: Path) -> dict[str, Any]:
    out = run_cli("verify", "--json", store=store)
    report: dict[str, Any] = json.loads(out.stdout)
    assert out.returncode == 0 and report["ok"], report["problems"]
    return report


@pytest.fixture
def published(tmp_path: Path) -> tuple[Path, Path]:
    """Machine A: a store with budgets of its own and an entry, published to a bare remote."""
    remote = tmp_path / "usb" / "memory.git"
    remote.parent.mkdir()
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    a = tmp_path / "laptop"
    cli("init", str(a), store=a)
    edit_config(a, "userGlobal: 2000", "userGlobal: 5000", "budgets")
    cli("add", "--yes", "--scope", "user-global", "Prefers replies in English", store=a)
    cli("remote", "add", "origin", str(remote), store=a)
    assert "Pushed 3 commits to origin" in cli("sync", store=a)
    return a, remote


# ---------------------------------------------------------------- joining


def test_the_readme_join_sequence_keeps_the_shared_budgets(tmp_path: Path,
                                                           published: tuple[Path, Path]) -> None:
    a, remote = published
    b = tmp_path / "desktop"
    cli("init", str(b), store=b)
    own_first = head(b)
    cli("remote", "add", "origin", str(remote), store=b)
    out = cli("sync", store=b)
    assert "Took origin/main as it is: this store held nothing yet but its creation " \
           "(3 commits, 1 entry; files: filemem.yaml)." in out
    assert "Pushed" not in out and "conflict" not in out
    assert head(b) == head(a) == head(remote, "main")  # the remote's history, nothing added
    assert (b / "filemem.yaml").read_bytes() == (a / "filemem.yaml").read_bytes()
    assert budgets(b)["user/user-global"] == 5000
    assert own_first not in git(remote, "rev-list", "--all")  # B's default config never left
    assert "Already up to date" in cli("sync", store=a)
    assert budgets(a)["user/user-global"] == 5000
    assert_clean_repo(b)
    git(remote, "fsck", "--strict")
    verified(a)
    verified(b)
    listed = json.loads(cli("list", "--json", store=b))
    assert [e["text"] for e in listed] == ["Prefers replies in English"]
    # and the two machines go on as usual
    cli("add", "--yes", "--scope", "user-global", "Uses fish", store=b)
    assert "Pushed 1 commit" in cli("sync", store=b)
    assert "Fast-forwarded" in cli("sync", store=a)
    assert budgets(a)["user/user-global"] == budgets(b)["user/user-global"] == 5000


def test_a_new_store_with_hand_edits_is_not_replaced(tmp_path: Path,
                                                     published: tuple[Path, Path]) -> None:
    a, remote = published
    b = tmp_path / "desktop"
    cli("init", str(b), store=b)
    cli("remote", "add", "origin", str(remote), store=b)
    note = b / "user" / "user-global" / "_shared" / "mine.md"
    note.parent.mkdir(parents=True)
    note.write_text("Typed here before the first sync", encoding="utf-8")
    before, remote_before = head(b), head(remote, "main")
    out = cli("sync", store=b, code=3)
    assert "WRITE_DENIED" in out and "mine.md" in out
    assert "`filemem adopt`" in out and "`filemem discard`" in out and "filemem clone" in out
    assert head(b) == before and head(remote, "main") == remote_before
    assert note.read_text(encoding="utf-8") == "Typed here before the first sync"
    cli("adopt", "--yes", store=b)  # keep it: the store is no longer new, so it merges
    out = cli("sync", store=b)
    assert "Merged 3 commits from origin/main" in out and "conflict" not in out
    assert budgets(b)["user/user-global"] == 5000  # A's budget, B never changed it
    texts = sorted(e["text"] for e in json.loads(cli("list", "--json", store=b)))
    assert texts == ["Prefers replies in English", "Typed here before the first sync"]
    cli("sync", store=a)
    verified(a)
    verified(b)


def test_a_new_store_whose_config_edit_is_discarded_then_joins(
        tmp_path: Path, published: tuple[Path, Path]) -> None:
    _a, remote = published
    b = tmp_path / "desktop"
    cli("init", str(b), store=b)
    cli("remote", "add", "origin", str(remote), store=b)
    cfg = b / "filemem.yaml"
    cfg.write_text(cfg.read_text().replace("language: en", "language: zh"))
    assert "filemem.yaml" in cli("sync", store=b, code=3)
    cli("discard", "--yes", store=b)
    assert "Took origin/main as it is" in cli("sync", store=b)
    assert head(b) == head(remote, "main")
    assert_clean_repo(b)


@pytest.mark.parametrize("history", ["denied write", "git commit", "removed entry"])
def test_a_store_with_any_history_of_its_own_is_merged_not_replaced(
        tmp_path: Path, published: tuple[Path, Path], history: str) -> None:
    a, remote = published
    b = tmp_path / "desktop"
    cli("init", str(b), store=b)
    if history == "denied write":  # no entry, but an audited refusal
        cli("add", "--scope", "user-global", "never approved", store=b, code=3)
    elif history == "git commit":
        edit_config(b, "language: en", "language: zh")
    else:
        cli("add", "--yes", "--scope", "user-global", "gone again", store=b)
        cli("remove", "--yes", "--scope", "user-global", "gone again", store=b)
    own = head(b)
    cli("remote", "add", "origin", str(remote), store=b)
    out = cli("sync", store=b)
    assert "Merged 3 commits from origin/main" in out and "Took" not in out
    assert own in git(remote, "rev-list", "main")  # B's own history is kept and shared
    assert budgets(b)["user/user-global"] == 5000  # A's change, made where B made none
    if history == "git commit":
        assert "language: zh" in (b / "filemem.yaml").read_text()
    assert "Fast-forwarded" in cli("sync", store=a)
    assert (a / "filemem.yaml").read_bytes() == (b / "filemem.yaml").read_bytes()
    verified(a)
    verified(b)


def test_a_new_store_and_a_remote_that_is_no_store(tmp_path: Path) -> None:
    remote = tmp_path / "other.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(tmp_path, "clone", "-q", str(remote), str(tmp_path / "work"))
    (tmp_path / "work" / "notes.txt").write_text("not a store")
    git(tmp_path / "work", "add", "notes.txt")
    git(tmp_path / "work", "commit", "-qm", "notes")
    git(tmp_path / "work", "push", "-q", "origin", "HEAD:main")
    b = tmp_path / "b"
    cli("init", str(b), store=b)
    before = head(b)
    cli("remote", "add", "origin", str(remote), store=b)
    assert "REMOTE_NOT_A_STORE" in cli("sync", store=b, code=1)
    assert head(b) == before


def test_a_new_store_publishes_itself_to_an_empty_remote(tmp_path: Path) -> None:
    remote = tmp_path / "memory.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    b = tmp_path / "b"
    cli("init", str(b), store=b)
    cli("remote", "add", "origin", str(remote), store=b)
    assert "Pushed 1 commit to origin (new branch main" in cli("sync", store=b)
    assert head(b) == head(remote, "main")


# ---------------------------------------------------------------- filemem.yaml


@pytest.fixture
def two(tmp_path: Path, published: tuple[Path, Path]) -> tuple[Path, Path, Path]:
    """A and a clone B, in step."""
    a, remote = published
    b = tmp_path / "desktop"
    cli("clone", str(remote), str(b), store=b)
    return a, b, remote


def test_different_keys_on_neighbouring_lines_both_survive(two: tuple[Path, Path, Path]) -> None:
    a, b, remote = two
    edit_config(a, "userGlobal: 5000", "userGlobal: 6000")  # the next line to B's change
    edit_config(b, "  workspace: 2000", "  workspace: 3000")
    edit_config(a, "writePolicies: {}", "writePolicies:\n  agent/workspace: auto  # A's rule")
    edit_config(b, "language: en", "language: zh")
    cli("sync", store=a)
    out = cli("sync", store=b)
    assert "files: filemem.yaml" in out and "conflict" not in out
    cli("sync", store=a)
    for store in (a, b):
        limits = budgets(store)
        assert limits["user/user-global"] == 6000 and limits["user/workspace"] == 3000
        text = (store / "filemem.yaml").read_text()
        assert "language: zh" in text and "agent/workspace: auto  # A's rule" in text
        assert "# Hard character budgets per track and layer" in text  # comments kept
        verified(store)
    assert (a / "filemem.yaml").read_bytes() == (b / "filemem.yaml").read_bytes()
    assert head(a) == head(b) == head(remote, "main")


@pytest.mark.parametrize("keep", ["local", "remote"])
def test_the_same_key_changed_differently_waits_for_the_owner(
        two: tuple[Path, Path, Path], keep: str) -> None:
    a, b, remote = two
    cli("add", "--yes", "--scope", "user-global", "written on B", store=b)
    edit_config(a, "writePolicy: ask", "writePolicy: auto")
    edit_config(b, "writePolicy: ask", "writePolicy: off")
    edit_config(b, "language: en", "language: zh")  # another key: merges either way
    cli("sync", store=a)
    before, remote_before = head(b), head(remote, "main")
    out = run_cli("sync", store=b)
    assert out.returncode == 1
    message = out.stderr
    assert "CONFIG_CONFLICT" in message
    assert 'writePolicy: "off" here, "auto" on origin' in message
    assert "filemem sync origin --keep-config local" in message
    assert "filemem sync origin --keep-config remote" in message
    assert head(b) == before and head(remote, "main") == remote_before  # nothing decided
    assert_clean_repo(b)
    err = json.loads(run_cli("sync", "--json", store=b).stdout)["error"]
    assert err["code"] == "CONFIG_CONFLICT"
    assert err["details"]["keys"] == [{"key": "writePolicy", "local": "off", "remote": "auto",
                                       "base": "ask", "localSet": True, "remoteSet": True}]
    out2 = cli("sync", "--keep-config", keep, store=b)
    assert "conflict: filemem.yaml: filemem.yaml key writePolicy changed on both sides" in out2
    assert f"--keep-config {keep}" in out2
    cli("sync", store=a)
    expected = "off" if keep == "local" else "auto"
    for store in (a, b):
        text = (store / "filemem.yaml").read_text()
        assert f"writePolicy: {expected}" in text and "language: zh" in text
        audit = json.loads(cli("audit", "--json", store=store))
        conflict = [r for r in audit if r["action"] == "sync-conflict"]
        assert [r["text"] for r in conflict] == ["filemem.yaml: writePolicy"]
        verified(store)
    assert head(a) == head(b) == head(remote, "main")


def test_keep_config_is_checked(two: tuple[Path, Path, Path]) -> None:
    _a, b, _remote = two
    assert "Invalid value for '--keep-config'" in cli("sync", "--keep-config", "both",
                                                      store=b, code=2)


def test_removed_on_one_side_changed_on_the_other_is_a_conflict(
        two: tuple[Path, Path, Path]) -> None:
    a, b, _remote = two
    edit_config(a, "maxEntriesPerQuery: 20  # default page size of a query (hard cap 1000)\n",
                "")
    edit_config(b, "maxEntriesPerQuery: 20", "maxEntriesPerQuery: 40")
    cli("sync", store=a)
    out = cli("sync", store=b, code=1)
    assert "maxEntriesPerQuery: 40 here, (not set) on origin" in out
    cli("sync", "--keep-config", "remote", store=b)
    assert "maxEntriesPerQuery" not in (b / "filemem.yaml").read_text()
    verified(b)


# ---------------------------------------------------------------- the key merge itself


def merge(base: bytes | None, local: bytes, remote: bytes,
          prefer: filemerge.Prefer | None = None) -> filemerge.YamlMerge:
    return filemerge.merge_yaml(base, local, remote, what="filemem.yaml", prefer=prefer)


def test_key_merge_takes_each_sides_change() -> None:
    local = TEMPLATE.replace(b"userGlobal: 2000", b"userGlobal: 2500")
    remote = TEMPLATE.replace(b"  workspace: 2000", b"  workspace: 2600", 1)
    result = merge(TEMPLATE, local, remote)
    assert result.conflicts == [] and result.text is not None
    assert b"userGlobal: 2500" in result.text and b"workspace: 2600" in result.text
    assert result.text.count(b"#") == TEMPLATE.count(b"#")


def test_key_merge_without_a_base_agrees_only_on_equal_values() -> None:
    local = TEMPLATE.replace(b"language: en", b"language: zh")
    result = merge(None, local, TEMPLATE)
    assert result.text is None
    assert [c.name for c in result.conflicts] == ["language"]
    assert merge(None, local, local).text == local


@pytest.mark.parametrize("local,remote", [
    (b"a: 1\n", b"a: true\n"),  # equal in Python, not in YAML
    (b"a: 1\n", b"a: 1.0\n"),
    (b"a: [1, 2]\n", b"a: [2, 1]\n"),
    (b"a: {x: 1}\n", b"a: 3\n"),
])
def test_key_merge_compares_values_as_yaml(local: bytes, remote: bytes) -> None:
    result = merge(b"a: 0\n", local, remote)
    assert result.text is None and [c.name for c in result.conflicts] == ["a"]
    chosen = merge(b"a: 0\n", local, remote, prefer="remote")
    assert chosen.text == remote


def test_key_merge_adds_a_key_where_the_other_side_put_it() -> None:
    base = b"a: 1  # one\nc: 3  # three\n"
    local = b"a: 1  # one\nc: 30  # three\n"
    remote = b"a: 1  # one\nb: 2  # two\nc: 3  # three\n"
    result = merge(base, local, remote)
    assert result.text == b"a: 1  # one\nb: 2  # two\nc: 30  # three\n"


def test_key_merge_refuses_what_the_guarded_reader_refuses() -> None:
    result = merge(b"a: 1\n", b"a: &x 2\nb: *x\n", b"a: 1\n")
    assert result.text is None and result.problem is not None
    assert "anchors" in result.problem


@pytest.mark.parametrize("bad", [b"schema: 1\nbudgets: {user: {userGlobal: -5}}\n",
                                 b"schema: 1\nwritePolicy: &a auto\nlanguage: *a\n",
                                 b"[" * 5000 + b"\n"])
def test_an_invalid_remote_config_is_refused_before_any_merge(
        two: tuple[Path, Path, Path], tmp_path: Path, bad: bytes) -> None:
    """Pushed by other means (filemem never commits such a file)."""
    _a, b, remote = two
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(remote), str(work))
    (work / "filemem.yaml").write_bytes(bad)
    git(work, "commit", "-qam", "hostile config")
    git(work, "push", "-q", "origin", "HEAD:main")
    edit_config(b, "language: en", "language: zh")  # both sides changed the file
    before = head(b)
    out = cli("sync", store=b, code=1)
    assert "REMOTE_INVALID" in out and "filemem.yaml" in out
    assert head(b) == before
    assert_clean_repo(b)
