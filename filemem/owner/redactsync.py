"""Sync after a redaction: the remote rewritten by compare-and-swap, never merged back.

On the machine that redacted, the remote's history still holds the text, so
``filemem sync`` does not fetch it: it pushes the rewritten history over the remote's
value from before the redaction (the *lease*, noted by :mod:`filemem.store.redactstage`),
and only if the remote is still there (git's ``--force-with-lease=main:<old>``). If
someone pushed meanwhile, nothing is pushed, and the message says how to redact their
commits too.

On another machine, the fetched history carries the record of the redaction (its audit
row ``redact`` and, in its body, the refs it rewrote and the first commits it rewrote, the
*roots*). A store whose history holds a root has the old history: if it has nothing else
(its branch is in the old history the redaction covered), sync takes the rewritten history
in its place and prunes the old objects; if it has commits of its own made on the old
history, they may hold the text: sync refuses until they are redacted here as well (the
same redaction gives the same commits, so the histories then meet). The other way round,
a remote that still has the old history of a redaction made here is refused too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from filemem import location
from filemem.errors import SyncError
from filemem.files.gitrepo import GitRepo
from filemem.owner import gitwalk
from filemem.owner.merge import merge_base
from filemem.owner.remotes import Remote, remote_head
from filemem.store import redactstage
from filemem.store.core import Store

_MARK = "\nAudit-Action: redact\n"


@dataclass
class Record:
    """What a redaction's record commit says about the history it replaced."""

    sha: str
    old_tips: set[str] = field(default_factory=set)
    roots: set[str] = field(default_factory=set)


def _records(git: GitRepo, include: str, exclude: str | None) -> list[Record]:
    """The redaction records among the commits of ``include`` not in ``exclude``, newest
    first (by ``git rev-list`` when it can: a sync bringing 10,000 commits spent 4 s here
    in dulwich's walk)."""
    shas = gitwalk.grep(git, include, exclude, _MARK.strip("\n"))
    if shas is not None:
        found = [(sha, git.commit(sha).message) for sha in shas]
    else:
        repo: Any = git.repo
        walker = repo.get_walker(include=[include.encode()],
                                 exclude=[exclude.encode()] if exclude else None)
        found = [(e.commit.id.decode(), e.commit.message.decode("utf-8", "replace"))
                 for e in walker]
    out = []
    for sha, message in found:
        if _MARK not in message:
            continue
        rec = Record(sha)
        for line in message.split("\n"):
            key, _, value = line.partition(": ")
            if key == "Redacted-Ref" and len(value.split()) == 3:
                rec.old_tips.add(value.split()[1])
            elif key == "Redacted-Root" and len(value) == 40:
                rec.roots.add(value)
        out.append(rec)
    return out


def _has(git: GitRepo, sha: str) -> bool:
    store: Any = git.repo.object_store
    return sha.encode() in store


def _ancestor(git: GitRepo, old: str, new: str) -> bool:
    return old == new or (_has(git, old) and _has(git, new) and merge_base(git, old, new) == old)


def lease(store: Store, remote: Remote) -> dict[str, str] | None:
    """The pending push of a redaction to ``remote``: {"lease", "rewritten"}, or None."""
    got = redactstage.read_pushes(store).get(remote.name)
    if isinstance(got, dict) and isinstance(got.get("rewritten"), str):
        return {"lease": str(got.get("lease") or ""), "rewritten": got["rewritten"]}
    return None


def check_lease(store: Store, remote: Remote, pending: dict[str, str]) -> bool:
    """Before pushing a rewritten history: True if the remote is still at its lease (push
    over it), False if it already has this store's history (a push a kill interrupted: the
    lease is done). SyncError REMOTE_MOVED if it moved elsewhere."""
    current = remote_head(store.git, remote)
    if current == (pending["lease"] or None):
        return True
    local = store.git.head()
    if current is not None and local is not None and _ancestor(store.git, current, local):
        redactstage.push_done(store, remote.name)
        return False
    raise SyncError(
        "REMOTE_MOVED", f"{remote.name} ({remote.url}) moved since this store was redacted "
        f"(it was at {pending['lease'][:12]}, it is at {(current or 'nothing')[:12]}): "
        "another machine pushed commits made on the history from before the redaction, "
        "which may hold the redacted text again. Nothing was pushed or fetched. To keep "
        f"them: `git -C {store.root} fetch {remote.name}`, then run the same `filemem "
        "redact` again (it rewrites the fetched commits as well), then "
        f"`{location.command(store.root, 'sync', remote.name)}`",
        {"remote": remote.name, "lease": pending["lease"], "remoteCommit": current})


def arriving(store: Store, remote: Remote, ours: str, theirs: str,
             tracking_before: str | None) -> bool:
    """Whether fetched ``theirs`` is a redacted history to take in place of ours (True),
    or to merge as usual (False); SyncError if merging would bring redacted text back."""
    git = store.git
    mine = [r for r in _records(git, ours, theirs) if r.roots]
    if any(_ancestor(git, root, theirs) for r in mine for root in r.roots):
        raise SyncError(
            "REMOTE_HOLDS_REDACTED", f"{remote.name}/main ({theirs[:12]}) has commits of the "
            "history from before a redaction made here, which may hold the redacted text. "
            f"Nothing was merged or pushed; the fetched commits stay in {remote.name}/main "
            "until then. Run the same `filemem redact` again (it rewrites "
            f"the fetched commits of {remote.name} as well), then "
            f"`{location.command(store.root, 'sync', remote.name)}`",
            {"remote": remote.name, "remoteCommit": theirs})
    records = _records(git, theirs, ours)
    roots = {root for r in records for root in r.roots}
    if not any(_ancestor(git, root, ours) for root in roots):
        return False  # this store has none of the history the redaction replaced
    tips = {t for r in records for t in r.old_tips} | ({tracking_before} - {None})
    if any(_ancestor(git, ours, tip) for tip in tips if tip):
        return True
    # the redaction that rewrote the history this store's own commits sit on
    found = next((r for r in records if any(_ancestor(git, root, ours) for root in r.roots)),
                 records[0])
    record = found.sha[:12]
    raise SyncError(
        "LOCAL_HOLDS_REDACTED", f"{remote.name}/main was redacted (record {record}: `git show "
        f"{record}` says what), and this store has commits of its own made on the history "
        "from before it, which may hold the redacted text. Nothing was merged or pushed. "
        "Run the same `filemem redact` here (the entry id or the text), then "
        f"`{location.command(store.root, 'sync', remote.name)}`: the rewritten histories "
        "then meet",
        {"remote": remote.name, "record": found.sha})


def forget(store: Store) -> None:
    """After taking a redacted history: the old one's objects and the view cache go."""
    with store.locked():
        store.wal.checkpoint(store.git)  # its records may hold the old history's objects
        redactstage.forget_old_history(store)
        redactstage.drop_cache(store)


def tracking(store: Store, remote: Remote) -> str | None:
    """Where this store last saw the remote's ``main`` (before a fetch moves it)."""
    from filemem.owner.remotes import tracking_ref

    refs: Any = store.git.repo.refs
    try:
        return str(refs[tracking_ref(remote)].decode())
    except KeyError:
        return None
