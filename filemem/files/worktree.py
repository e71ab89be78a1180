"""The working tree: the owner's view of the store, kept equal to HEAD after every write.

Files are replaced by write-to-temp + rename, so an editor or a watcher never sees half a
file. They are not fsynced: the commit is the durable record, and the journal lets the next
open put back from HEAD whatever a killed write left half done, file by file, without ever
touching a file whose content is neither the old nor the new version (a person's edit).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from filemem.files import atomic
from filemem.files.gitindex import hash_blob
from filemem.files.layout import leaves_folder

TMP_SUFFIX: Final = ".filemem-tmp"
JOURNAL_NAME: Final = "journal.json"


def full_path(root: str, path: str) -> str:
    return os.path.join(root, *path.split("/"))


def read(root: str, path: str) -> bytes | None:
    try:
        with open(full_path(root, path), "rb") as f:
            return f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _inside(path: str) -> str:
    """``path`` itself, if it names a file inside the store and outside ``.git`` (a last
    guard: paths from elsewhere are checked with layout.check_tree_path before this)."""
    if any(leaves_folder(part) for part in path.split("/")):
        raise ValueError(f"refusing to write {path!r}: it points out of the store or into .git")
    return path


def write(root: str, path: str, data: bytes, *, new: bool = False) -> os.stat_result:
    """Replace a working-tree file atomically (temp + rename, not fsynced); returns its stat.

    ``new=True`` creates a file that must not exist yet, directly (half the syscalls, which
    matters for a 1,000-entry seed); FileExistsError if something is already there.
    Recovery recognises a torn new file as a prefix of the version being written.
    """
    target = full_path(root, _inside(path))
    folder = os.path.dirname(target)
    if new:
        try:
            return atomic.create_new(target, data, durable=False)
        except FileNotFoundError:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            return atomic.create_new(target, data, durable=False)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    atomic.atomic_write(target, data, durable=False, suffix=TMP_SUFFIX)
    return os.stat(target)


def remove(root: str, path: str) -> None:
    """Delete a file and the folders it leaves empty (git does not track folders)."""
    target = full_path(root, _inside(path))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)
    folder = os.path.dirname(target)
    root_abs = os.path.abspath(root)
    while os.path.abspath(folder) != root_abs:
        try:
            os.rmdir(folder)
        except OSError:
            break
        folder = os.path.dirname(folder)


def linked_folder(root: str, path: str) -> str | None:
    """The first folder on the way to ``path`` (inside the store) that is a symbolic link."""
    current = root
    for part in path.split("/")[:-1]:
        current = os.path.join(current, part)
        if os.path.islink(current):
            return current
        if not os.path.isdir(current):
            return None
    return None


def is_clean(root: str, path: str, head_blob: str | None, index: object | None) -> bool:
    """Whether the working-tree file at ``path`` is exactly HEAD's version (or absent at
    both). Uses the index's stat record like git does, hashing only when that is unsure.
    A symbolic link in place of the file is a change a person made (git: typechange)."""
    target = full_path(root, path)
    try:
        st = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        return head_blob is None
    if head_blob is None or stat.S_ISLNK(st.st_mode):
        return False
    stat_matches = getattr(index, "stat_matches", None)
    sha_of = getattr(index, "sha", None)
    if stat_matches and sha_of and sha_of(path) == head_blob and stat_matches(path, st):
        return True
    data = read(root, path)
    return data is not None and hash_blob(data) == head_blob


@dataclass(frozen=True)
class JournalRecord:
    paths: dict[str, tuple[str | None, str | None]]
    new_head: str | None
    adopted: dict[str, str]  # path -> the hand-edited blob the new commit took in


@dataclass
class Journal:
    """What a write is about to change, so the next open can finish or undo it. Written
    durably (fsynced, and its folder) before the branch moves."""

    path: str

    @classmethod
    def at(cls, meta_dir: str) -> Journal:
        return cls(os.path.join(meta_dir, JOURNAL_NAME))

    def begin(self, old_head: str | None, new_head: str,
              paths: dict[str, tuple[str | None, str | None]],
              adopted: Mapping[str, str | None] | None = None) -> None:
        """``paths``: each path's (old, new) blob. ``adopted``: paths whose working-tree
        content (that blob) is what the commit to ``new_head`` takes in (a person's edit
        being adopted): once HEAD is ``new_head`` it may be replaced like the old version."""
        doc: dict[str, object] = {"old": old_head, "new": new_head,
                                  "paths": {p: list(v) for p, v in paths.items()}}
        if adopted:
            doc["adopted"] = {p: b for p, b in adopted.items() if b is not None}
        atomic.remove_temps(self.path)  # a killed begin's (the store lock is held)
        atomic.atomic_write(self.path, json.dumps(doc).encode(), durable=True)

    def read(self) -> dict[str, tuple[str | None, str | None]] | None:
        got = self.read_all()
        return None if got is None else got.paths

    def read_all(self) -> JournalRecord | None:
        try:
            with open(self.path, encoding="utf-8") as f:
                raw = json.load(f)
        except FileNotFoundError:
            return None
        except ValueError:  # torn journal: nothing was changed yet when it was being written
            return JournalRecord({}, None, {})
        return JournalRecord({p: (v[0], v[1]) for p, v in raw.get("paths", {}).items()},
                             raw.get("new"), dict(raw.get("adopted") or {}))

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def repair(root: str, paths: dict[str, tuple[str | None, str | None]],
           head_blob: dict[str, str | None], blob_data: dict[str, bytes],
           adopted: Mapping[str, str] | None = None) -> list[str]:
    """Put journaled paths back to HEAD's version where the file holds the old or the new
    version (or a temp file was left); leave any other content alone. Returns repaired paths.

    ``head_blob`` maps each path to HEAD's blob (None: absent at HEAD); ``blob_data`` maps
    blob shas to their bytes. ``adopted``: paths whose content (that blob) the commit at
    HEAD took in, so it may be replaced too (pass it only when HEAD is that commit).
    """
    repaired = []
    adopted = adopted or {}
    for path, (old, new) in paths.items():
        atomic.remove_temps(full_path(root, path), suffix=TMP_SUFFIX)
        data = read(root, path)
        current = hash_blob(data) if data is not None else None
        want = head_blob.get(path)
        if current == want:
            continue
        torn_new = old is None and new is not None and data is not None \
            and new in blob_data and blob_data[new].startswith(data)
        taken_in = current is not None and adopted.get(path) == current
        if current not in (old, new, None) and not torn_new and not taken_in:
            continue  # someone's own edit: never overwrite it
        if want is None:
            remove(root, path)
        else:
            write(root, path, blob_data[want])
        repaired.append(path)
    return repaired
