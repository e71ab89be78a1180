"""Safety: hand edits are never overwritten, keys never escape the store, the store is
private, oversized or invalid input writes nothing, symlinks and stale git locks do no harm.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files.layout import key_dir
from tests.conftest import assert_clean_repo, ctx, git, write_in_flight

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
SAFE_NAME = set("abcdefghijklmnopqrstuvwxyz0123456789_-")


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()


def entry_file(store: Path, entry: dict[str, Any]) -> Path:
    parts = [entry["track"], entry["scope"]]
    if entry["scope"] == "workspace":
        parts.append(key_dir(entry["workspaceKey"]) if entry["workspaceKey"] else "_none")
    parts.append(key_dir(entry["agentKey"]) if entry["agentKey"] else "_shared")
    return store.joinpath(*parts, f"{entry['id']}.md")


def tree_of(root: Path) -> set[str]:
    """Every file and folder under ``root`` (relative, POSIX), symlinks not followed."""
    out: set[str] = set()
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root)
        for name in dirs + files:
            out.add((rel / name).as_posix())
    return out


class CountingGate:
    name = "counting test gate"

    def __init__(self, answer: str = "allowed-once",
                 action: Callable[[], None] | None = None) -> None:
        self.calls = 0
        self.answer = answer
        self.action = action

    def __call__(self, request: filemem.ApprovalRequest) -> str:
        self.calls += 1
        if self.action is not None:
            self.action()
        return self.answer


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask of a person's shell, so privacy cannot come from the test runner."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


# ---------------------------------------------------------------- hand edits


HAND_EDIT_OPS: dict[str, Callable[[filemem.Provider], Any]] = {
    "replace": lambda p: p.replace({**UG, "match": "alpha", "text": "alpha v2"}, ctx()),
    "remove": lambda p: p.remove({**UG, "match": "alpha"}, ctx()),
    "consolidate": lambda p: p.consolidate(
        {**UG, "matches": ["alpha", "beta"], "text": "alpha and beta"}, ctx()),
}


@pytest.mark.parametrize("op", list(HAND_EDIT_OPS))
def test_hand_edit_is_never_overwritten(op: str, make_provider: MakeProvider,
                                        store_path: Path) -> None:
    auto = make_provider()
    alpha = auto.add({**UG, "text": "alpha original"}, ctx())["entry"]
    auto.add({**UG, "text": "beta original"}, ctx())
    f = entry_file(store_path, alpha)
    edited = f.read_bytes().replace(b"alpha original", b"alpha, as I typed it\r\n")
    f.write_bytes(edited)
    gate = CountingGate()
    asking = make_provider(write_policy="ask", gate=gate)
    before = head(store_path)
    with pytest.raises(filemem.ProtocolError) as info:
        HAND_EDIT_OPS[op](asking)
    assert info.value.code == "WRITE_DENIED"
    assert info.value.details["outcome"] == "hand-edit-pending"
    assert info.value.details["path"] == str(f)
    assert str(f) in info.value.message
    assert gate.calls == 0  # refused before anyone was asked
    assert f.read_bytes() == edited
    assert head(store_path) == before
    assert git(store_path, "status", "--porcelain") == f" M {f.relative_to(store_path)}\n"
    # other entries stay writable, and the edit still survives
    asking.add({**UG, "text": "gamma new"}, ctx())
    assert gate.calls == 1
    assert f.read_bytes() == edited
    git(store_path, "fsck", "--strict")


def test_hand_edit_made_while_approval_is_pending_survives(make_provider: MakeProvider,
                                                          store_path: Path) -> None:
    auto = make_provider()
    alpha = auto.add({**UG, "text": "alpha original"}, ctx())["entry"]
    f = entry_file(store_path, alpha)
    edited = f.read_bytes() + b"\nwritten while the prompt was open\n"
    def edit() -> None:
        f.write_bytes(edited)

    gate = CountingGate(action=edit)
    asking = make_provider(write_policy="ask", gate=gate)
    with pytest.raises(filemem.ProtocolError) as info:
        asking.replace({**UG, "match": "alpha", "text": "alpha v2"}, ctx())
    assert gate.calls == 1
    assert info.value.code == "WRITE_DENIED"
    assert info.value.details["outcome"] == "hand-edit-pending"
    assert f.read_bytes() == edited
    assert [e["text"] for e in asking.list_entries()] == ["alpha original"]
    assert asking.audit_list(1)[0]["action"] == "replace-failed"
    assert git(store_path, "status", "--porcelain") == f" M {f.relative_to(store_path)}\n"


# ---------------------------------------------------------------- keys never escape


BAD_KEYS = ["../../etc", "/abs", "a/../../b", "C:\\x", "CON", "x" * 300, ".git",
            "..", "../.git/hooks", "Bob", "bob", "nul.txt", ".", "~", "\\\\server\\share"]


def test_keys_never_become_paths(make_provider: MakeProvider, store_path: Path,
                                 tmp_path: Path) -> None:
    p = make_provider()
    outside_before = tree_of(tmp_path) - {x for x in tree_of(tmp_path) if x.startswith("store")}
    git_before = tree_of(store_path / ".git")
    written: list[tuple[str, str, str]] = []
    for key in BAD_KEYS:
        # as the session's agent preset
        e = p.add({"track": "agent", "scope": "workspace", "text": f"preset {key!r}"},
                  ctx(agent=key))["entry"]
        written.append((e["id"], e["workspaceKey"], e["agentKey"]))
        # as explicit keys in the input
        e = p.add({"track": "user", "scope": "workspace", "text": f"keys {key!r}",
                   "workspaceKey": key, "agentKey": key}, ctx())["entry"]
        written.append((e["id"], key, key))
        # as the session's working directory
        e = p.add({"track": "agent", "scope": "workspace", "text": f"cwd {key!r}"},
                  ctx(cwd=key))["entry"]
        written.append((e["id"], e["workspaceKey"], e["agentKey"]))
    # nothing appeared outside the store
    after = tree_of(tmp_path)
    assert {x for x in after if not x.startswith("store")} == outside_before
    # nothing but git's own bookkeeping appeared inside .git
    for rel in tree_of(store_path / ".git") - git_before:
        assert rel.split("/")[0] in ("objects", "logs", "refs") or rel == "index", rel
    # every entry file is tracked, at depth 4/5, with safe folder names only
    tracked = set(git(store_path, "ls-files").splitlines())
    on_disk = {x for x in tree_of(store_path) if x.split("/")[0] not in (".git", ".filemem")
               and (store_path / x).is_file()}
    assert on_disk == tracked
    entries = [x for x in tracked if x.startswith(("user/", "agent/"))]
    assert len(entries) == 3 * len(BAD_KEYS)
    for rel in entries:
        parts = rel.split("/")
        assert len(parts) in (4, 5)
        assert parts[0] in ("user", "agent") and parts[1] in ("user-global", "workspace")
        for folder in parts[2:-1]:
            assert set(folder) <= SAFE_NAME and folder not in (".", "..")
            assert len(folder) <= 40
    # the exact keys round-trip through the front-matter
    listed = {e["id"]: (e["workspaceKey"], e["agentKey"]) for e in p.list_entries()}
    for eid, wk, ak in written:
        assert listed[eid] == (wk, ak)
    # case-only differences are different folders
    assert key_dir("Bob") != key_dir("bob")
    assert_clean_repo(store_path)


# ---------------------------------------------------------------- privacy


def _loose_modes(store: Path) -> list[tuple[str, str]]:
    """(path, mode) of everything under the store that group or others can use."""
    bad = [(".", oct(stat.S_IMODE(store.stat().st_mode)))] \
        if stat.S_IMODE(store.stat().st_mode) & 0o077 else []
    for folder, dirs, files in os.walk(store):
        for name in dirs + files:
            full = Path(folder, name)
            mode = stat.S_IMODE(full.lstat().st_mode)
            if mode & 0o077:
                bad.append((full.relative_to(store).as_posix(), oct(mode)))
    return bad


def _busy_store(make_provider: MakeProvider) -> filemem.Provider:
    p = make_provider()
    p.add({**UG, "text": "private fact"}, ctx())
    p.replace({**UG, "match": "private", "text": "private fact v2"}, ctx())
    p.seed([{"track": "agent", "scope": "workspace", "text": f"seeded #{i}."}
            for i in range(80)], ctx(agent="coder"))  # big enough to be written as a pack
    p.remove({"track": "agent", "scope": "workspace", "match": "seeded #7."},
             ctx(agent="coder"))
    p.query({"text": "fact"}, {"sessionId": "q"})
    p.snapshot({"id": "s", "header": {"cwd": "/work/proj"}})
    with pytest.raises(filemem.ProtocolError):
        make_provider(write_policy="off").add({**UG, "text": "refused"}, ctx())
    p.close()
    return p


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_store_is_private_to_its_owner(umask_022: None, make_provider: MakeProvider,
                                       store_path: Path) -> None:
    _busy_store(make_provider)
    assert list((store_path / ".git" / "objects" / "pack").glob("*.pack"))
    assert (store_path / ".filemem" / "audit.jsonl").exists()
    assert (store_path / ".filemem" / "recall.log").exists()
    assert stat.S_IMODE(store_path.stat().st_mode) == 0o700
    # everything, .git included (the lock file is the known exception, tested below)
    assert [b for b in _loose_modes(store_path) if b[0] != ".filemem/lock"] == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_store_lock_file_is_private(umask_022: None, make_provider: MakeProvider,
                                    store_path: Path) -> None:
    _busy_store(make_provider)
    assert _loose_modes(store_path) == []


# ---------------------------------------------------------------- oversized and invalid input


def test_huge_text_is_refused_fast(provider: filemem.Provider, store_path: Path) -> None:
    provider.add({**UG, "text": "small"}, ctx())
    huge = "\u4e2d" * (5 * 1024 * 1024 // 3) + "x" * 200_000  # ~5 MB as UTF-8
    before = head(store_path)
    objects = git(store_path, "count-objects")
    calls: list[Callable[[], Any]] = [
        lambda: provider.add({**UG, "text": huge}, ctx()),
        lambda: provider.replace({**UG, "match": "small", "text": huge}, ctx()),
        lambda: provider.seed([{**UG, "text": "fine"}, {**UG, "text": huge}], ctx()),
        lambda: provider.consolidate({**UG, "matches": ["small"], "text": huge}, ctx()),
    ]
    for call in calls:
        start = time.perf_counter()
        with pytest.raises(filemem.ProtocolError) as info:
            call()
        assert time.perf_counter() - start < 2.0
        assert info.value.code == "BUDGET_EXCEEDED"
        assert info.value.details["limit"] == 2000
        assert info.value.details["needed"] >= len(huge) - 5
    assert head(store_path) == before
    assert git(store_path, "count-objects") == objects  # not even an object was written
    assert_clean_repo(store_path)


SURROGATE_INPUTS: dict[str, Callable[[filemem.Provider], Any]] = {
    "text": lambda p: p.add({**UG, "text": "bad \ud800 text"}, ctx()),
    "tag": lambda p: p.add({**UG, "text": "ok", "tags": ["t\udc00"]}, ctx()),
    "workspaceKey": lambda p: p.add({"track": "user", "scope": "workspace", "text": "ok",
                                     "workspaceKey": "/w/\ud83d"}, ctx()),
    "agentKey": lambda p: p.add({**UG, "text": "ok", "agentKey": "\udfff"}, ctx()),
    "source": lambda p: p.add({**UG, "text": "ok", "source": "s\ud800"}, ctx()),
    "replace-text": lambda p: p.replace({**UG, "match": "existing", "text": "\ud800"}, ctx()),
    "seed-text": lambda p: p.seed([{**UG, "text": "fine"}, {**UG, "text": "x\udc80"}], ctx()),
    "consolidate-text": lambda p: p.consolidate(
        {**UG, "matches": ["existing"], "text": "\udbff"}, ctx()),
}
SURROGATE_SESSION: dict[str, Callable[[filemem.Provider], Any]] = {
    "agent-preset": lambda p: p.add({**UG, "text": "ok"}, ctx(agent="coder\ud800")),
    "session-cwd": lambda p: p.add({"track": "user", "scope": "workspace", "text": "ok"},
                                   ctx(cwd="/work/p\udc00")),
    "session-id": lambda p: p.add({**UG, "text": "ok"}, ctx(session_id="s\ud800")),
}


def _assert_invalid_and_nothing_written(p: filemem.Provider, store_path: Path,
                                        call: Callable[[filemem.Provider], Any]) -> None:
    p.add({**UG, "text": "existing entry"}, ctx())
    before = head(store_path)
    with pytest.raises(filemem.ProtocolError) as info:
        call(p)
    assert info.value.code == "INVALID_INPUT"
    assert "surrogate" in info.value.message
    assert head(store_path) == before
    assert [e["text"] for e in p.list_entries()] == ["existing entry"]
    assert not write_in_flight(store_path)
    assert_clean_repo(store_path)


@pytest.mark.parametrize("where", list(SURROGATE_INPUTS))
def test_lone_surrogate_in_input_is_invalid(where: str, provider: filemem.Provider,
                                            store_path: Path) -> None:
    _assert_invalid_and_nothing_written(provider, store_path, SURROGATE_INPUTS[where])


@pytest.mark.parametrize("where", list(SURROGATE_SESSION))
def test_lone_surrogate_in_session_context_is_invalid(where: str, provider: filemem.Provider,
                                                      store_path: Path) -> None:
    _assert_invalid_and_nothing_written(provider, store_path, SURROGATE_SESSION[where])


# ---------------------------------------------------------------- symlinks in the working tree


def test_symlinked_entry_file_is_a_hand_edit(provider: filemem.Provider,
                                             store_path: Path, tmp_path: Path) -> None:
    """A symlink in place of an entry file is a change a person made (git shows a type
    change), even when its target holds HEAD's bytes: replace and remove refuse it before
    asking, and neither the link nor the file outside the store is touched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    made = [provider.add({**UG, "text": t}, ctx())["entry"] for t in ("alpha one", "beta two")]
    targets = []
    for i, entry in enumerate(made):
        f = entry_file(store_path, entry)
        target = outside / f"target{i}.md"
        target.write_bytes(f.read_bytes())
        f.unlink()
        f.symlink_to(target)
        targets.append((f, target, target.read_bytes()))
    calls: list[Callable[[], Any]] = [
        lambda: provider.replace({**UG, "match": "alpha", "text": "alpha changed"}, ctx()),
        lambda: provider.remove({**UG, "match": "beta"}, ctx())]
    for call in calls:
        with pytest.raises(filemem.ProtocolError) as info:
            call()
        assert info.value.details["outcome"] == "hand-edit-pending"
    for f, target, data in targets:
        assert target.read_bytes() == data
        assert f.is_symlink()
    assert tree_of(outside) == {"target0.md", "target1.md"}
    assert [e["text"] for e in provider.list_entries()] == ["alpha one", "beta two"]


