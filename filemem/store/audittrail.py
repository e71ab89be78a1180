"""The audit trail as ``auditList`` reads it: the rows in commits' trailers (cached per
commit), a row of its own for each commit made outside filemem, and the read-side ledger,
merged newest first by ``seq``. Each row is encoded as JSON once (:class:`RowBlock`), for
the surfaces that send the list as JSON."""

from __future__ import annotations

from typing import Final

from filemem.files.gitrepo import CommitInfo, GitRepo
from filemem.store.auditlog import Ledger, RowBlock, external_row, last_trailer_seq, parse_rows
from filemem.store.auditwalk import Walk
from filemem.types import AuditRow

_CACHED_COMMITS: Final = 50_000


class AuditTrail:
    def __init__(self, git: GitRepo, ledger: Ledger) -> None:
        self.git = git
        self.ledger = ledger
        self._rows: dict[str, RowBlock] = {}  # commit sha -> its rows, newest first
        self._made: dict[str, int] = {}  # the last commit this process made -> its last seq
        self._walk = Walk(git, self._block)

    def made(self, sha: str, rows: list[AuditRow]) -> None:
        """Note a commit this process is making with ``rows`` (numbered, in seq order): the
        next write numbers its rows after them without reading the commit back."""
        self._made = {sha: int(rows[-1]["seq"])} if rows else {}

    def forget(self) -> None:
        """Drop what is kept in memory (a redaction: the old rows hold the old texts)."""
        self._made = {}
        self._rows.clear()
        self._walk = Walk(self.git, self._block)
        self.ledger.forget()

    def last_seq(self, head: str) -> int:
        """The highest audit seq so far (the commit's last row, or the ledger's)."""
        return max(self._commit_last_seq(head), self.ledger.last_seq())

    def _commit_last_seq(self, sha: str) -> int:
        """The seq of a commit's newest row, without parsing a filemem commit's whole
        message. Commits made outside filemem take their seq after their first parent's, so
        a run of them is walked iteratively (no recursion limit on long histories)."""
        made = self._made.get(sha)
        if made is not None:
            return made
        chain: list[CommitInfo] = []
        base = 0
        current: str | None = sha
        while current is not None:
            cached = self._rows.get(current)
            if cached is not None:
                base = int(cached.rows[0]["seq"])
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
        made outside filemem, ordered after its parents). Shared: copy before changing."""
        return self._block(info, after_seq).rows

    def _block(self, info: CommitInfo, after_seq: int | None = None) -> RowBlock:
        block = self._rows.get(info.sha)
        if block is None:
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
            block = self._rows[info.sha] = RowBlock(rows)
        return block

    def _runs(self, limit: int) -> list[tuple[RowBlock, int]]:
        """The blocks that can hold the newest ``limit`` rows, each with how many of its
        first rows can: commits newest first until they hold ``limit`` rows (of a block
        in seq order only its first ``limit`` can be among the newest ``limit``, so a
        seed's thousand rows are not all sorted), then the ledger's newest rows."""
        head = self.git.head()
        runs = [(block, min(len(block.rows), limit) if block.ordered else len(block.rows))
                for block in (self._walk.blocks(head, limit) if head is not None else ())]
        runs.extend((block, 1) for block in self.ledger.tail_blocks(limit))
        return runs

    @staticmethod
    def _in_order(runs: list[tuple[RowBlock, int]]) -> bool:
        """Whether the runs, one after the other, are already newest first (a big commit
        newest, or commits in time order with no ledger row between): no sort needed."""
        last: int | None = None
        for block, k in runs:
            if not block.ordered or (last is not None and block.rows[0]["seq"] > last):
                return False
            last = block.rows[k - 1]["seq"]
        return True

    @staticmethod
    def _sorted(runs: list[tuple[RowBlock, int]], limit: int) -> list[tuple[RowBlock, int]]:
        """The newest ``limit`` rows of ``runs``, newest first, as (block, place)."""
        picked = [(block, i) for block, k in runs for i in range(k)]
        picked.sort(key=lambda p: p[0].rows[p[1]]["seq"], reverse=True)  # stable: ties
        return picked[:limit]                                             # keep this order

    def newest(self, limit: int) -> list[AuditRow]:
        """The newest ``limit`` audit rows across history and the ledger, newest first."""
        runs = self._runs(limit)
        if self._in_order(runs):
            out: list[AuditRow] = []
            for block, k in runs:
                out.extend(r.copy() for r in block.rows[:min(k, limit - len(out))])
            return out
        return [block.rows[i].copy() for block, i in self._sorted(runs, limit)]

    def newest_json(self, limit: int) -> str:
        """:meth:`newest` as the JSON text ``json.dumps(rows, ensure_ascii=False,
        separators=(",", ":"))`` gives, joined from each row's JSON, made once."""
        runs = self._runs(limit)
        parts: list[str] = []
        if self._in_order(runs):
            for block, k in runs:
                parts.extend(block.json(min(k, limit - len(parts))))
        else:
            parts = [block.json_at(i) for block, i in self._sorted(runs, limit)]
        return "".join(("[", ",".join(parts), "]"))
