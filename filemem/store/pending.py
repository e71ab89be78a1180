"""Pending approvals: writes staged because nobody could be asked when they were made.

Under the ``ask`` policy with no way to reach a person (no terminal, an MCP client without
elicitation, a bridge host that cannot answer) a write is not lost and not written: it is
saved as ``.filemem/pending/<id>.json`` with everything needed to run it again, and the
caller gets WRITE_DENIED with outcome ``pending``. Only the owner's CLI lists, approves or
rejects them (``filemem pending|approve|reject``); nothing an agent reaches can.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, Final

from filemem import errors
from filemem.files import atomic
from filemem.store.names import linked, read_only

PENDING_DIR: Final = "pending"
_CLAIMED: Final = ".claimed"

Record = dict[str, Any]


def approved_by(pid: str) -> str:
    """Who approves pending ``pid``: the approve commit's audit outcome names it."""
    return f"the owner's `filemem approve` of pending {pid}"


def rejected_by(pid: str) -> str:
    """Who rejects pending ``pid``: the ``-denied`` row's outcome names it."""
    return f"the owner's `filemem reject` of pending {pid}"


def settles(r: Any, pid: str) -> bool:
    """Whether audit row ``r`` records pending ``pid`` as approved (its write committed) or
    rejected; a ``-failed`` row (approved, then refused) leaves it pending."""
    outcome, action = str(r.get("outcome") or ""), str(r.get("action") or "")
    if f"{approved_by(pid)})" in outcome and not action.endswith(("-failed", "-denied")):
        return True
    return any(outcome.startswith(f"rejected (via {rejected_by(pid)}{end}")
               for end in (")", ":"))


def _started(pid: int) -> str | None:
    """When process ``pid`` started (Linux: clock ticks since boot), "" where that cannot
    be told; None if there is no such process (or only its zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except (OSError, IndexError):
        fields = []
    if len(fields) > 19:
        return None if fields[0] in ("Z", "X") else fields[19]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:
        pass  # it exists (someone else's)
    return ""


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (another user's counts; its zombie does not)."""
    return _started(pid) is not None


def holder() -> str:
    """This process, as a claim names it: ``<pid>-<start time>`` (a reused pid differs)."""
    return f"{os.getpid()}-{_started(os.getpid()) or ''}"


def holder_alive(name: str) -> bool:
    pid, _, start = name.partition("-")
    if not pid.isdigit():
        return False
    now = _started(int(pid))
    return now is not None and (now == start or not now or not start)


class PendingStore:
    """The folder of staged writes. A record is claimed while it is being approved or
    rejected, so two owners at once cannot both run it: renamed to
    ``<id>.json.claimed.<pid>-<start time>``, naming the process that holds it. A claim
    whose holder is gone (killed mid-approve) is recovered before the records are read:
    ``recover`` (the store's, under its lock) asks whether the write was settled (its
    approve or reject row is in the audit trail): then the claim is dropped, else the
    record is put back, pending again."""

    def __init__(self, meta_dir: str,
                 recover: Callable[[], None] | None = None) -> None:
        self.dir = os.path.join(meta_dir, PENDING_DIR)
        self.root = os.path.dirname(meta_dir)  # the store's, named when an id is not found
        self._recover = recover
        self._held: dict[str, str] = {}  # id -> the claimed file this process holds

    def _path(self, pid: str, claimed: bool = False) -> str:
        if claimed:
            return self._held.get(pid) or os.path.join(self.dir, f"{pid}.json{_CLAIMED}")
        return os.path.join(self.dir, f"{pid}.json")

    def stale_claims(self) -> list[tuple[str, str]]:
        """(id, claimed file) of every claim whose holder is no longer running."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for name in sorted(names):
            base, sep, who = name.partition(".json" + _CLAIMED)
            if not sep or (who and not who.startswith(".")) or base in self._held:
                continue
            if not who or not holder_alive(who[1:]):  # no holder named: an older filemem's
                out.append((base, os.path.join(self.dir, name)))
        return out

    def recover_stale(self, settled: Callable[[Record], bool]) -> list[str]:
        """Drop each stale claim whose write was settled, put the others back pending
        (the caller holds the store lock, so nothing settles one meanwhile)."""
        done = []
        for pid, path in self.stale_claims():
            try:
                with open(path, encoding="utf-8") as f:
                    record: Record = json.load(f)
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                record = {"id": pid}
            if settled(record):
                os.unlink(path)
            elif os.path.exists(self._path(pid)):
                os.unlink(path)  # restored already (cannot happen: claims are renames)
            else:
                os.rename(path, self._path(pid))
            done.append(pid)
        return done

    def _recover_stale(self) -> None:
        if self._recover is not None and self.stale_claims():
            self._recover()

    def stage(self, record: Record) -> str:
        pid = os.urandom(6).hex()  # 12 random hex digits, as uuid4().hex[:12] gave
        record = {"id": pid, **record}
        try:
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            # durable: the caller is told the write is pending, so it must outlive a crash
            atomic.atomic_write(self._path(pid),
                                json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8"),
                                durable=True)
        except OSError as exc:
            if not read_only(exc):
                raise
            root = os.path.dirname(os.path.dirname(self.dir))
            raise errors.StoreReadOnly(
                root, f"cannot stage the write in {self.dir}: {exc.strerror}") from None
        return pid

    def list(self) -> list[Record]:
        """Every pending record, oldest first (stale claims recovered first)."""
        self._recover_stale()
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                # never through a link (LinkRefused is an OSError: such a record is skipped)
                out.append(json.loads(atomic.read_nofollow(os.path.join(self.dir, name))))
            except (OSError, ValueError):
                continue
        out.sort(key=lambda r: (r.get("createdAt", 0), r.get("id", "")))
        return out

    def resolve(self, pid: str) -> str:
        """The full id for ``pid`` or a unique prefix of it; PROPOSAL_NOT_FOUND otherwise."""
        if not isinstance(pid, str) or not pid or "/" in pid or "\\" in pid or pid[0] == ".":
            raise errors.pending_not_found(str(pid), self.root)
        ids = [r["id"] for r in self.list() if str(r.get("id", "")).startswith(pid)]
        if len(ids) != 1:
            raise errors.pending_not_found(pid, self.root)
        return str(ids[0])

    def claim(self, pid: str) -> Record:
        """Take a record out of the pending set (PROPOSAL_NOT_FOUND if someone else did)."""
        full = self.resolve(pid)
        claimed = os.path.join(self.dir, f"{full}.json{_CLAIMED}.{holder()}")
        try:
            os.rename(self._path(full), claimed)
        except FileNotFoundError:
            raise errors.pending_not_found(pid, self.root) from None
        self._held[full] = claimed
        try:
            record: Record = json.loads(atomic.read_nofollow(claimed))
        except atomic.LinkRefused:
            raise linked(claimed) from None
        return record

    def release(self, pid: str) -> None:
        """Put a claimed record back (its approval did not go through)."""
        os.replace(self._path(pid, claimed=True), self._path(pid))
        self._held.pop(pid, None)

    def drop(self, pid: str) -> None:
        os.unlink(self._path(pid, claimed=True))
        self._held.pop(pid, None)
