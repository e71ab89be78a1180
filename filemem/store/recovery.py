"""Crash repair: finishing or undoing what a killed write left (its journal), and pending
approvals a killed ``approve`` or ``reject`` left claimed. Both run under the store lock;
neither trusts ``.filemem/`` further than git confirms it."""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any

from filemem.files import atomic, packwrite, wal, worktree
from filemem.files.gitrepo import GitError
from filemem.files.layout import is_store_path
from filemem.files.worktree import JournalRecord
from filemem.shown import counted
from filemem.store.logs import log
from filemem.store.names import private_files, refusing_links
from filemem.store.pending import Record, settles

if TYPE_CHECKING:
    from filemem.store.core import Store



def _json_row(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def unfinished(store: Store) -> bool:
    """A killed write's journal (a file, or the write-ahead log's unsettled last record),
    or a write-ahead log from before a restart."""
    return store.journal.exists() or store.wal.unfinished()


def recover(store: Store) -> list[str]:
    """Finish or undo what a killed write left in the working tree, after replaying the
    write-ahead log if the machine restarted since it was written (lock held); a killed
    redaction is finished or undone last (:mod:`.redactstage`: its pruning needs the old
    commits no more), before its journal goes."""
    if store.wal.stale():
        return replay_wal(store)
    repaired = _recover_journal(store)
    with refusing_links():
        last = store.wal.unsettled()
    if last is not None:
        repaired += _recover_from(store, _journal_of(last), store.wal.path)
        store.wal.cut_torn_tail()  # a later write killed mid-append: its mark goes after
        store.wal.settle()
    return repaired


def _journal_of(r: wal.WalRecord) -> JournalRecord:
    return JournalRecord(r.paths, r.new, r.adopted, r.old)


def replay_wal(store: Store) -> list[str]:
    """After a restart (a power cut, a kernel crash), redo what the log's records made
    durable and the unsynced files may have lost: every object written again, durably;
    the branch moved on along the records from where it is (or, if its ref is torn or
    names a commit that is gone, to the last record's commit); the journal a killed write
    left acted on; then the working tree and index repaired from each record in turn as
    from its journal. The log is emptied last, so a cut during replay replays again."""
    git = store.git
    with refusing_links():
        records = store.wal.records()
    # a record's pack was not fsynced and may be torn: its objects are written again
    # loose, durably, and the pack goes (packwrite.merge_small rolls them up later)
    git.close()
    packwrite.remove(git.git_dir, [name for r in records for name in r.packs])
    wal.rewrite_objects(git.git_dir, {sha: (kind, raw) for r in records
                                      for sha, kind, raw in r.objects})
    git.clear_stale_locks()
    head = git.head()
    try:
        intact = head is not None and git.commit(head) is not None
    except (GitError, KeyError, ValueError):
        intact = False
    target = head if intact or not records else records[-1].new
    for r in records:
        if target == r.old:
            target = r.new
    if target is not None and target != head:
        log.warning("filemem: after a restart, moving the store's branch from %s to %s "
                    "(writes its log made durable)", head, target)
        with atomic.LockFile(git.file_of(git.head_ref()), durable=True) as ref:
            ref.write(target.encode() + b"\n")
            ref.commit()
    repaired = _recover_journal(store)
    for r in records:
        repaired += _recover_from(store, _journal_of(r), store.wal.path)
    store.wal.reset()
    return repaired


def _recover_journal(store: Store) -> list[str]:
    with refusing_links():
        record = store.journal.read_all()
    if record is None:
        return []
    repaired = _recover_from(store, record, store.journal.path)
    store.journal.clear()
    return repaired


def _recover_from(store: Store, record: JournalRecord, written: str) -> list[str]:
    """Finish or undo the write ``record`` describes (``written``: the file it was
    written to, the journal or the log: an index.lock newer than it is that write's)."""
    paths = trusted(store, record.old_head, record.new_head, record.paths)
    store.git.clear_stale_locks()
    lock = os.path.join(store.git.git_dir, "index.lock")
    with contextlib.suppress(FileNotFoundError):
        if os.stat(lock).st_mtime_ns >= os.stat(written).st_mtime_ns:
            os.unlink(lock)  # ours: taken after the journal was written
    head = store.git.head()
    if record.old_head is not None and record.old_head != record.new_head \
            and head == record.old_head:
        # its commit never landed, and a write touches the working tree only after its
        # compare-and-swap: every file is as the person left it (a deleted entry too)
        paths = {}
    tree = store.git.commit(head).tree if head else None
    head_blob = {p: (store.git.blob_at(tree, p) if tree else None) for p in paths}
    data = {sha: store.git.read_blob(sha) for sha in head_blob.values() if sha}
    for _old, new in paths.values():  # to recognise a torn new file (worktree.repair)
        if new and new not in data:
            with contextlib.suppress(KeyError, GitError):
                data[new] = store.git.read_blob(new)
    with private_files():
        # hand edits an adopt took in are replaced only if its commit is HEAD
        adopted = record.adopted if head is not None and head == record.new_head else {}
        repaired = worktree.repair(store.root, paths, head_blob, data, adopted)
        index = store.index()
        for path, sha in head_blob.items():
            if sha is None:
                index.remove(path)
                continue
            try:
                content = worktree.read(store.root, path)
            except worktree.REFUSED:
                content = None  # a person's link, FIFO, unreadable file: not HEAD's file
            clean = content is not None and content == data[sha]
            index.set(path, sha, os.stat(worktree.full_path(store.root, path))
                      if clean else None)
        store._write_index(index)
    from filemem.store import redactstage  # a repair under the lock: not for a read

    if os.path.isdir(redactstage.stage_dir(store)):
        redactstage.recover(store)
    return repaired


def settled(store: Store, record: Record) -> bool:
    """Whether pending ``record`` was approved (its write committed) or rejected: an
    audit row names it, in a commit newer than its staging or in the ledger."""
    pid = str(record.get("id", ""))
    if not pid:
        return False
    head = store.git.head()
    if head is not None:
        for info in store.git.newest_first(head):
            if pid not in info.message:
                continue
            rows = store.trail.commit_rows(info)
            if any(settles(r, pid) for r in rows):
                return True
            if any(str(r["action"]).endswith("-pending") and
                   f"staged as {pid}" in str(r["outcome"]) for r in rows):
                break  # its staging: nothing older settles it
    with contextlib.suppress(FileNotFoundError), \
            open(store.ledger.path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if pid in line and settles(_json_row(line), pid):
                return True
    return False

def trusted(store: Store, old: str | None, new: str | None,
             paths: dict[str, tuple[str | None, str | None]]
             ) -> dict[str, tuple[str | None, str | None]]:
    """The journal's paths that it may have written itself: store paths (not outside
    the store, in ``.git/`` or ``.filemem/``, nor through a linked folder) whose old and
    new blobs are those of its old and new commits (for a discard, which does not move
    HEAD: whose new blob is HEAD's). Any other is left alone, warned of."""
    trees: dict[str | None, str | None] = {None: None}
    for commit in (old, new):
        try:
            trees[commit] = store.git.commit(commit).tree if commit else None
        except (GitError, KeyError, ValueError, TypeError):
            trees[commit] = ""  # not a commit: no blob can match it
    kept, refused = {}, []
    for path, (old_blob, new_blob) in paths.items():
        ok = is_store_path(path) and worktree.linked_folder(store.root, path) is None
        # a discard journals the hand edit as "old" over an unmoved HEAD: only the
        # version it puts back must be HEAD's
        checks = [(new, new_blob)] if old == new else [(old, old_blob), (new, new_blob)]
        if ok:
            for commit, blob in checks:
                tree = trees[commit]
                try:
                    at = store.git.blob_at(tree, path) if tree else None
                except (GitError, KeyError, ValueError):
                    at = None
                ok = ok and tree != "" and at == blob
        if ok:
            kept[path] = (old_blob, new_blob)
        else:
            refused.append(path)
    if refused:
        log.warning("filemem: ignoring %s of %s that a filemem write did not "
                    "journal (not a store file, through a link, or not the blobs of its "
                    "commits): %s", counted(len(refused), "path"), store.journal.path,
                    ", ".join(repr(p) for p in refused[:5]))
    return kept
