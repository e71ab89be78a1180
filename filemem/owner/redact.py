"""``filemem redact``: remove a text from the whole history and every local copy of it.

:func:`plan` finds what a redaction changes without changing anything (for the owner's
confirmation); :func:`apply` does it, under the store lock:

1. the history is rewritten as new objects (:mod:`.rewrite`), written to the object store
   (unreachable until a ref names them), with one more commit on top: the record, an audit
   row ``redact`` naming the entry (or none) and a salted hash, never the text;
2. with the audit counter held (no read-side row is recorded meanwhile), the redacted
   copies of the ledger and the pending approvals are staged, the journal and the
   manifest written (:mod:`filemem.store.redactstage`), and the branch moved from the old
   head to the record by compare-and-swap: the commit point;
3. the working tree and the index get the redacted files, the copies replace the
   originals, the view cache goes, the other refs (remote-tracking ones) move to their
   rewritten values and the remotes to push are noted for ``filemem sync``;
4. reflogs are expired and every object only the old history reached is pruned.

Killed before the branch moved, the store is as it was; after, the next open finishes
steps 3 and 4. Copies made before the redaction (other clones, backups, the remote until
``filemem sync`` pushes) still hold the text: only they can be told, not rewritten here.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from filemem import errors
from filemem.files import atomic, codec, gitprune, worktree
from filemem.files.codec import CodecError
from filemem.files.gitrepo import CommitInfo, PendingObjects
from filemem.files.layout import id_from_path
from filemem.model import now_ms
from filemem.owner import gitwalk
from filemem.owner.redaction import ACTION, MARKER, Needles, redact_row
from filemem.owner.rewrite import Rewrite, Rewriter
from filemem.shown import counted
from filemem.store import redactstage
from filemem.store.auditlog import commit_message, row
from filemem.store.core import Store
from filemem.store.names import IDENT, private_files
from filemem.store.transaction import hand_edited

_REMOTES = "refs/remotes/"


@dataclass
class Plan:
    """What a redaction would change (nothing has yet)."""

    needles: Needles
    what: str
    head: str
    rewrite: Rewrite
    ledger: dict[int, bytes]  # line number -> its redacted line
    ledger_size: int
    pending: dict[str, bytes]  # pending file name -> its redacted content

    @property
    def found(self) -> bool:
        return bool(self.rewrite.rewritten or self.ledger or self.pending)

    def to_json(self) -> dict[str, Any]:
        return {"what": self.what, "entryId": self.needles.entry_id,
                "commitsRewritten": self.rewrite.rewritten,
                "commits": len(self.rewrite.commits),
                "files": sorted(self.rewrite.files),
                "refs": {r: {"old": o, "new": n} for r, (o, n) in self.rewrite.refs.items()
                         if o != n},
                "ledgerRows": len(self.ledger), "pendingApprovals": len(self.pending)}


def _entry_needles(store: Store, prefix: str) -> Needles:
    """Every text entry ``prefix`` (its id, or a unique start of it) ever had: in its files
    and in the audit rows naming it, in every commit any ref reaches (the branch and the
    fetched remote branches: after a redaction, only commits not yet rewritten still hold
    them). INVALID_INPUT if no entry of the history has that id, or if it has no text left
    but the marker (redacted already: nothing to do)."""
    if not prefix.strip():
        raise errors.invalid_input("give the entry's id, or a unique start of it (`filemem "
                                   "list` shows them); nothing was changed")
    git = store.git
    texts: dict[str, set[str]] = {}
    records: dict[str, str] = {}  # entry id -> a redaction record naming it
    commits: list[CommitInfo] = []
    stack, seen = list(gitprune.commit_refs(git.repo).values()), set()
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        info = git.commit(sha)
        stack.extend(info.parents)
        commits.append(info)
    # the files each commit changed, by git when it is there (trees read in Python took a
    # fifth of a redaction's plan at 100,000 commits)
    with contextlib.closing(gitwalk.first_parent_diffs(git, commits)) as diffs:
        for info, changes in zip(commits, diffs, strict=True):
            for r in store.trail.commit_rows(info):
                eid = str(r.get("entryId") or "")
                if eid and eid.startswith(prefix):  # rows about no entry (an init) name none
                    texts.setdefault(eid, set())
                    if isinstance(r.get("text"), str):
                        texts[eid].add(str(r["text"]))
                    if r.get("action") == ACTION:
                        records[eid] = info.sha
            if changes is None:
                parent = git.commit(info.parents[0]).tree if info.parents else None
                changes = list(git.diff(parent, info.tree))
            for path, _old, new in changes:
                eid = id_from_path(path) or ""
                if new is not None and eid and eid.startswith(prefix):
                    with contextlib.suppress(CodecError):  # an invalid file: no text of it
                        texts.setdefault(eid, set()).add(
                            codec.decode(git.read_blob(new)).entry.text)
    if not texts:
        raise errors.invalid_input(
            f"no entry {prefix!r} in this store's history (`filemem list` and `filemem log` "
            "show the ids); nothing was changed")
    if len(texts) > 1:
        raise errors.invalid_input(
            f"{prefix!r} is the start of {len(texts)} entry ids ({', '.join(sorted(texts)[:5])}"
            "); give more of the id; nothing was changed")
    eid, found = next(iter(texts.items()))
    needles = Needles.of(found, eid)
    if not needles.texts:
        record = f" (record {records[eid][:12]})" if eid in records else ""
        raise errors.invalid_input(
            f"nothing to redact: entry {eid} was redacted already{record}, and no commit "
            "here (the branch or a fetched remote branch) holds a text it had any more; "
            "nothing was changed. A snapshot or recall in this machine's ledger, or a pending "
            "approval, may still hold one: give that text as `filemem redact --text -`")
    return needles


def _redact_json(value: Any, needles: Needles, naming: bool) -> Any:
    if isinstance(value, str):
        return needles.free(value, naming)
    if isinstance(value, list):
        return [_redact_json(v, needles, naming) for v in value]
    if isinstance(value, dict):
        return {k: _redact_json(v, needles, naming) for k, v in value.items()}
    return value


def _redact_line(line: bytes, needles: Needles) -> bytes | None:
    """One ledger line redacted (a torn line as text), or None if it holds no needle."""
    text = line.decode("utf-8", "surrogateescape")
    naming = needles.entry_id is not None and needles.entry_id in text
    if not needles.found(text, naming):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        new = json.dumps(redact_row(value, needles, naming),  # type: ignore[arg-type]
                         ensure_ascii=False, separators=(",", ":"))
    else:
        new = needles.free(text, True)
    return new.encode("utf-8", "surrogateescape")


def _ledger(store: Store, needles: Needles) -> tuple[dict[int, bytes], int]:
    """The ledger's lines that hold a needle, redacted, and the ledger's size."""
    try:
        with open(store.ledger.path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}, 0
    out: dict[int, bytes] = {}
    for i, line in enumerate(data.split(b"\n")):
        new = _redact_line(line, needles)
        if new is not None:
            out[i] = new
    return out, len(data)


def _pending(store: Store, needles: Needles) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    folder = store.pending.dir
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        path = os.path.join(folder, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "surrogateescape")
        naming = needles.entry_id is not None and needles.entry_id in text
        if not needles.found(text, naming):
            continue
        try:
            new = json.dumps(_redact_json(json.loads(text), needles, naming),
                             ensure_ascii=False, indent=1)  # as pending.stage writes it
        except ValueError:
            new = needles.free(text, True)
        out[name] = new.encode("utf-8", "surrogateescape")
    return out


def _plan_locked(store: Store, entry_id: str | None, text: str | None,
                 progress: Callable[[int], None] | None = None) -> Plan:
    if (entry_id is None) == (text is None):
        raise errors.invalid_input("give an entry id or --text, not both nor neither")
    gitprune.git_cli()
    head = store.git.head()
    if head is None:
        raise errors.store_corrupt(store.root, "the repository has no commits")
    if text is not None:
        if not text.strip():
            raise errors.invalid_input("the text to redact is empty; nothing was changed")
        if text == MARKER:
            raise errors.invalid_input(f"{MARKER} is what filemem puts where it redacted a "
                                       "text: there is nothing to redact; nothing was changed")
        needles, what = Needles.of([text]), f"a text of {len(text)} characters"
    else:
        assert entry_id is not None
        needles = _entry_needles(store, entry_id)
        what = f"entry {needles.entry_id} ({counted(len(needles.texts), 'text')})"
    rewrite = Rewriter(store.git, needles).run(gitprune.commit_refs(store.git.repo), progress)
    ledger, size = _ledger(store, needles)
    return Plan(needles, what, head, rewrite, ledger, size, _pending(store, needles))


def plan(store: Store, entry_id: str | None = None, text: str | None = None,
         progress: Callable[[int], None] | None = None) -> Plan:
    """What redacting ``entry_id`` (its every text) or ``text`` would change; ``progress``
    is told the commits read so far, now and then (a long history takes a while)."""
    with store.locked(), private_files():
        store.repair()
        return _plan_locked(store, entry_id, text, progress)


def _by_whom() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"the owner's `filemem redact` ({user}@{socket.gethostname()})"


def apply(store: Store, entry_id: str | None = None, text: str | None = None,
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Redact (see the module docstring); returns what was done. INVALID_INPUT if the text
    (or the entry) is nowhere, or somewhere it cannot be rewritten: nothing changed then.
    ``progress``: as for :func:`plan`."""
    with store.locked(), private_files():
        store.repair()
        redactstage.clear(store)
        p = _plan_locked(store, entry_id, text, progress)
        if not p.found:
            raise errors.invalid_input(
                f"{p.what} is nowhere in this store (its history, its ledger, its pending "
                "approvals); nothing was changed")
        result = _commit(store, p)
        size = _size(store.ledger.path)
        redactstage.forget_old_history(store)
        _late_rows(store, p.needles, size)
        store.trail.forget()  # the late rows' old lines, read while numbering them
        redactstage.clear(store)
        store.journal.clear()
    return result