def test_symlink_to_other_content_is_a_hand_edit(provider: filemem.Provider, store_path: Path,
                                                 tmp_path: Path) -> None:
    entry = provider.add({**UG, "text": "alpha one"}, ctx())["entry"]
    f = entry_file(store_path, entry)
    target = tmp_path / "elsewhere.md"
    target.write_bytes(b"somebody else's file\n")
    f.unlink()
    f.symlink_to(target)
    calls: list[Callable[[], Any]] = [
        lambda: provider.replace({**UG, "match": "alpha", "text": "x"}, ctx()),
        lambda: provider.remove({**UG, "match": "alpha"}, ctx())]
    for call in calls:
        with pytest.raises(filemem.ProtocolError) as info:
            call()
        assert info.value.details["outcome"] == "hand-edit-pending"
    assert target.read_bytes() == b"somebody else's file\n"
    assert f.is_symlink()


@pytest.mark.parametrize("linked", ["user/user-global/_shared", "agent"])
def test_symlinked_folder_is_not_followed(linked: str, provider: filemem.Provider,
                                          store_path: Path, tmp_path: Path) -> None:
    provider.add({**UG, "text": "first"}, ctx())
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = store_path / linked
    if folder.exists():
        folder.rename(outside / "moved")
        folder.symlink_to(outside / "moved")
    else:
        folder.symlink_to(outside)
    before = tree_of(outside)
    head = git(store_path, "rev-parse", "HEAD")
    track = linked.split("/")[0]
    with pytest.raises(filemem.ProtocolError) as info:
        provider.add({"track": track, "scope": "user-global", "text": "second"}, ctx())
    assert info.value.code == "STORE_CORRUPT"
    assert info.value.details["path"] == str(store_path / linked)
    assert "symbolic link" in info.value.message
    assert git(store_path, "rev-parse", "HEAD") == head  # refused before anything was written
    assert tree_of(outside) == before


