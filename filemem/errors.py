"""Every error filemem raises on purpose, under one root::

    FilememError              code, message, details; nothing was changed unless it says so
    ├── ProtocolError         a dsh-memory-protocol/v1 error (INVALID_INPUT ... ADAPTER_PAYLOAD)
    │   └── PolicyRefused     WRITE_DENIED (rejected) by a write policy of ``off``
    ├── StoreNotFound         no store at the path (NO_STORE)
    ├── StoreExists           ``init`` into a folder that is not empty (STORE_EXISTS)
    ├── StoreBusy             the store lock, git's index.lock or the branch's lock stays taken
    │                         (STORE_BUSY)
    ├── StoreFull             the disk (or quota) holding the store is full (STORE_FULL)
    ├── StoreReadOnly         a write to a store this process cannot write (STORE_READ_ONLY)
    ├── GitOperationInProgress  a git merge, rebase, cherry-pick, revert, am or bisect is
    │                         unfinished in the store (GIT_OPERATION_IN_PROGRESS)
    ├── SyncError             a remote or sync that cannot go on (NO_REMOTE, PUSH_REJECTED, ...)
    └── ConnectError          connecting to an agent cannot go on (CONFIG_INVALID,
                              CONFIG_UNWRITABLE, NAME_TAKEN, AGENT_CLI_FAILED,
                              AGENT_NOT_FOUND)

Callers branch on the class or on ``code``; each surface maps them through one table of its
own (CLI exit codes, JSON-RPC codes, MCP tool errors). A damaged git repository (a missing or
unreadable object; a HEAD not on the store's branch, ``OffBranch``) is ``STORE_CORRUPT``:
``filemem.files.gitrepo``'s ``RepositoryDamaged``, a ProtocolError that names the object
and the way out; a file committed invalid at HEAD is ``STORE_CORRUPT`` from
:func:`bad_file`, naming the file, the commit that brought it and the way out. Messages stay
English: they are part of the audit contract and other providers compare them.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

from filemem.jsstr import js_json
from filemem.shown import counted
from filemem.types import Place

INVALID_INPUT = "INVALID_INPUT"
WRITE_REQUIRES_AGENT = "WRITE_REQUIRES_AGENT"
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
ENTRY_NOT_FOUND = "ENTRY_NOT_FOUND"
AMBIGUOUS_MATCH = "AMBIGUOUS_MATCH"
WRITE_DENIED = "WRITE_DENIED"
PROPOSAL_NOT_FOUND = "PROPOSAL_NOT_FOUND"
STORE_CORRUPT = "STORE_CORRUPT"
STORE_UNSUPPORTED_VERSION = "STORE_UNSUPPORTED_VERSION"
ADAPTER_NOT_FOUND = "ADAPTER_NOT_FOUND"
ADAPTER_PAYLOAD = "ADAPTER_PAYLOAD"

CODES = (
    INVALID_INPUT,
    WRITE_REQUIRES_AGENT,
    BUDGET_EXCEEDED,
    ENTRY_NOT_FOUND,
    AMBIGUOUS_MATCH,
    WRITE_DENIED,
    PROPOSAL_NOT_FOUND,
    STORE_CORRUPT,
    STORE_UNSUPPORTED_VERSION,
    ADAPTER_NOT_FOUND,
    ADAPTER_PAYLOAD,
)


NO_STORE = "NO_STORE"
STORE_EXISTS = "STORE_EXISTS"
STORE_BUSY = "STORE_BUSY"
STORE_FULL = "STORE_FULL"
STORE_READ_ONLY = "STORE_READ_ONLY"
GIT_OPERATION_IN_PROGRESS = "GIT_OPERATION_IN_PROGRESS"
CONFIG_INVALID = "CONFIG_INVALID"  # another tool's config file filemem must edit is unusable
NAME_TAKEN = "NAME_TAKEN"  # a name filemem would use (server, plugin folder) is taken
CONFIG_UNWRITABLE = "CONFIG_UNWRITABLE"  # such a file cannot be written (permissions, disk)
AGENT_CLI_FAILED = "AGENT_CLI_FAILED"  # the agent's own command (`claude mcp add`) failed
AGENT_NOT_FOUND = "AGENT_NOT_FOUND"  # the agent to connect does not look installed


class FilememError(Exception):
    """The root of filemem's errors: a stable ``code``, an English ``message`` and JSON-safe
    ``details``."""

    code: str
    message: str
    details: dict[str, Any]

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, {self.details!r})"


class ProtocolError(FilememError):
    """A dsh-memory-protocol/v1 error. Nothing was changed when one is raised."""


class StoreNotFound(FilememError):
    """There is no filemem store at the path (``filemem init`` makes one)."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, NO_STORE, message)


