"""Give a store a long history fast: the commits a run of ``replace`` calls would make,
written by ``git fast-import`` instead of one API call (and one fsync) each.

Each commit is built with filemem's own pieces: the entry revised as ``replace`` revises
it (:meth:`Entry.revised`, next version), its file by :func:`codec.encode`, its audit row
by :func:`auditlog.row` with the outcome a real replace in the same store recorded, its
message by :func:`auditlog.commit_message`, seqs by :func:`auditlog.next_seq`, author and
committer ``filemem <filemem@localhost>``. So the history is what filemem itself would
have written, and ``filemem verify`` must find it clean. The branch is moved by
fast-import and the working tree and git's index are brought to it with ``git read-tree``.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator

from filemem.files import codec
from filemem.files.layout import entry_path
from filemem.model import Entry
from filemem.store.auditlog import commit_message, next_seq, parse_rows, row
from filemem.store.core import Store
from filemem.store.names import IDENT


def _git(cwd: str, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["git", "-C", cwd, *args], input=stdin, capture_output=True,
                          check=True)
    return done.stdout.decode()


def _stream(store: Store, n: int, ref: str, tag: str) -> Iterator[bytes]:
    """The fast-import commands for ``n`` replace commits on top of ``store``'s HEAD."""
    state = store.state()
    head = state.head
    assert head is not None
    info = store.git.commit(head)
    last = parse_rows(info.message)
    if not last or last[-1]["action"] != "replace":
        raise SystemExit("the store's last commit must be a real replace (its outcome is copied)")
    template = last[-1]
    seq = int(template["seq"] or 0)
    ts = int(template["ts"] or 0)
    entries: list[Entry] = sorted(state.entries.values(), key=lambda e: e.id)
    first = True
    for i in range(n):
        k = i % len(entries)
        current = entries[k]
        ts += 1
        seq = next_seq(ts, seq)
        text = f"{current.text.split(' [', 1)[0]} [{tag} {i}]"
        new = current.revised(text=text, version=current.version + 1,
                              updated_at=max(ts, current.updated_at),
                              session_id=template["sessionId"])
        entries[k] = new
        r = row("replace", track=new.track, scope=new.scope, entry_id=new.id, text=text,
                outcome=template["outcome"], source=new.source,
                session_id=template["sessionId"])
        r["seq"], r["ts"] = seq, ts
        message = commit_message(f"replace {new.track}/{new.scope}: {text}",
                                 f"from:\n{current.text}\n\nto:\n{text}", [r]).encode()
        data = codec.encode(new)
        when = f"{IDENT} {ts // 1000} +0000".encode()
        out = [b"commit %s\nauthor %s\ncommitter %s\ndata %d\n%s\n" % (
            ref.encode(), when, when, len(message), message)]
        if first:
            out.append(b"from %s\n" % head.encode())
            first = False
        out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (
            entry_path(new).encode(), len(data), data))
        yield b"".join(out)


def _fast_import(source: str, target: str, n: int, tag: str) -> str | None:
    """Stream ``n`` replace commits continuing ``source``'s HEAD into ``target``'s branch
    with ``git fast-import``; returns ``source``'s HEAD before them."""
    store = Store(source)
    try:
        ref = store.git.head_ref()
        old = store.git.head()
        proc = subprocess.Popen(["git", "-C", target, "fast-import", "--quiet", "--done"],
                                stdin=subprocess.PIPE)
        assert proc.stdin is not None
        for chunk in _stream(store, n, ref, tag):
            proc.stdin.write(chunk)
        proc.stdin.write(b"done\n")
        proc.stdin.close()
        if proc.wait() != 0:
            raise SystemExit("git fast-import failed")
    finally:
        store.close()
    return old


def extend(root: str, n: int, tag: str = "r") -> None:
    """Add ``n`` replace commits to the store at ``root`` (its last commit a real replace),
    then check out the new HEAD into its working tree and index."""
    old = _fast_import(root, root, n, tag)
    assert old is not None
    _git(root, "read-tree", "-m", "-u", old, "HEAD")
    private(os.path.join(root, ".git"))


def extend_bare(source: str, bare: str, n: int, tag: str) -> None:
    """Put ``n`` more replace commits, continuing ``source``'s HEAD, on ``bare``'s branch
    (the commits another machine would have pushed)."""
    _fast_import(source, bare, n, tag)


def private(git_dir: str) -> None:
    """The modes filemem gives its objects (0400), which fast-import does not."""
    pack = os.path.join(git_dir, "objects", "pack")
    for name in os.listdir(pack):
        os.chmod(os.path.join(pack, name), stat.S_IRUSR)
