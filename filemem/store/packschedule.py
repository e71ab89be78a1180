"""When a store's writes tidy its object store: the schedule, per open store.

Each write adds one small pack (:mod:`filemem.files.packwrite`). On an open store's first
commit (a CLI command writes once and exits) and every :data:`MERGE_CHECK_EVERY` commits
after, the small packs are counted and, once there are enough, merged; on the first and
every :data:`PACK_CHECK_EVERY` commits ``git repack`` is considered
(:mod:`filemem.files.packing`). A killed write's half-made pack is removed by the first
write of an open store, and again at each merge check: a listdir, kept off every write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from filemem.files import packwrite
from filemem.store.logs import log

if TYPE_CHECKING:
    from filemem.files.gitrepo import GitRepo
    from filemem.files.wal import Wal

PACK_CHECK_EVERY: Final = 100  # commits between checks for loose objects and packs
MERGE_CHECK_EVERY: Final = 16  # commits between checks for small packs to merge


class PackSchedule:
    __slots__ = ("commits", "since_merge_check", "temp_unchecked")

    def __init__(self) -> None:
        # both checked on an open store's first commit (a CLI command writes once and exits)
        self.commits = PACK_CHECK_EVERY
        self.since_merge_check = MERGE_CHECK_EVERY
        self.temp_unchecked = True

    def before_write(self, git: GitRepo) -> None:
        """Under the store lock, before a write: its pack's temp files from a kill go."""
        if self.temp_unchecked:
            git.clear_temp_packs()
            self.temp_unchecked = False

    def after_commit(self, git: GitRepo, wal: Wal) -> None:
        """Under the store lock, after a commit: merge small packs, or repack, if due."""
        self.commits += 1
        self.since_merge_check += 1
        if self.since_merge_check >= MERGE_CHECK_EVERY:
            self.since_merge_check = 0
            self.temp_unchecked = True
            if packwrite.merge_due(git.git_dir):
                try:
                    packwrite.merge_small(git.git_dir)
                except (OSError, ValueError) as exc:  # the commit stands; small packs stay
                    log.warning("filemem: merging the small packs of %s failed (%s); they "
                                "stay as they are", git.git_dir, exc)
                git.close()  # readers map the pack list again
        if self.commits < PACK_CHECK_EVERY:
            return
        self.commits = 0
        from filemem.files import packing  # every PACK_CHECK_EVERY commits: not for a read

        if packing.due(git.git_dir):
            wal.checkpoint(git)  # what the log covers is durable before git rewrites packs
            packing.pack(git)
