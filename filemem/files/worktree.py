"""The working tree: the owner's view of the store, kept equal to HEAD after every write.

Files are replaced by write-to-temp + rename, so an editor or a watcher never sees half a
file. They are not fsynced: the commit is the durable record, and the journal lets the next
open put back from HEAD whatever a killed write left half done, file by file, without ever
touching a file whose content is neither the old nor the new version (a person's edit).

Nothing here reads, writes or deletes through a symbolic link: a file that is a link is
refused (:class:`~filemem.files.atomic.LinkRefused`) where it would be read, replaced (the
link itself, by rename) where it is written, and unlinked itself where it is deleted; a
folder on the way that is a link refuses all three. Nor is anything but a regular file read:
a FIFO, a socket or a device is refused (:class:`~filemem.files.atomic.NotAFile`) without
being opened (a FIFO's open waits for a writer). The journal is the owner's local state,
not a trusted source: repair acts only on paths that name a store file
(:func:`~filemem.files.layout.is_store_path`), and the caller checks its blobs against git.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Mapping
from typing import Final, NamedTuple

from filemem.files import atomic, nolinks
from filemem.files.atomic import LinkRefused, NotAFile
from filemem.files.gitindex import hash_blob
from filemem.files.layout import ENTRY_ROOTS, TOP_FILES, is_store_path, leaves_folder

TMP_SUFFIX: Final = ".filemem-tmp"
JOURNAL_NAME: Final = "journal.json"


def full_path(root: str, path: str) -> str:
    return os.path.join(root, *path.split("/"))


def _refuse_linked_folder(root: str, path: str, checked: set[str] | None = None) -> None:
    link = linked_folder(root, path, checked)
    if link is not None:
        raise LinkRefused(link)


def read(root: str, path: str) -> bytes | None:
    """A working-tree file's bytes, None if there is none; LinkRefused if it (or a folder
    on the way) is a symbolic link: what a link points to is never read; NotAFile if it is
    a FIFO, a socket or a device, which is not opened (a device's open may act)."""
    _refuse_linked_folder(root, path)
    full = full_path(root, path)
    try:
        mode = os.lstat(full).st_mode
        if atomic.special(mode):
            raise NotAFile(full, mode)
        return atomic.read_nofollow(full)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


# what keeps a working-tree file from being read as a store file (see Unreadable)
REFUSED: Final = (LinkRefused, NotAFile, PermissionError)


class Unreadable(NamedTuple):
    """Why a working-tree path cannot be read as a store file. ``what``: ``folder link`` (a
    folder on the way, ``file``, is a symbolic link), ``link`` (the path itself is one),
    ``not a file`` (a FIFO, a socket or a device: ``kind``) or ``no permission``."""

    what: str
    file: str  # the full path of what is in the way
    kind: str = ""


def read_checked(root: str, path: str) -> tuple[bytes | None, Unreadable | None]:
    """:func:`read`, with what keeps the file from being read as an answer, not an error:
    (its bytes or None if there is none, None) or (None, why it cannot be read)."""
    try:
        return read(root, path), None
    except LinkRefused as exc:
        link = str(exc.filename)
        return None, Unreadable("link" if link == full_path(root, path) else "folder link", link)
    except NotAFile as exc:
        return None, Unreadable("not a file", str(exc.filename), exc.kind)
    except PermissionError as exc:
        return None, Unreadable("no permission", str(exc.filename or full_path(root, path)))


def _inside(path: str) -> str:
    """``path`` itself, if it names a file inside the store and outside ``.git`` (a last
    guard: paths from elsewhere are checked with layout.check_tree_path before this)."""
    if any(leaves_folder(part) for part in path.split("/")):
        raise ValueError(f"refusing to write {path!r}: it points out of the store or into .git")
    return path


def guard(root: str, path: str, checked: set[str] | None = None) -> None:
    """ValueError if ``path`` leaves the store or goes into ``.git``, LinkRefused if a
    folder on the way is a symbolic link. ``checked``: folders that passed both earlier in
    the same write, not looked at again; ``path``'s is added."""
    parent, _, name = path.rpartition("/")
    if checked is not None and parent in checked:
        if leaves_folder(name):
            _inside(path)  # raises
        return
    _inside(path)  # before linked_folder adds the folder to ``checked``
    _refuse_linked_folder(root, path, checked)


def write(root: str, path: str, data: bytes, *, new: bool = False,
          checked: set[str] | None = None) -> os.stat_result:
    """Replace a working-tree file atomically (temp + rename, not fsynced); returns its stat.

    ``new=True`` creates a file that must not exist yet, directly (half the syscalls, which
    matters for a 1,000-entry seed); FileExistsError if something is already there.
    Recovery recognises a torn new file as a prefix of the version being written.
    ``checked``: folders found to be no link and inside the store earlier in the same
    write (see linked_folder); filled by this call.
    """
    guard(root, path, checked)
    target = full_path(root, path)
    if new:
        try:
            return atomic.create_new(target, data, durable=False)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            return atomic.create_new(target, data, durable=False)
    folder = os.path.dirname(target)
    try:
        atomic.atomic_write(target, data, durable=False, suffix=TMP_SUFFIX)
    except FileNotFoundError:  # its folder is not there (yet)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        atomic.atomic_write(target, data, durable=False, suffix=TMP_SUFFIX)
    return os.stat(target)


def remove(root: str, path: str, checked: set[str] | None = None) -> None:
    """Delete a file (a link: the link itself) and the folders it leaves empty (git does
    not track folders). ``checked``: as for :func:`write`."""
    _refuse_linked_folder(root, path, checked)
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


def linked_folder(root: str, path: str, checked: set[str] | None = None) -> str | None:
    """The first folder on the way to ``path`` (inside the store) that is a symbolic link.
    ``checked``: the (store-relative) folders already found to be real folders, which are
    not looked at again, and to which each folder on the way is added once found so (a
    write of many files in the same folders looks at each folder once, under the store
    lock)."""
    parent, _, _name = path.rpartition("/")
    if checked is not None and parent in checked:
        return None
    if checked is not None and parent and nolinks.real_folders(root, parent):
        # a write's folders: all of them at once, where the system can tell in one call
        rel = ""
        for part in parent.split("/"):
            rel = f"{rel}/{part}" if rel else part
            checked.add(rel)
        return None
    current, rel = root, ""
    for part in parent.split("/") if parent else ():
        current = os.path.join(current, part)
        rel = f"{rel}/{part}" if rel else part
        if checked is not None and rel in checked:  # a folder above, found no link before
            continue
        try:
            mode = os.lstat(current).st_mode  # one call tells a link and a folder apart
        except (OSError, ValueError):
            return None
        if stat.S_ISLNK(mode):
            return current
        if not stat.S_ISDIR(mode):
            return None
        if checked is not None:
            checked.add(rel)
    return None


def is_clean(root: str, path: str, head_blob: str | None, index: object | None) -> bool:
    """Whether the working-tree file at ``path`` is exactly HEAD's version (or absent at
    both). Uses the index's stat record like git does, hashing only when that is unsure.
    A symbolic link in place of the file is a change a person made (git: typechange), and
    so is a FIFO, a socket or a device (never opened); a file filemem cannot read (a link
    on the way, no permission) is not HEAD's version as far as filemem can tell."""
    target = full_path(root, path)
    try:
        st = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        return head_blob is None
    if head_blob is None or not stat.S_ISREG(st.st_mode):
        return False
    stat_matches = getattr(index, "stat_matches", None)
    sha_of = getattr(index, "sha", None)
    if stat_matches and sha_of and sha_of(path) == head_blob and stat_matches(path, st):
        return True
    try:
        data = read(root, path)
    except REFUSED:
        return False
    return data is not None and hash_blob(data) == head_blob


class JournalRecord(NamedTuple):
    paths: dict[str, tuple[str | None, str | None]]
    new_head: str | None
    adopted: dict[str, str]  # path -> the hand-edited blob the new commit took in
    old_head: str | None = None


class Journal:
    """What a write is about to change, so the next open can finish or undo it. Written
    before the branch moves: durably (fsynced, and its folder), or covered by the
    write-ahead log (:mod:`.wal`)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def at(cls, meta_dir: str) -> Journal:
        return cls(os.path.join(meta_dir, JOURNAL_NAME))

    def begin(self, old_head: str | None, new_head: str,
              paths: dict[str, tuple[str | None, str | None]],
              adopted: Mapping[str, str | None] | None = None, durable: bool = True) -> None:
        """``paths``: each path's (old, new) blob. ``adopted``: paths whose working-tree
        content (that blob) is what the commit to ``new_head`` takes in (a person's edit
        being adopted): once HEAD is ``new_head`` it may be replaced like the old version.
        ``durable=False`` where the write-ahead log holds the same (a killed process loses
        no unsynced file; a restart replays the log)."""
        doc: dict[str, object] = {"old": old_head, "new": new_head,
                                  "paths": {p: list(v) for p, v in paths.items()}}
        if adopted:
            doc["adopted"] = {p: b for p, b in adopted.items() if b is not None}
        atomic.remove_temps(self.path)  # a killed begin's (the store lock is held)
        atomic.atomic_write(self.path, json.dumps(doc).encode(), durable=durable)

    def read(self) -> dict[str, tuple[str | None, str | None]] | None:
        got = self.read_all()
        return None if got is None else got.paths

    def read_all(self) -> JournalRecord | None:
        """None if there is no journal; no paths if it is torn or not in its format.
        LinkRefused if it is a symbolic link."""
        try:
            raw = json.loads(atomic.read_nofollow(self.path))
        except FileNotFoundError:
            return None
        except ValueError:  # torn journal: nothing was changed yet when it was being written
            return JournalRecord({}, None, {})
        out: dict[str, tuple[str | None, str | None]] = {}
        if not isinstance(raw, dict) or not isinstance(raw.get("paths"), dict):
            return JournalRecord(out, None, {})
        for p, v in raw["paths"].items():
            if isinstance(v, list) and len(v) == 2 and all(
                    x is None or isinstance(x, str) for x in v):
                out[p] = (v[0], v[1])
        old, new = raw.get("old"), raw.get("new")
        adopted = raw.get("adopted")
        return JournalRecord(
            out, new if isinstance(new, str) else None,
            {p: b for p, b in adopted.items() if isinstance(p, str) and isinstance(b, str)}
            if isinstance(adopted, dict) else {},
            old if isinstance(old, str) else None)

    def exists(self) -> bool:
        return os.path.lexists(self.path)

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
        if not is_store_path(path) or linked_folder(root, path) is not None:
            continue  # the caller has refused it (not a store file, or through a link)
        atomic.remove_temps(full_path(root, path), suffix=TMP_SUFFIX)
        try:
            data = read(root, path)
        except REFUSED:
            continue  # a link, a FIFO, an unreadable file a person put there: theirs
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


def files_under(root: str, top: str) -> list[str]:
    """The store-relative paths of the files in the folder ``top`` and below (``[top]`` if
    it is a file or a symbolic link; none if it is missing). A link to a folder is listed as
    git lists it, never walked through."""
    base = os.path.join(root, top)
    if not os.path.lexists(base):
        return []
    if os.path.islink(base) or not os.path.isdir(base):  # os.walk would walk through a link
        return [top]
    out: list[str] = []
    for folder, dirs, files in os.walk(base):
        links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
        dirs[:] = [d for d in dirs if d not in links]  # never walked through: listed
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        out += [f"{rel}/{name}" for name in files + links]
    return out


def outside_files(root: str) -> list[str]:
    """Files at the store's top, or in folders there, that are none of the store's own: not
    under a track folder, not one of its top files, ``.git`` or ``.filemem``, for `filemem
    status` to name as git does."""
    return [path for name in sorted(os.listdir(root))
            if name not in ENTRY_ROOTS and name not in TOP_FILES and is_store_path(name)
            for path in sorted(files_under(root, name))]
