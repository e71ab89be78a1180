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
import uuid
from typing import Any, Final

from filemem import errors
from filemem.files import atomic
from filemem.store.names import read_only

PENDING_DIR: Final = "pending"
_CLAIMED: Final = ".claimed"

Record = dict[str, Any]


class PendingStore:
    """The folder of staged writes. A record is claimed (renamed) while it is being
    approved, so two owners approving at once cannot both run it."""

    def __init__(self, meta_dir: str) -> None:
        self.dir = os.path.join(meta_dir, PENDING_DIR)

    def _path(self, pid: str, claimed: bool = False) -> str:
        return os.path.join(self.dir, f"{pid}.json{_CLAIMED if claimed else ''}")

    def stage(self, record: Record) -> str:
        pid = uuid.uuid4().hex[:12]
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
        """Every pending record, oldest first."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(self.dir, name), encoding="utf-8") as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                continue
        out.sort(key=lambda r: (r.get("createdAt", 0), r.get("id", "")))
        return out

    def resolve(self, pid: str) -> str:
        """The full id for ``pid`` or a unique prefix of it; PROPOSAL_NOT_FOUND otherwise."""
        if not isinstance(pid, str) or not pid or "/" in pid or "\\" in pid or pid[0] == ".":
            raise errors.pending_not_found(str(pid))
        ids = [r["id"] for r in self.list() if str(r.get("id", "")).startswith(pid)]
        if len(ids) != 1:
            raise errors.pending_not_found(pid)
        return str(ids[0])

    def claim(self, pid: str) -> Record:
        """Take a record out of the pending set (PROPOSAL_NOT_FOUND if someone else did)."""
        full = self.resolve(pid)
        try:
            os.rename(self._path(full), self._path(full, claimed=True))
        except FileNotFoundError:
            raise errors.pending_not_found(pid) from None
        with open(self._path(full, claimed=True), encoding="utf-8") as f:
            record: Record = json.load(f)
        return record

    def release(self, pid: str) -> None:
        """Put a claimed record back (its approval did not go through)."""
        os.replace(self._path(pid, claimed=True), self._path(pid))

    def drop(self, pid: str) -> None:
        os.unlink(self._path(pid, claimed=True))