class StoreExists(FilememError, FileExistsError):
    """A new store was asked for in a folder that exists and is not empty."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, STORE_EXISTS, message)


class StoreBusy(FilememError, TimeoutError):
    """Another process holds the store: its lock for too long, or git's ``index.lock``.
    Nothing was written; trying again later is the answer."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, STORE_BUSY, message)


class StoreFull(FilememError, OSError):
    """No space left for the store's files. Nothing half-written was given a real name: the
    store is as it was before the write; free some space and try again."""

    def __init__(self, message: str) -> None:
        FilememError.__init__(self, STORE_FULL, message)


class StoreReadOnly(FilememError, PermissionError):
    """A write (or sync) to a store this process cannot write: a read-only mount, files
    owned by another user. Reads still work; nothing was written."""

    def __init__(self, root: str, detail: str) -> None:
        FilememError.__init__(
            self, STORE_READ_ONLY,
            f"the store at {root} is read-only ({detail}); reads work, but nothing can be "
            "written to it; nothing was written", {"path": root})


class GitOperationInProgress(FilememError):
    """A write (or sync) refused because a git command stopped half way in the store (a
    ``git merge`` or ``git pull`` with conflicts, a rebase, cherry-pick, revert, ``git am``,
    a bisect) and waits for the person to finish or abort it: filemem never commits on top
    of it. The message names the operation and the ways out; ``details``: ``path`` (the
    store), ``operation`` (merge, rebase, cherry-pick, revert, am, bisect), ``marker`` (what
    in ``.git`` shows it) and ``conflicts`` (the files git left unmerged). Reads still work;
    nothing was written."""

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        FilememError.__init__(self, GIT_OPERATION_IN_PROGRESS, message, details)


