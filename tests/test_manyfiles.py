"""Many working-tree files at once (filemem.files.manyfiles): one thread or several, the same
files, stats and refusals, with real files and links."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from filemem.files import manyfiles, worktree
from filemem.files.atomic import LinkRefused

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges")

WAYS = {"one thread": 1.0, "threads": 0.0}  # manyfiles.SLOW_FILE: never or always slow


def many(n: int, tag: str = "e") -> dict[str, bytes]:
    return {f"user/workspace/w{i % 3}/a{i % 2}/{tag}{i:04d}.md":
            f"text {i}\n".encode() * (i % 5 + 1) for i in range(n)}


@pytest.mark.parametrize("way", WAYS)
def test_every_file_is_written_with_its_stat_in_order(way: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manyfiles, "SLOW_FILE", WAYS[way])
    files = many(200)
    got = manyfiles.write_files(str(tmp_path), files, set(files))
    assert list(got) == list(files)
    for path, data in files.items():
        full = tmp_path / path
        assert full.read_bytes() == data
        st = os.lstat(full)
        assert (got[path].st_ino, got[path].st_size, got[path].st_mtime_ns) == (
            st.st_ino, st.st_size, st.st_mtime_ns)
    # replacing (not new) goes through temp + rename: the new content, no temp left
    again = {p: d + b"more\n" for p, d in files.items()}
    manyfiles.write_files(str(tmp_path), again, set())
    assert all((tmp_path / p).read_bytes() == d for p, d in again.items())
    assert not list(tmp_path.rglob(f"*{worktree.TMP_SUFFIX}"))


@pytest.mark.parametrize("way", WAYS)
def test_a_linked_folder_is_refused_whichever_files_came_first(
        way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manyfiles, "SLOW_FILE", WAYS[way])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "store"
    (root / "user" / "workspace" / "w0").mkdir(parents=True)
    (root / "user" / "workspace" / "w1").symlink_to(elsewhere, target_is_directory=True)
    # more files than manyfiles.PROBE before those under the link (w1), and some after
    files = dict(sorted(many(120).items(), key=lambda kv: kv[0].split("/")[2] != "w0"))
    assert list(files)[manyfiles.PROBE].split("/")[2] == "w0"
    with pytest.raises(LinkRefused) as caught:
        manyfiles.write_files(str(root), files, set(files))
    assert caught.value.filename == str(root / "user" / "workspace" / "w1")
    assert list(elsewhere.iterdir()) == []  # nothing was written through the link
    assert not [t for t in threading.enumerate() if t.name.startswith("filemem-mirror")]


@pytest.mark.parametrize("way", WAYS)
def test_an_existing_file_stops_a_new_one_and_every_thread_has_stopped(
        way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manyfiles, "SLOW_FILE", WAYS[way])
    files = many(150)
    last = list(files)[-1]
    (tmp_path / last).parent.mkdir(parents=True)
    (tmp_path / last).write_bytes(b"a person's file\n")
    with pytest.raises(FileExistsError):
        manyfiles.write_files(str(tmp_path), files, set(files))
    assert (tmp_path / last).read_bytes() == b"a person's file\n"
    assert not [t for t in threading.enumerate() if t.name.startswith("filemem-mirror")]


def test_a_checked_folder_is_not_looked_at_again_but_another_one_is(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").symlink_to(tmp_path / "a", target_is_directory=True)
    checked: set[str] = set()
    assert worktree.linked_folder(str(tmp_path), "a/b/x.md", checked) is None
    assert checked == {"a", "a/b"}  # each folder on the way, once found a real folder
    assert worktree.linked_folder(str(tmp_path), "c/b/x.md", checked) == str(tmp_path / "c")
    assert worktree.linked_folder(str(tmp_path), "new/x.md", checked) is None
    assert checked == {"a", "a/b"}  # a folder not there yet is looked at again next time
    assert worktree.linked_folder(str(tmp_path), "x.md", checked) is None


def test_many_new_files_of_one_folder_are_made_in_it_by_name_a_few_by_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    by_path: list[str] = []
    real = worktree.write

    def counted(root: str, path: str, data: bytes, **kw: object) -> os.stat_result:
        by_path.append(path)
        return real(root, path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(worktree, "write", counted)
    crowd = {f"agent/workspace/_shared/n{i:03d}.md": b"x\n" for i in range(manyfiles.BY_FOLDER)}
    few = {f"user/user-global/_shared/f{i}.md": b"y\n" for i in range(manyfiles.BY_FOLDER - 1)}
    files = {**crowd, **few}
    got = manyfiles.write_files(str(tmp_path), files, set(files))
    assert sorted(by_path) == sorted(few)  # the crowded folder's files went by name
    assert all((tmp_path / p).read_bytes() == d for p, d in files.items())
    assert [got[p].st_ino for p in files] == [os.lstat(tmp_path / p).st_ino for p in files]
