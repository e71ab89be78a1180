"""The local state a redaction rewrites, staged so that a kill leaves it before or after.

``filemem redact`` writes the redacted copies of the read-side ledger and of the pending
approvals into ``.filemem/redaction/`` and a manifest naming the branch's old and new
value, then moves the branch (the commit point). From then on the redaction has happened
and :func:`finish` completes it: the copies replace the originals (rows appended to the
ledger after the copy was made are kept), the view cache is deleted, other refs move, the
remotes to rewrite are noted for ``filemem sync``, and the old objects are pruned. A kill
before the branch moved leaves the store as it was: :func:`recover` drops the copies.
Nothing here holds the redacted text: the copies are already without it, and the
manifest names commits only.

:func:`recover` runs from the store's crash repair (the redaction's worktree journal is
kept until the very end, so the next open or write gets there).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any, Final

from filemem.files import atomic, gitprune
from filemem.store.names import private_files

if TYPE_CHECKING:
    from filemem.store.core import Store

STAGE_DIR: Final = "redaction"
MANIFEST: Final = "manifest.json"
PUSHES: Final = "redaction-push.json"
LEDGER_COPY: Final = "audit.jsonl"
PENDING_COPIES: Final = "pending"


def stage_dir(store: Store) -> str:
    return os.path.join(store.meta, STAGE_DIR)


def clear(store: Store) -> None:
    """Drop what a redaction killed before its commit point staged (lock held)."""
    import shutil  # here: a cold command that only reads never loads it (nor bz2, lzma)

    shutil.rmtree(stage_dir(store), ignore_errors=True)


def read_manifest(store: Store) -> dict[str, Any] | None:
    try:
        raw = json.loads(atomic.read_nofollow(os.path.join(stage_dir(store), MANIFEST)))
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) and isinstance(raw.get("old"), str) else None


def write_manifest(store: Store, manifest: dict[str, Any]) -> None:
    atomic.atomic_write(os.path.join(stage_dir(store), MANIFEST),
                        json.dumps(manifest).encode(), durable=True)


def finish_local(store: Store, manifest: dict[str, Any]) -> None:
    """Put the staged copies in place, drop the view cache, move the other refs and note
    the remotes to push to. Idempotent: run again after a kill, it does what is left."""
    folder = stage_dir(store)
    with private_files():
        copy = os.path.join(folder, LEDGER_COPY)
        if os.path.exists(copy):
            with open(copy, "rb") as f:
                data = f.read()
            with contextlib.suppress(FileNotFoundError), open(store.ledger.path, "rb") as f:
                f.seek(int(manifest.get("ledgerSize") or 0))
                data += f.read()  # rows recorded after the copy was made (after a kill)
            atomic.atomic_write(store.ledger.path, data, durable=True)
            os.unlink(copy)
        pending = os.path.join(folder, PENDING_COPIES)
        for name in sorted(os.listdir(pending)) if os.path.isdir(pending) else ():
            live = os.path.join(store.pending.dir, name)
            if os.path.exists(live):  # not approved or rejected since
                with open(os.path.join(pending, name), "rb") as f:
                    atomic.atomic_write(live, f.read(), durable=True)
            os.unlink(os.path.join(pending, name))
        drop_cache(store)
        others = {ref: (old, new) for ref, (old, new) in manifest.get("refs", {}).items()
                  if ref != manifest.get("branch")}
        gitprune.move_refs(store.git.repo, others)
        pushes = read_pushes(store)
        for remote, push in (manifest.get("pushes") or {}).items():
            pushes[remote] = _noted(pushes.get(remote), push)
        if pushes:
            atomic.atomic_write(os.path.join(store.meta, PUSHES),
                                json.dumps(pushes).encode(), durable=True)


def _noted(before: Any, push: dict[str, Any]) -> Any:
    """The push to a remote a redaction leaves, beside one an earlier redaction left
    (``before``): a second redaction before a sync rewrote the first one's rewritten
    history, whose remote is still where the first lease says (its own lease is that
    rewritten history, which the remote never held)."""
    if not isinstance(before, dict) or before.get("rewritten") == push.get("rewritten"):
        return push if not isinstance(before, dict) else before  # (a run again after a kill)
    if push.get("lease") == before.get("rewritten"):
        return {**push, "lease": before.get("lease")}
    return push  # the tracking ref moved meanwhile (a fetch): the remote's value now


def drop_cache(store: Store) -> None:
    """Every cache in ``.filemem/cache/`` goes (each is rebuilt from git when missing): the
    view cache holds the texts of entries as they were, and any memo of commits names
    commits that no longer exist; so do the audit rows kept in memory."""
    folder = os.path.dirname(store._cache.path)
    for name in os.listdir(folder) if os.path.isdir(folder) else ():
        path = os.path.join(folder, name)
        if os.path.islink(path) or os.path.isfile(path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    store._parsed.clear()
    store._state = None
    store.trail.forget()
    store.git.forget()


def forget_old_history(store: Store) -> None:
    """Prune what only the old history reached (lock held); reopens git afterwards."""
    store.git.close()
    gitprune.forget_unreachable(store.root)
    store.git.close()


def recover(store: Store) -> None:
    """A redaction killed midway (lock held): finished if its branch moved, else undone."""
    manifest = read_manifest(store)
    if manifest is None:
        clear(store)
        return
    if store.git.head() == manifest["old"]:
        clear(store)  # its commit point was not reached: the store is as before
        return
    finish_local(store, manifest)
    forget_old_history(store)
    clear(store)


def read_pushes(store: Store) -> dict[str, Any]:
    """Remote name -> {"lease": the remote's value before the redaction, "rewritten": it
    rewritten here}: what ``filemem sync`` still has to push with a compare-and-swap."""
    try:
        raw = json.loads(atomic.read_nofollow(os.path.join(store.meta, PUSHES)))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def push_done(store: Store, remote: str) -> None:
    pushes = read_pushes(store)
    if pushes.pop(remote, None) is None:
        return
    path = os.path.join(store.meta, PUSHES)
    if pushes:
        atomic.atomic_write(path, json.dumps(pushes).encode(), durable=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