# ---------------------------------------------------------------- a stale lock of git's own


def test_an_index_lock_of_a_write_that_ends_while_it_is_looked_at_is_not_git_s(
        provider: filemem.Provider, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write's check before the store lock (as its approval's) sees git's index.lock;
    the other process's write that held it ends (its log record settled, the lock renamed
    away) between that look and the look at the log: the lock was that write's, not a git
    command's, and this write goes on (it was STORE_BUSY, a race seen once in a full run of
    the conformance suite's four racing processes)."""
    provider.add({**UG, "text": "first"}, ctx())
    lock = store_path / ".git" / "index.lock"
    store = provider.store
    real = type(store.wal).unsettled
    ended: list[bool] = []

    def unsettled(self: Any) -> Any:  # the other write ends right now
        if lock.exists():
            lock.unlink()
            ended.append(True)
        return real(self)

    monkeypatch.setattr(type(store.wal), "unsettled", unsettled)
    lock.write_bytes(b"the other process's write")
    provider.add({**UG, "text": "second"}, ctx())
    assert ended and sorted(e["text"] for e in provider.list_entries()) == ["first", "second"]
    assert_clean_repo(store_path)


def test_stale_git_index_lock_refuses_the_write(provider: filemem.Provider,
                                                store_path: Path) -> None:
    """A `.git/index.lock` held by a git command (or left by a crashed one) is git's, not
    filemem's: the write is refused before anything is written, with a message saying what
    to do, and the lock is never deleted by filemem. Once it is gone, writes work again."""
    provider.add({**UG, "text": "before the crash"}, ctx())
    lock = store_path / ".git" / "index.lock"
    lock.write_bytes(b"git's")
    head = git(store_path, "rev-parse", "HEAD")
    with pytest.raises(TimeoutError, match=r"index\.lock.*nothing was written"):
        provider.add({**UG, "text": "during the stale lock"}, ctx())
    assert git(store_path, "rev-parse", "HEAD") == head
    assert not write_in_flight(store_path)
    filemem.open_store(store_path).close()  # an open does not take git's lock away either
    assert lock.read_bytes() == b"git's"
    assert [e["text"] for e in provider.list_entries()] == ["before the crash"]
    lock.unlink()
    provider.add({**UG, "text": "after the lock is gone"}, ctx())
    assert_clean_repo(store_path)