class SyncError(FilememError):
    """A remote or sync operation that cannot go on. The message says why and what to do;
    ``code`` is stable for scripts (NO_REMOTE, REMOTE_EXISTS, REMOTE_UNREACHABLE,
    REMOTE_NOT_A_STORE, REMOTE_INVALID, PUSH_REJECTED, REMOTE_BUSY, SYNC_BUSY, BAD_REMOTE,
    CONFIG_CONFLICT, and after a redaction REMOTE_MOVED, LOCAL_HOLDS_REDACTED,
    REMOTE_HOLDS_REDACTED). Nothing in the local store was changed unless the message says so."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(code, message, details)


class ConnectError(FilememError):
    """Connecting filemem to an agent (or disconnecting it) cannot go on: one of the
    agent's configuration files is unusable (CONFIG_INVALID: not valid JSON or YAML, which
    file and line) or cannot be written (CONFIG_UNWRITABLE), a name filemem would take is
    used by something else (NAME_TAKEN), the agent's own command failed
    (AGENT_CLI_FAILED), or the agent does not look installed (AGENT_NOT_FOUND). The message
    names the file or command and what to do; nothing was changed unless it says so."""


def invalid_input(message: str) -> ProtocolError:
    return ProtocolError(INVALID_INPUT, message)


def write_requires_agent() -> ProtocolError:
    return ProtocolError(
        WRITE_REQUIRES_AGENT,
        "memory write requires an owning agent session to route approval through; "
        "refuse rather than write unapproved",
    )


def budget_exceeded(track: str, scope: str, used: int, limit: int, needed: int) -> ProtocolError:
    return ProtocolError(
        BUDGET_EXCEEDED,
        f"memory budget exceeded: {track}/{scope} at {used}/{limit} chars, this write needs "
        f"{needed} chars; consolidate or remove entries, then retry",
        {"track": track, "scope": scope, "used": used, "limit": limit, "needed": needed},
    )


def grows_past_budget(details: Mapping[str, Any]) -> int | None:
    """For BUDGET_EXCEEDED's ``details``: how many chars the write itself adds, when that
    alone is more than the whole budget (removing or consolidating other entries cannot make
    room: only a shorter text or a larger budget can); None otherwise."""
    used, limit, needed = details.get("used"), details.get("limit"), details.get("needed")
    if not (isinstance(used, int) and isinstance(limit, int) and isinstance(needed, int)):
        return None
    grows = needed - used
    return grows if grows > limit else None


def searched(scope: str, workspace_key: str | None, agent_key: str) -> str:
    """What a match was looked for in, for a person: the agent layers and the workspace."""
    who = (f'the shared layer and agent {js_json(agent_key)}\'s layer' if agent_key
           else "the shared layer")
    where = f" of workspace {js_json(workspace_key)}" if scope == "workspace" and \
        workspace_key is not None else ""
    return who + where


def _place(p: Place) -> str:
    who = f'agent {js_json(p["agentKey"])}\'s layer' if p["agentKey"] else "the shared layer"
    where = f" of workspace {js_json(p['workspaceKey'])}" if p["workspaceKey"] is not None \
        else ""
    n = p["entries"]
    return f"{p['track']}/{p['scope']} ({who}{where}: {counted(n, 'entry', 'entries')})"


_PLACES_SHOWN = 3


def entry_not_found(track: str, scope: str, match: str, *, changed: bool = False,
                    workspace_key: str | None = None, agent_key: str = "",
                    elsewhere: list[Place] | None = None) -> ProtocolError:
    """Nothing in ``track/scope`` (as the writer sees it) contains ``match``: the message
    starts as the reference's and says what was searched and where else the match is
    (``elsewhere``, also in the details)."""
    where = searched(scope, workspace_key, agent_key)
    details: dict[str, Any] = {"track": track, "scope": scope, "match": match,
                               "workspaceKey": workspace_key, "agentKey": agent_key}
    if changed:
        message = (
            f"the entry in {track}/{scope} matching {js_json(match)} changed while approval was "
            f"pending (it is no longer the entry that was approved; searched {where}); "
            "nothing was changed"
        )
        return ProtocolError(ENTRY_NOT_FOUND, message, details)
    places = list(elsewhere or [])
    message = (f"no entry in {track}/{scope} contains {js_json(match)} (searched {where}); "
               "nothing was changed")
    if places:
        shown = "; ".join(_place(p) for p in places[:_PLACES_SHOWN])
        more = len(places) - _PLACES_SHOWN
        rest = f"; and {more} more {'layer' if more == 1 else 'layers'}" if more > 0 else ""
        message += f"; it is in {shown}{rest}"
    details["elsewhere"] = places
    return ProtocolError(ENTRY_NOT_FOUND, message, details)


def ambiguous_match(track: str, scope: str, match: str, sample: list[str], *,
                    workspace_key: str | None = None, agent_key: str = "") -> ProtocolError:
    n = len(sample)
    return ProtocolError(
        AMBIGUOUS_MATCH,
        f"match {js_json(match)} is ambiguous in {track}/{scope} (searched "
        f"{searched(scope, workspace_key, agent_key)}): {n} entries contain it; use a "
        "longer, unique substring",
        {"track": track, "scope": scope, "match": match, "candidates": n, "sample": sample,
         "workspaceKey": workspace_key, "agentKey": agent_key},
    )


class PolicyRefused(ProtocolError):
    """WRITE_DENIED from a write policy of ``off``: nobody was asked. Its code, message and
    details are any rejection's (outcome ``rejected``, as in the reference); ``policy_key``
    is the ``writePolicies`` key that chose ``off`` (None: the global ``writePolicy``), so a
    surface can tell a model that the policy refused, not a person."""

    def __init__(self, policy_key: str | None) -> None:
        denied = write_denied("rejected")
        ProtocolError.__init__(self, denied.code, denied.message, denied.details)
        self.policy_key = policy_key


def write_denied(outcome: str, detail: str | None = None, **extra: Any) -> ProtocolError:
    suffix = f"; {detail}" if detail else ""
    return ProtocolError(
        WRITE_DENIED,
        f"memory write not approved (approval outcome: {outcome}{suffix}); nothing was written",
        {"outcome": outcome, **extra},
    )


def pending_not_found(pid: str, root: str | None = None) -> ProtocolError:
    """PROPOSAL_NOT_FOUND, naming the store looked in (an id from another store's message
    is looked for in the default store when ``--store`` is left out)."""
    from filemem.location import command

    where = f" of the store {root}" if root is not None else ""
    return ProtocolError(
        PROPOSAL_NOT_FOUND,
        f'"{pid}" is not a pending approval{where} (`{command(root, "pending")}` lists '
        "them); nothing was changed",
        {"id": pid},
    )


def store_corrupt(path: str, reason: str) -> ProtocolError:
    return ProtocolError(
        STORE_CORRUPT, f"memory store file {path} is corrupt: {reason}", {"path": path}
    )


def adopt_hint(root: str, path: str) -> str:
    """The part of a bad file's way out that offers ``filemem adopt`` for the fix (``path``:
    the file's full path, in the store at ``root``), so that a command run on the file
    unfixed can leave it out."""
    from filemem.location import command

    return f" (or `{command(root, 'adopt', path)}`, which records it as your edit)"


def bad_file(root: str, rel: str, reason: str, *, commit: str | None = None,
             subject: str | None = None, parents: int = 1, fix: str = "edit",
             more: int = 0) -> ProtocolError:
    """STORE_CORRUPT for a file committed at HEAD that is not valid: the file, the commit
    that brought it (when history tells; ``parents``: how many it has, as a merge or the
    first commit is not one to revert) and the way out. ``fix`` is what mends the file
    itself: ``edit`` it, ``remove`` it (not an entry file), ``restore`` it (deleted) or
    ``move:<path>`` (a valid entry in the wrong place), ``copy:<path>`` (a copy of the
    entry at that path, in the wrong place);
    ``more``: how many other files are invalid too."""
    full = os.path.join(root, *rel.split("/"))
    r, p = shlex.quote(root), shlex.quote(rel)
    short = commit[:10] if commit else None
    ways = []
    if short and parents == 1:
        ways.append(f"undo that commit with `git -C {r} revert {short}`")
    if fix.startswith("move:"):
        to = shlex.quote(fix[5:])
        ways.append(f"move it where it belongs and commit that: `git -C {r} mv {p} {to}`, "
                    f"then `git -C {r} commit`")
    elif fix.startswith("copy:"):
        ways.append(f"it is a copy of the entry in {shlex.quote(fix[5:])}: take it out and "
                    f"commit that: `git -C {r} rm {p}`, then `git -C {r} commit`")
    elif fix == "remove":
        ways.append(f"take the file out of the store and commit that: `git -C {r} rm {p}`, "
                    f"then `git -C {r} commit`")
    elif fix == "restore":
        back = f"`git -C {r} checkout {short}~1 -- {p}`, then " if short else ""
        ways.append(f"put the file back and commit it: {back}`git -C {r} commit {p}`")
    else:
        ways.append(f"fix the file and commit the fix: `git -C {r} commit {p}`"
                    f"{adopt_hint(root, full)}")
    way_out = ", or ".join(ways)
    kind = "merge commit" if parents > 1 else "commit"
    how = "it was deleted by" if fix == "restore" else "it came in with"
    came = f"; {how} {kind} {short} {js_json(subject or '')}" if short else ""
    return ProtocolError(
        STORE_CORRUPT,
        f"memory store file {full} is corrupt: {reason}{came}; memory reads and writes are "
        f"refused until it is mended: {way_out}" + (
            f" ({counted(more, 'more invalid file')}: `filemem status` lists them)"
            if more else ""),
        {"path": full, "file": rel, "reason": reason, "commit": commit, "subject": subject,
         "wayOut": way_out})


def store_unsupported_version(path: str, found: int, supported: int) -> ProtocolError:
    return ProtocolError(
        STORE_UNSUPPORTED_VERSION,
        f"memory store at {path} has schema version {found} > supported {supported}; "
        "upgrade filemem instead of downgrading",
        {"path": path},
    )
