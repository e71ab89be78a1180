"""The audit trail as ``auditList`` reads it: the rows in commits' trailers (cached per
commit), a row of its own for each commit made outside filemem, and the read-side ledger,
merged newest first by ``seq``."""

from __future__ import annotations

from typing import Final

from filemem.files.gitrepo import CommitInfo, GitRepo
from filemem.store.auditlog import Ledger, external_row, last_trailer_seq, parse_rows
from filemem.types import AuditRow

_CACHED_COMMITS: Final = 50_000


class AuditTrail:
    def __init__(self, git: GitRepo, ledger: Ledger) -> None:
        self.git = git
        self.ledger = ledger
        self._rows: dict[str, list[AuditRow]] = {}  # commit sha -> its rows, newest first

    def last_seq(self, head: str) -> int:
        """The highest audit seq so far (the commit's last row, or the ledger's)."""
        return max(self._commit_last_seq(head), self.ledger.last_seq())

    def _commit_last_seq(self, sha: str) -> int:
        """The seq of a commit's newest row, without parsing a filemem commit's whole
        message. Commits made outside filemem take their seq after their first parent's, so
        a run of them is walked iteratively (no recursion limit on long histories)."""
        chain: list[CommitInfo] = []
        base = 0
        current: str | None = sha
        while current is not None:
            cached = self._rows.get(current)
            if cached is not None:
                base = int(cached[0]["seq"])
                break
            info = self.git.commit(current)
            seq = last_trailer_seq(info.message)
            if seq is not None:
                base = seq
                break
            chain.append(info)
            current = info.parents[0] if info.parents else None
        for info in reversed(chain):
            base = int(self.commit_rows(info, after_seq=base)[0]["seq"])
        return base

    def commit_rows(self, info: CommitInfo, after_seq: int | None = None) -> list[AuditRow]:
        """The audit rows a commit carries, newest first (a row of its own for a commit
        made outside filemem, ordered after its parents)."""
        rows = self._rows.get(info.sha)
        if rows is None:
            try:
                parsed = parse_rows(info.message)
                problem = None
            except ValueError as exc:
                parsed, problem = None, str(exc)
            if parsed:
                rows = list(reversed(parsed))
            else:
                if after_seq is None:
                    after_seq = max((self._commit_last_seq(p) for p in info.parents), default=0)
                ext = external_row(info.sha, info.time, info.message, after_seq)
                if problem is not None:
                    ext["outcome"] = f"unreadable audit trailers ({problem}) in {info.sha[:12]}"
                rows = [ext]
            if len(self._rows) > _CACHED_COMMITS:
                self._rows.clear()
            self._rows[info.sha] = rows
        return rows

    def newest(self, limit: int) -> list[AuditRow]:
        """The newest ``limit`` audit rows across history and the ledger, newest first."""
        rows: list[AuditRow] = []
        head = self.git.head()
        if head is not None:
            for info in self.git.newest_first(head):
                if len(rows) >= limit:
                    break
                rows.extend(self.commit_rows(info))
        rows.extend(self.ledger.tail(limit))
        rows.sort(key=lambda r: r["seq"], reverse=True)
        return [r.copy() for r in rows[:limit]]
