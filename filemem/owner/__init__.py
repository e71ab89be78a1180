"""The owner's side of a store, behind one facade: :class:`Owner`.

Pending approvals (list, approve, reject), hand edits (status, diff, adopt, discard),
history (log, verify), remotes and sync, and watching. These exist only for the owner (the
``filemem`` CLI and the owner's own Python programs): no agent tool, MCP tool or bridge
method reaches them. Surfaces use this class and the Provider, never the store beneath. ::

    import filemem

    with filemem.open_owner("~/memory") as owner:
        for change in owner.status():
            print(change.kind, change.path)
        owner.adopt()
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from filemem import errors, shown
from filemem.approval import ApprovalRequest
from filemem.config import Config
from filemem.files import atomic, worktree
from filemem.model import DEFAULT_SOURCE
from filemem.provider import Provider
from filemem.rules import findings as checks
from filemem.session import writer_of
from filemem.store.auditlog import row
from filemem.store.names import private_files
from filemem.store.pending import Record, approved_by, rejected_by
from filemem.types import OwnerImportResult

# Each of the owner's modules is imported by the method that uses it: `filemem verify` does
# not pay for sync, redaction or the adapters (importing them all doubled a cold owner
# command's start-up). The names this package re-exports load the same way (:func:`__getattr__`).
if TYPE_CHECKING:
    from filemem.owner import redact, watch
    from filemem.owner.filemerge import Prefer
    from filemem.owner.handedits import Change, InProgress
    from filemem.owner.history import Report
    from filemem.owner.remotes import Progress, Remote, normalize_url
    from filemem.owner.sync import SyncResult

_EXPORTED: dict[str, str] = {"Change": "handedits", "Prefer": "filemerge", "Remote": "remotes",
                             "Report": "history", "SyncResult": "sync",
                             "normalize_url": "remotes"}


def __getattr__(name: str) -> Any:
    """The re-exported names, each imported from its module on first use."""
    if name not in _EXPORTED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTED[name]}"), name)


class OwnerApproval:
    """The approval transport of ``filemem approve``: the owner already said yes."""

    def __init__(self, pending_id: str) -> None:
        self.name = approved_by(pending_id)

    def __call__(self, request: ApprovalRequest) -> str:
        return "allowed-once"


def _pending(provider: Provider) -> list[Record]:
    """Every pending approval, oldest first, with its full payload."""
    return provider.store.pending.list()


def _approve(provider: Provider, pending_id: str) -> dict[str, Any]:
    """Run a pending write through the full pipeline again and commit it.

    PROPOSAL_NOT_FOUND for an id that is not pending. If the write fails (its target
    changed since it was staged, the budget filled up) it stays pending and the error is
    raised; `filemem reject` drops it.
    """
    provider.store.refuse_unfinished_git()  # before the claim: it stays pending as it is
    store = provider.store.pending
    record = store.claim(pending_id)
    try:
        result = provider._run_pending(record, OwnerApproval(record["id"]))
    except BaseException:
        store.release(record["id"])
        raise
    store.drop(record["id"])
    return {"id": record["id"], "result": result}


def _reject(provider: Provider, pending_id: str, reason: str | None = None) -> Record:
    """Drop a pending write; leaves an ``<action>-denied`` audit row saying the owner
    rejected it."""
    provider.store.refuse_unfinished_git()  # its denied row would be a commit
    store = provider.store.pending
    record = store.claim(pending_id)
    payload = record["payload"]
    w = writer_of(record["write"])
    note = f": {reason}" if reason else ""
    r = row(f"{payload['action']}-denied", track=payload["track"], scope=payload["scope"],
            text=payload["text"], source=payload.get("source") or DEFAULT_SOURCE,
            session_id=w.session_id,
            outcome=f"rejected (via {rejected_by(record['id'])}{note})")
    try:
        provider.store.record([r], body=payload["text"],
                              subject=f"{payload['action']}-denied {payload['track']}/"
                                      f"{payload['scope']} (pending {record['id']} rejected): "
                                      f"{payload['text']}")
    except BaseException:
        store.release(record["id"])
        raise
    store.drop(record["id"])
    return record


class Owner:
    """Everything the owner may do with one store, over its :class:`Provider`."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self._store = provider.store

    @property
    def path(self) -> str:
        return self.provider.path

    def close(self) -> None:
        self.provider.close()

    def __enter__(self) -> Owner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ pending approvals

    def pending(self) -> list[Record]:
        """Every pending approval, oldest first, with its full payload."""
        return _pending(self.provider)

    def notes(self, text: str) -> list[str]:
        """What the store's checks say about ``text`` for a person: the hidden-character
        warning line, then one line per finding (``filemem pending``, ``filemem log``)."""
        warning = shown.warning(text)
        state = self._store.state()  # not checked: a store with a bad file still lists
        cfg = self.provider.config(state) if state.config is not None else Config()
        found = checks.scan(text, cfg)
        return ([warning] if warning else []) + checks.describe(found)

    def approve(self, pending_id: str) -> dict[str, Any]:
        """Run a pending write through the full pipeline again and commit it."""
        return _approve(self.provider, pending_id)

    def reject(self, pending_id: str, reason: str | None = None) -> Record:
        """Drop a pending write, leaving an ``<action>-denied`` audit row."""
        return _reject(self.provider, pending_id, reason)

    # ------------------------------------------------------------ imports

    def import_entries(self, inputs: Any, write: Any, *, keep_duplicates: bool = False,
                       adapter_id: str | None = None) -> OwnerImportResult:
        """Import another tool's entries (an adapter's output) in one approval and one
        commit, skipping those whose text is already in the same layer, or earlier in the
        same import, and (with ``adapter_id``) memories that adapter imported before in the
        version given, unless ``keep_duplicates`` (see :mod:`filemem.owner.imports`)."""
        from filemem.owner import imports
        return imports.import_entries(self.provider, inputs, write,
                                      keep_duplicates=keep_duplicates, adapter_id=adapter_id)

    # ------------------------------------------------------------ hand edits

    def status(self, *, budget_check: bool = True) -> list[Change]:
        """Uncommitted changes in the working tree, each with why it cannot be adopted."""
        from filemem.owner import handedits
        return handedits.status(self._store, budget_check=budget_check)

    def git_operation(self) -> InProgress | None:
        """The git merge, rebase, cherry-pick, revert, ``git am`` or bisect unfinished in
        the store (writes are refused until it is finished or aborted), or None."""
        from filemem.owner import handedits
        return handedits.in_progress(self._store)

    def refuse_unfinished_git(self) -> None:
        """GitOperationInProgress if :meth:`git_operation` finds one: adopt, discard,
        approve, reject and sync refuse to run then (they check it themselves too)."""
        self._store.refuse_unfinished_git()

    def invalid(self, changes: list[Change] | None = None) -> list[Change]:
        """The files committed invalid at HEAD, each with its STORE_CORRUPT error (``at_head``:
        the file, the commit that brought it, the way out); one of ``changes`` (from
        :meth:`status`) if the working tree already changes it. Agents' reads and writes
        fail until they are mended; the owner's commands keep working."""
        from filemem.owner import handedits
        return handedits.invalid(self._store, changes)

    def changes(self, paths: Iterable[str] | None = None, *,
                budget_check: bool = True, as_is: bool = False) -> list[Change]:
        """The changes at ``paths`` (default: all); budgets checked for exactly those.
        ``as_is`` (to adopt): a file ``paths`` name that is invalid at HEAD, unchanged and
        adoptable as it is (bare text committed with git) is one of them."""
        from filemem.owner import handedits
        picked = handedits.named(self._store, paths, as_is)
        if budget_check:
            handedits.check_budgets(self._store, picked)
        return picked

    def diff(self, change: Change) -> str:
        """A unified diff of one change against HEAD, as git shows it."""
        state = self._store.state()
        git = self._store.git
        head_blob = state.blobs.get(change.path) if change.is_entry else \
            git.blob_at(state.tree, change.path)
        before = git.read_blob(head_blob).decode("utf-8", "replace") if head_blob else ""
        root = self._store.root  # a link: what it points to is never read
        after, odd = worktree.read_checked(root, change.path)
        if odd is not None:  # no diff to show: the change's problem says what is there
            return ""
        after_text = after.decode("utf-8", "replace") if after is not None else ""
        import difflib
        lines = difflib.unified_diff(
            before.splitlines(keepends=True), after_text.splitlines(keepends=True),
            fromfile=f"a/{change.path}" if head_blob else "/dev/null",
            tofile=f"b/{change.path}" if after is not None else "/dev/null")
        # like git: a last line without a newline is marked, not glued to the next one
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)

    def adopt(self, paths: Iterable[str] | None = None) -> list[Change]:
        """Commit the hand edits at ``paths`` (default: all) as one commit."""
        from filemem.owner import handedits
        return handedits.adopt(self._store, paths)

    def discard(self, paths: Iterable[str] | None = None) -> list[Change]:
        """Put the files at ``paths`` (default: all) back as committed."""
        from filemem.owner import handedits
        return handedits.discard(self._store, paths)

    # ------------------------------------------------------------ history

    def log(self, entry_id: str | None = None, limit: int | None = None
            ) -> list[dict[str, Any]]:
        from filemem.owner import logview
        return logview.log(self._store, entry_id, limit)

    def history(self, entry_id: str | None = None, limit: int | None = None
                ) -> Iterator[dict[str, Any]]:
        """:meth:`log`'s items one by one, as the history is walked (the newest at once)."""
        from filemem.owner import logview
        return logview.history(self._store, entry_id, limit)

    def verify(self, progress: Callable[[int, int], None] | None = None, *,
               full: bool = False) -> Report:
        """Replay the history (``full``: all of it, not only what came since the last
        clean verify); ``progress(done, total)`` after each commit."""
        from filemem.owner import history
        return history.verify(self._store, progress, full=full)

    # ------------------------------------------------------------ redaction

    def redact_plan(self, entry_id: str | None = None, text: str | None = None,
                    progress: Callable[[int], None] | None = None) -> redact.Plan:
        """What redacting an entry (its every text) or a text would change; changes nothing.
        ``progress`` is told the commits read so far, every thousand."""
        from filemem.owner import redact
        return redact.plan(self._store, entry_id, text, progress)

    def redact(self, entry_id: str | None = None, text: str | None = None,
               progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Remove an entry's texts, or a text, from the whole history (owner only);
        ``progress`` as for :meth:`redact_plan`."""
        from filemem.owner import redact
        return redact.apply(self._store, entry_id, text, progress)

    # ------------------------------------------------------------ remotes and sync

    def remotes(self) -> list[Remote]:
        from filemem.owner import remotes
        return remotes.remotes(self._store.git)

    def add_remote(self, name: str, url: str) -> Remote:
        from filemem.owner import remotes
        return remotes.add_remote(self._store, name, url)

    def remove_remote(self, name: str) -> Remote:
        from filemem.owner import remotes
        return remotes.remove_remote(self._store, name)

    def sync(self, name: str | None = None, *, progress: Progress | None = None,
             keep_config: Prefer | None = None) -> SyncResult:
        """Fetch, integrate, push. ``keep_config`` ("local" or "remote") decides the keys of
        filemem.yaml both sides changed differently (otherwise CONFIG_CONFLICT)."""
        from filemem.owner import sync
        return sync.sync(self._store, name, progress=progress, keep_config=keep_config)

    # ------------------------------------------------------------ watching

    def watcher(self, emit: Callable[[watch.Event], None]) -> watch.Watcher:
        """A watcher reporting hand edits and HEAD moving to ``emit`` (call ``start``)."""
        from filemem.owner import watch
        return watch.Watcher(self._store, emit)


def write_export(path: str, data: bytes) -> None:
    """Write an export (another tool's memory file, an envelope) to ``path``: a regular file
    is replaced whole and durably (never truncated, then half written), private to the
    owner like the store's files (0600, whatever the umask: it holds the same memories); a
    device or pipe such as ``/dev/stdout`` is written to as it is."""
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, "wb") as f:
            f.write(data)
        return
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise errors.invalid_input(
            f"export: the folder {os.path.dirname(os.path.abspath(path))} does not exist; "
            "create it first (nothing was written)")
    atomic.atomic_write(path, data, durable=True, mode=0o600)


def make_export_folder(path: str) -> None:
    """The folder a directory export is written to: made 0700 (missing parents too) if it
    is not there; a folder that exists is left as it is."""
    with private_files():
        os.makedirs(path, mode=0o700, exist_ok=True)


def clone(url: str, path: str, *, progress: Progress | None = None) -> str:
    """Make a new store at ``path`` from the store published at ``url``; returns its path."""
    from filemem.owner import sync
    return sync.clone(url, path, progress=progress)


__all__ = ["Change", "Owner", "OwnerApproval", "Prefer", "Remote", "Report", "SyncResult", "clone",
           "make_export_folder", "normalize_url", "write_export"]
