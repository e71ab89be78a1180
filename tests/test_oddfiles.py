"""Odd files in the store's working tree: a FIFO, a socket, a file filemem may not read, a
layer folder that is a symbolic link, a link to a folder outside the store. `filemem
status` lists each with the way out (never opening a FIFO, which would wait for a writer
forever), `adopt` and a write refuse them with a clear error, nothing is changed, and
reads keep working."""

from __future__ import annotations

import errno
import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.bridge import PROTOCOL_ERROR, Bridge
from filemem.files import atomic
from tests.conftest import ctx, file_of, git, no_root_powers

pytestmark = pytest.mark.skipif(os.name == "nt", reason="FIFOs, sockets, modes: POSIX")

UG = {"track": "user", "scope": "user-global"}
SHARED_UG = "user/user-global/_shared"
TIMEOUT = 60  # a command that opens a FIFO waits forever: the test fails instead of hanging


def fm(*args: str, store: Path, preexec: Callable[[], None] | None = None,
       ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "filemem", *args, "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          cwd=str(store.parent), timeout=TIMEOUT, preexec_fn=preexec,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def clean(out: subprocess.CompletedProcess[str], code: int) -> str:
    """The command's output, once it exited with ``code`` and no traceback."""
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    return out.stdout + out.stderr


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    with filemem.open_store(root, create=True, write_policy="auto") as p:
        p.add({**UG, "text": "committed text"}, ctx())
    return root


def only_entry(store: Path) -> Path:
    [e] = json.loads(clean(fm("list", "--json", store=store), 0))
    assert e["text"] == "committed text"
    return file_of(store, str(e["id"]))


def make_odd(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
        return
    here = os.getcwd()  # a socket's path is limited to ~100 bytes: bound by its name
    os.chdir(path.parent)
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()  # the socket file stays
    finally:
        os.chdir(here)


@pytest.mark.parametrize("kind", ["fifo", "socket"])
@pytest.mark.parametrize("where", ["new path", "committed entry"])
def test_a_fifo_or_socket_is_listed_never_opened_and_refused(
        store: Path, kind: str, where: str) -> None:
    entry = only_entry(store)
    odd = store / SHARED_UG / "odd.md" if where == "new path" else entry
    if where == "committed entry":
        entry.unlink()
    make_odd(odd, kind)
    rel = odd.relative_to(store).as_posix()
    head = git(store, "rev-parse", "HEAD")

    [c] = [c for c in json.loads(clean(fm("status", "--json", store=store), 0))
           if c["path"] == rel]
    assert not c["adoptable"]
    assert "not a regular file" in c["problem"] and f"filemem discard {rel}" in c["problem"]
    assert ("FIFO" if kind == "fifo" else "socket") in c["problem"]
    assert "not a regular file" in clean(fm("status", store=store), 0)

    out = clean(fm("adopt", "--yes", store=store), 1)
    assert "cannot adopt" in out and "not a regular file" in out
    if where == "committed entry":  # a write to the entry meets it: refused, named
        out = clean(fm("replace", "--yes", "--track", "user", "--scope", "user-global",
                       "committed", "new text", store=store), 3)
        assert "WRITE_DENIED" in out and "not a regular file" in out and str(odd) in out
    assert git(store, "rev-parse", "HEAD") == head
    assert only_entry(store)  # reads keep working

    clean(fm("discard", "--yes", rel, store=store), 0)  # the way out the problem names
    if where == "new path":
        assert not os.path.lexists(odd)
    else:
        assert b"committed text" in odd.read_bytes()
    assert git(store, "status", "--porcelain") == ""


def test_an_unreadable_entry_file_names_the_file_and_the_fix(store: Path) -> None:
    entry = only_entry(store)
    entry.write_bytes(entry.read_bytes().replace(b"committed text", b"edited by hand"))
    entry.chmod(0o000)
    preexec = no_root_powers()
    try:
        probe = subprocess.run([sys.executable, "-c", f"open({str(entry)!r}).close()"],
                               preexec_fn=preexec, capture_output=True, text=True)
    except subprocess.SubprocessError:
        probe = None
    if probe is None or probe.returncode == 0:
        entry.chmod(0o600)
        pytest.skip("cannot run a process that root's capabilities do not let read any file "
                    "(test_an_unreadable_file_refuses_a_bridge_write simulates it instead)")
    rel = entry.relative_to(store).as_posix()
    head = git(store, "rev-parse", "HEAD")
    fix = f"chmod 600 {entry}"
    try:
        [c] = [c for c in json.loads(clean(fm("status", "--json", store=store,
                                              preexec=preexec), 0)) if c["path"] == rel]
        assert not c["adoptable"]
        assert "permission denied" in c["problem"] and fix in c["problem"]
        out = clean(fm("adopt", "--yes", store=store, preexec=preexec), 1)
        assert "cannot adopt" in out and fix in out
        out = clean(fm("replace", "--yes", "--track", "user", "--scope", "user-global",
                       "committed", "new text", store=store, preexec=preexec), 3)
        assert "WRITE_DENIED" in out and fix in out
        assert git(store, "rev-parse", "HEAD") == head
        out = clean(fm("list", store=store, preexec=preexec), 0)
        assert "committed text" in out
    finally:
        entry.chmod(0o600)
    [c] = json.loads(clean(fm("status", "--json", store=store), 0))  # the fix works
    assert c["adoptable"] and c["entry"]["text"] == "edited by hand"


def test_an_unreadable_file_refuses_a_bridge_write(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root every file is readable: the one open is made to fail as it would (EACCES)."""
    entry = only_entry(store)
    entry.write_bytes(entry.read_bytes().replace(b"committed text", b"edited by hand"))
    real_open = atomic.open_nofollow

    def refuse(path: str, flags: int, mode: int = 0o600) -> int:
        if path == str(entry):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, mode)

    monkeypatch.setattr(atomic, "open_nofollow", refuse)
    out = io.BytesIO()
    write: dict[str, Any] = {"agent": {"session": {"id": "s1", "header": {"cwd": "/w"}}}}
    with filemem.open_store(store, write_policy="auto") as provider:
        Bridge(provider, io.BytesIO(), out).handle({
            "jsonrpc": "2.0", "id": 1, "method": "replace",
            "params": {"input": {**UG, "match": "committed", "text": "new"}, "write": write}})
    answer = json.loads(out.getvalue().decode("utf-8").splitlines()[0])
    assert answer["error"]["code"] == PROTOCOL_ERROR, answer
    assert answer["error"]["data"]["code"] == "WRITE_DENIED"
    assert f"chmod 600 {entry}" in answer["error"]["message"]


@pytest.mark.parametrize("how", ["moved", "copied"])  # copied: a new inode, stat differs
def test_a_linked_layer_folder_is_reported_not_a_crash(
        store: Path, tmp_path: Path, how: str) -> None:
    layer = store / SHARED_UG
    elsewhere = tmp_path / "elsewhere"
    if how == "moved":
        layer.rename(elsewhere)
    else:
        subprocess.run(["cp", "-r", str(layer), str(elsewhere)], check=True)
        subprocess.run(["rm", "-r", str(layer)], check=True)
    layer.symlink_to(elsewhere, target_is_directory=True)
    head = git(store, "rev-parse", "HEAD")

    changes = json.loads(clean(fm("status", "--json", store=store), 0))
    assert changes and all(not c["adoptable"] for c in changes)
    assert all(f"the folder {layer} is a symbolic link" in c["problem"] and
               "put the real folder back" in c["problem"] for c in changes)
    assert "is a symbolic link" in clean(fm("status", store=store), 0)
    assert "is a symbolic link" in clean(fm("adopt", "--yes", store=store), 1)
    assert "STORE_CORRUPT" in clean(fm("discard", "--yes", store=store), 1)
    assert git(store, "rev-parse", "HEAD") == head
    [e] = json.loads(clean(fm("list", "--json", store=store), 0))  # reads keep working
    assert e["text"] == "committed text"
    layer.unlink()
    elsewhere.rename(layer)
    assert clean(fm("status", "--json", store=store), 0) == "[]\n"


def test_a_link_to_a_folder_outside_is_listed(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.md").write_text("planted\n")
    link = store / "agent" / "workspace" / "evil-0123456789"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    rel = "agent/workspace/evil-0123456789"
    head = git(store, "rev-parse", "HEAD")

    [c] = json.loads(clean(fm("status", "--json", store=store), 0))
    assert c["path"] == rel and c["kind"] == "added" and not c["adoptable"]
    assert "is a symbolic link" in c["problem"] and f"filemem discard {rel}" in c["problem"]
    assert "planted" not in json.dumps(c)
    assert "cannot adopt" in clean(fm("adopt", "--yes", store=store), 1)
    assert git(store, "rev-parse", "HEAD") == head

    clean(fm("discard", "--yes", rel, store=store), 0)
    assert not os.path.lexists(link)
    assert (outside / "x.md").read_text() == "planted\n"  # the link went, not its folder
    assert git(store, "status", "--porcelain") == ""


def test_files_outside_the_store_s_folders_are_listed_as_git_lists_them(store: Path) -> None:
    """A folder or file a person put at the store's top (git: `?? notes/`) is named by
    status, left alone by a bare adopt (and refused by one naming it), and `filemem
    discard` deletes it, as it says."""
    (store / "notes").mkdir()
    (store / "notes" / "x.md").write_text("a note of mine\n")
    (store / "todo.txt").write_text("later\n")
    head = git(store, "rev-parse", "HEAD")
    found = json.loads(clean(fm("status", "--json", store=store), 0))
    assert [(c["path"], c["kind"], c["adoptable"]) for c in found] == [
        ("notes/x.md", "added", False), ("todo.txt", "added", False)]
    assert all("not part of the store" in c["problem"] for c in found)
    out = clean(fm("adopt", "--yes", store=store), 0)
    assert "Nothing to adopt." in out and "Left alone, not part of the store" in out
    out = clean(fm("adopt", "--yes", "notes/x.md", store=store), 1)
    assert "cannot adopt notes/x.md: not part of the store" in out
    assert "filemem: INVALID_INPUT: nothing was adopted" in out
    assert git(store, "rev-parse", "HEAD") == head
    clean(fm("discard", "--yes", "notes/x.md", "todo.txt", store=store), 0)
    assert git(store, "status", "--porcelain") == ""


@pytest.mark.parametrize("where", ["user/.gitignore", ".gitignore"])
def test_a_fifo_named_gitignore_is_listed_never_opened(store: Path, where: str) -> None:
    """A FIFO where a `.gitignore` belongs (git's own `git status` waits on it for ever):
    asking the ignore rules about a new file never opens it; status lists it with its way
    out beside that file, and `filemem discard` removes it or puts the committed one back."""
    fifo = store / where
    if fifo.exists():
        fifo.unlink()
    os.mkfifo(fifo)
    mine = f"{SHARED_UG}/mine.md"
    (store / mine).write_text("a note of mine\n")  # not in HEAD: the ignore rules are asked
    found = {c["path"]: c for c in json.loads(clean(fm("status", "--json", store=store), 0))}
    assert set(found) == {where, mine}
    assert "FIFO" in found[where]["problem"]
    assert f"filemem discard {where}" in found[where]["problem"]
    assert found[mine]["adoptable"]
    clean(fm("discard", "--yes", where, mine, store=store), 0)
    assert not (store / mine).exists()
    assert git(store, "status", "--porcelain") == ""


def test_a_file_committed_with_git_beside_the_store_s_folders_is_git_s(store: Path) -> None:
    """A file a person committed with git at the store's top (TODO.txt) is not filemem's:
    unchanged, no command lists it; changed or deleted, status names it with its way out, a
    bare adopt commits the other edits and leaves it alone, and `filemem discard` puts it
    back as committed."""
    (store / "TODO.txt").write_text("todo\n")
    git(store, "add", "TODO.txt")
    git(store, "commit", "-q", "-m", "my todo list")
    assert json.loads(clean(fm("status", "--json", store=store), 0)) == []
    (store / "TODO.txt").write_text("todo, and more\n")
    (store / SHARED_UG / "note.md").write_text("a note of mine\n")
    found = {c["path"]: c for c in json.loads(clean(fm("status", "--json", store=store), 0))}
    assert set(found) == {"TODO.txt", f"{SHARED_UG}/note.md"}
    assert found["TODO.txt"]["kind"] == "edited" and not found["TODO.txt"]["adoptable"]
    assert "committed with git" in found["TODO.txt"]["problem"]
    out = clean(fm("adopt", "--yes", store=store), 0)
    assert "Adopted 1 change in one commit." in out and "Left alone" in out
    assert "a note of mine" in [e["text"] for e in json.loads(
        clean(fm("list", "--json", store=store), 0))]
    assert "cannot adopt TODO.txt" in clean(fm("adopt", "--yes", "TODO.txt", store=store), 1)
    clean(fm("discard", "--yes", "TODO.txt", store=store), 0)
    assert (store / "TODO.txt").read_text() == "todo\n"
    (store / "TODO.txt").unlink()
    [c] = json.loads(clean(fm("status", "--json", store=store), 0))
    assert (c["path"], c["kind"]) == ("TODO.txt", "deleted")
    clean(fm("discard", "--yes", "TODO.txt", store=store), 0)
    assert (store / "TODO.txt").read_text() == "todo\n"
    assert git(store, "status", "--porcelain") == ""