def _commit(store: Store, p: Plan) -> dict[str, Any]:
    git, rw = store.git, p.rewrite
    branch = git.head_ref()
    old_head, new_head = rw.refs[branch]
    base_tree = git.commit(old_head).tree
    at_head = {path: sha for path, _mode, sha in git.walk(base_tree) if sha in rw.blobs}
    dirty = store.dirty_paths_at(list(at_head), at_head)
    if dirty:  # before anything is written
        raise hand_edited(store.root, dirty[0])
    # the write-ahead log holds recent writes' objects (texts included) until a
    # checkpoint: make them durable and empty it, so no copy survives there
    store.wal.checkpoint(git)
    git.write(rw.pending)  # unreachable until the branch moves
    tree = git.commit(new_head).tree
    pending = PendingObjects()
    record_row = row(ACTION, entry_id=p.needles.entry_id, source="owner", outcome=(
        f"redacted {p.what} from the whole history: {counted(rw.rewritten, 'commit')} "
        f"rewritten, {counted(len(p.ledger), 'ledger row')}, "
        f"{counted(len(p.pending), 'pending approval')}; hash "
        f"{p.needles.digest()}; by {_by_whom()}"))
    body = "\n".join([
        f"Redacted {p.what}: every commit that held it was rewritten.",
        *(f"Redacted-Ref: {r} {o} {n}" for r, (o, n) in sorted(rw.refs.items()) if o != n),
        *(f"Redacted-Root: {sha}" for sha in rw.roots)])
    pushes = {r[len(_REMOTES):].rsplit("/", 1)[0]: {"lease": o, "rewritten": n}
              for r, (o, n) in rw.refs.items() if r.startswith(_REMOTES) and o != n
              and r.endswith("/main")}
    record_row["ts"] = now_ms()
    with store.ledger.numbering(lambda: store.trail.last_seq(old_head)) as stamp:
        # from here on no read-side row is recorded until the copies are in place
        p.ledger, p.ledger_size = _ledger(store, p.needles)
        stamp(record_row)
        message = commit_message(f"redact: {p.what}", body, [record_row])
        record = git.make_commit(tree, [new_head], message, IDENT,
                                 int(record_row["ts"] or 0) // 1000, pending)
        git.write(pending)
        diff = list(git.diff(base_tree, tree))
        # the journal first: from here on a kill is repaired by the next open or write
        store.journal.begin(old_head, record, {path: (o, n) for path, o, n in diff})
        manifest = {"old": old_head, "new": record, "branch": branch,
                    "refs": {r: [o, n] for r, (o, n) in rw.refs.items() if o != n},
                    "ledgerSize": p.ledger_size, "pushes": pushes}
        try:
            _stage(store, p)
            redactstage.write_manifest(store, manifest)
            lock = store.lock_index()  # after the journal, as a write takes it
        except BaseException:
            _undo(store, old_head)
            raise
        with lock:
            try:
                moved = git.cas_head(old_head, record, f"filemem redact: {p.what}")
            except BaseException:
                _undo(store, old_head)
                raise
            if not moved:
                _undo(store, old_head)
                raise errors.StoreBusy("the store's branch moved while redacting (a git "
                                       "command?); nothing was changed; run it again")
            # the commit point is passed: the rest mirrors it, or the next open does
            index = store.index()
            for path, _old, new in diff:
                if new is None:
                    worktree.remove(store.root, path)
                    index.remove(path)
                else:
                    index.set(path, new, worktree.write(store.root, path, git.read_blob(new)))
            store._write_index(index, lock)
        redactstage.finish_local(store, manifest)
    return {**p.to_json(), "record": record, "before": old_head, "after": record,
            "remotesToPush": sorted(pushes)}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


def _late_rows(store: Store, needles: Needles, offset: int) -> None:
    """A read that began before the redaction (its snapshot rendered from the old history)
    may record its row just after the copies went in place: redact such rows too."""
    if not os.path.exists(store.ledger.path):
        return
    with store.ledger.numbering(store.ledger.last_seq):
        with open(store.ledger.path, "rb") as f:
            data = f.read()
        head, tail = data[:offset], data[offset:]
        lines = tail.split(b"\n")
        late = {i: new for i, new in ((i, _redact_line(line, needles))
                                      for i, line in enumerate(lines)) if new is not None}
        if not late:
            return
        for i, new in late.items():
            lines[i] = new
        atomic.atomic_write(store.ledger.path, head + b"\n".join(lines), durable=True)


def _undo(store: Store, old_head: str) -> None:
    """Failed before the commit point: nothing happened; the staged copies and the journal
    go. (Had the branch moved after all, they stay: the next open finishes the redaction.)"""
    if store.git.head() == old_head:
        redactstage.clear(store)
        store.journal.clear()


def _stage(store: Store, p: Plan) -> None:
    folder = redactstage.stage_dir(store)
    os.makedirs(os.path.join(folder, redactstage.PENDING_COPIES), mode=0o700, exist_ok=True)
    files: list[tuple[str, bytes]] = []
    if p.ledger:
        with open(store.ledger.path, "rb") as f:
            lines = f.read(p.ledger_size).split(b"\n")
        for i, new in p.ledger.items():
            lines[i] = new
        files.append((os.path.join(folder, redactstage.LEDGER_COPY), b"\n".join(lines)))
    for name, data in p.pending.items():
        files.append((os.path.join(folder, redactstage.PENDING_COPIES, name), data))
    if files:
        atomic.replace_many(files, durable=True)
