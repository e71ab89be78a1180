"""filemem.files.gitindex against the real git CLI: what we parse and write is what git reads."""

from __future__ import annotations

import hashlib
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

import filemem
from filemem.files.gitindex import GitIndex, IndexUnsupported, hash_blob
from tests.conftest import BIG, assert_clean_repo, ctx, git

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
WS = {"track": "agent", "scope": "workspace"}


def ls_files(index: GitIndex) -> str:
    """Our parsed index in `git ls-files -s` format."""
    lines = []
    for (name, stage), raw in sorted(index.entries.items()):
        mode = struct.unpack_from(">L", raw, 24)[0]
        lines.append(f"{mode:06o} {raw[40:60].hex()} {stage}\t{name.decode()}")
    return "".join(line + "\n" for line in lines)


def ls_git(path: Path) -> str:
    """`git ls-files -s` with names unquoted (so non-ASCII names compare as text)."""
    return git(path, "-c", "core.quotePath=false", "ls-files", "-s")


def ls_tree_as_index(path: Path) -> str:
    """HEAD's files in `git ls-files -s` format."""
    out = []
    listing = git(path, "-c", "core.quotePath=false", "ls-tree", "-r", "--full-tree", "HEAD")
    for line in listing.splitlines():
        meta, name = line.split("\t", 1)
        mode, _kind, sha = meta.split()
        out.append(f"{mode} {sha} 0\t{name}\n")
    return "".join(out)


def index_version(path: Path) -> int:
    data = (path / ".git" / "index").read_bytes()
    return struct.unpack(">4sLL", data[:12])[1]


def git_dir(path: Path) -> str:
    return str(path / ".git")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A plain git repository with a few committed files."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("a\n")
    (root / "dir" / "sub").mkdir(parents=True)
    (root / "dir" / "sub" / "b.md").write_text("b\n")
    (root / "dir" / "c d.txt").write_text("with a space\n")
    (root / "中文.md").write_text("cjk\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


# ---------------------------------------------------------------- the format, with plain git


@pytest.mark.parametrize("data", [b"", b"hello\n", b"\x00\xff binary", "你好".encode() * 1000])
def test_hash_blob_matches_git(tmp_path: Path, data: bytes) -> None:
    f = tmp_path / "blob"
    f.write_bytes(data)
    assert hash_blob(data) == git(tmp_path, "hash-object", str(f)).strip()


def test_load_agrees_with_ls_files(repo: Path) -> None:
    index = GitIndex.load(git_dir(repo))
    assert ls_files(index) == ls_git(repo)
    assert "100755" in ls_files(index)  # the executable bit survives
    assert index.sha("dir/sub/b.md") == hash_blob(b"b\n")
    assert index.sha("missing") is None
    assert sorted(index.paths()) == sorted(_ls_names(repo))


def _ls_names(repo: Path) -> list[str]:
    return [line.split("\t", 1)[1] for line in ls_git(repo).splitlines()]


def test_write_unchanged_keeps_git_happy(repo: Path) -> None:
    before = ls_git(repo)
    GitIndex.load(git_dir(repo)).write()
    assert ls_git(repo) == before
    assert git(repo, "diff-files", "--name-only") == ""  # stat data survived as well
    assert_clean_repo(repo)


def test_stat_matches(repo: Path) -> None:
    index = GitIndex.load(git_dir(repo))
    assert index.stat_matches("a.txt", os.stat(repo / "a.txt"))
    (repo / "a.txt").write_text("changed, longer\n")
    assert not index.stat_matches("a.txt", os.stat(repo / "a.txt"))
    assert not index.stat_matches("nope", os.stat(repo / "run.sh"))


def test_times_are_git_s_seconds_and_nanoseconds_even_where_the_float_rounds_up(
        repo: Path) -> None:
    """git records tv_sec and tv_nsec; the float st_mtime of ...999999999 ns is the next
    second, so taking seconds from it would record a time one second off."""
    ns = 1_700_000_000_999_999_999
    st = os.stat_result((0o100644, 5, 7, 1, 0, 0, 12, 1, 2, 3,
                         1.0, ns / 1e9, ns / 1e9, 10**9, ns, ns))
    assert int(st.st_mtime) == 1_700_000_001  # what the float says
    index = GitIndex.load(git_dir(repo))
    index.set("a.txt", hash_blob(b"a\n"), st)
    raw = index.entries[(b"a.txt", 0)]
    c_s, c_ns, m_s, m_ns = struct.unpack_from(">LLLL", raw)
    assert (c_s, c_ns, m_s, m_ns) == (1_700_000_000, 999_999_999) * 2
    assert index.stat_matches("a.txt", st)


def test_set_and_remove_are_what_git_sees(repo: Path) -> None:
    (repo / "dir" / "new.md").write_bytes(b"new\n")
    (repo / "a.txt").write_bytes(b"a2\n")
    git(repo, "hash-object", "-w", "dir/new.md", "a.txt")  # the blobs, not the index
    index = GitIndex.load(git_dir(repo))
    index.set("dir/new.md", hash_blob(b"new\n"), os.stat(repo / "dir" / "new.md"))
    index.set("a.txt", hash_blob(b"a2\n"), os.stat(repo / "a.txt"))
    (repo / "run.sh").unlink()
    index.remove("run.sh")
    index.write()
    assert git(repo, "diff-files", "--name-only") == ""
    status = git(repo, "status", "--porcelain").splitlines()
    assert sorted(status) == ["A  dir/new.md", "D  run.sh", "M  a.txt"]
    git(repo, "commit", "-q", "-m", "via our index")
    assert_clean_repo(repo)
    assert git(repo, "show", "HEAD:dir/new.md") == "new\n"


def test_unknown_stat_makes_git_recheck_the_file(repo: Path) -> None:
    index = GitIndex.load(git_dir(repo))
    index.set("a.txt", hash_blob(b"a\n"), None)
    index.write()
    assert git(repo, "status", "--porcelain") == ""  # same content: clean after a re-check
    index = GitIndex.load(git_dir(repo))
    index.set("a.txt", hash_blob(b"other\n"), None)
    index.write()
    assert "a.txt" in git(repo, "status", "--porcelain")


def _conflict(repo: Path) -> None:
    """a.txt changed on two branches, merged: git leaves it at stages 1-3."""
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "a.txt").write_text("other side\n")
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("main side\n")
    git(repo, "commit", "-q", "-am", "main")
    git(repo, "merge", "-q", "other", check=False)


def test_conflict_stages_round_trip_and_set_resolves_them(repo: Path) -> None:
    _conflict(repo)
    before = ls_git(repo)
    assert " 1\ta.txt" in before and " 2\ta.txt" in before and " 3\ta.txt" in before
    index = GitIndex.load(git_dir(repo))
    assert ls_files(index) == before
    index.write()
    assert ls_git(repo) == before
    (repo / "a.txt").write_text("resolved\n")
    index = GitIndex.load(git_dir(repo))
    index.set("a.txt", hash_blob(b"resolved\n"), os.stat(repo / "a.txt"))
    index.write()
    assert git(repo, "ls-files", "-u") == ""
    assert git(repo, "status", "--porcelain") == "M  a.txt\n"


def test_set_many_resolves_conflict_stages_too(repo: Path) -> None:
    """The bulk path of set_many (64 files or more) drops a conflicted path's stages 1-3
    as set does, and git then sees no conflict left."""
    _conflict(repo)
    files = [("a.txt", b"resolved\n")] + [(f"n{i:03d}.txt", b"%d\n" % i) for i in range(70)]
    for name, data in files:
        (repo / name).write_bytes(data)
    index = GitIndex.load(git_dir(repo))
    index.set_many((name, hash_blob(data), os.stat(repo / name)) for name, data in files)
    index.write()
    assert git(repo, "ls-files", "-u") == ""
    status = git(repo, "status", "--porcelain").splitlines()
    assert status[0] == "M  a.txt" and len(status) == 71
    assert all(line.startswith("A  n") for line in status[1:])


def test_long_path_name_round_trips(repo: Path) -> None:
    """A name of 0xFFF bytes or more is stored with the length field saturated."""
    sha = hash_blob(b"a\n")
    long_name = "/".join(["d" * 200] * 25)  # 5024 bytes
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{sha},{long_name}")
    before = ls_git(repo)
    index = GitIndex.load(git_dir(repo))
    assert index.sha(long_name) == sha
    assert ls_files(index) == before
    index.write()
    assert ls_git(repo) == before
    index = GitIndex.load(git_dir(repo))
    other = "e" * 4200
    index.set(other, sha, None)
    index.write()
    assert f"{sha} 0\t{other}\n" in ls_git(repo)


def test_extensions_are_dropped_on_write(repo: Path) -> None:
    git(repo, "write-tree")  # fills the TREE (cache-tree) extension
    assert b"TREE" in (repo / ".git" / "index").read_bytes()
    before = ls_git(repo)
    GitIndex.load(git_dir(repo)).write()
    assert ls_git(repo) == before
    assert_clean_repo(repo)


def test_intent_to_add_keeps_index_version_3(repo: Path) -> None:
    (repo / "later.txt").write_text("later\n")
    git(repo, "add", "-N", "later.txt")
    assert index_version(repo) == 3
    before = (ls_git(repo), git(repo, "status", "--porcelain"))
    GitIndex.load(git_dir(repo)).write()
    assert index_version(repo) == 3
    assert (ls_git(repo), git(repo, "status", "--porcelain")) == before
    assert " A later.txt" in before[1]


def _read_both_ways(repo: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """The index as read (entries taken in file order where they can be), and as the general
    reader reads it, entry by entry."""
    def parts(index: GitIndex) -> object:
        return (index.entries, index._keys, index._values, index._extended, index._staged)

    quick = parts(GitIndex.load(git_dir(repo)))
    with monkeypatch.context() as mp:
        mp.setattr(GitIndex, "_take_in_order", lambda self, data, count: None)
        general = parts(GitIndex.load(git_dir(repo)))
    return quick, general


@pytest.mark.parametrize("form", ["plain", "conflict", "intent-to-add", "long name",
                                  "cache tree", "out of order", "padding not NUL"])
def test_an_index_read_in_file_order_is_what_the_general_reader_reads(
        repo: Path, form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if form == "conflict":
        _conflict(repo)
    elif form == "intent-to-add":
        (repo / "later.txt").write_text("later\n")
        git(repo, "add", "-N", "later.txt")
    elif form == "long name":
        sha = hash_blob(b"a\n")
        git(repo, "update-index", "--add", "--cacheinfo", f"100644,{sha},{'d' * 5000}")
    elif form == "cache tree":
        git(repo, "write-tree")
    elif form in ("out of order", "padding not NUL"):  # as another tool might write it
        path = repo / ".git" / "index"
        data = bytearray(path.read_bytes()[:-20])
        first = 12 + ((62 + len(b"a.txt") + 8) & ~7)  # a.txt's entry is the first
        if form == "padding not NUL":
            data[12 + 62 + len(b"a.txt") + 1] = 0x41
        else:  # the first two entries swapped
            second = first + ((62 + len(b"dir/c d.txt") + 8) & ~7)
            data[12:second] = data[first:second] + data[12:first]
        path.write_bytes(bytes(data) + hashlib.sha1(bytes(data)).digest())
    quick, general = _read_both_ways(repo, monkeypatch)
    assert quick == general
    if form not in ("out of order", "padding not NUL"):  # git shows its own as it stores it
        assert ls_files(GitIndex.load(git_dir(repo))) == ls_git(repo)


def test_missing_short_corrupt_and_unsupported_indexes(repo: Path) -> None:
    path = repo / ".git" / "index"
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(IndexUnsupported, match="checksum"):
        GitIndex.load(git_dir(repo))
    path.write_bytes(data[:20])
    with pytest.raises(IndexUnsupported, match="short"):
        GitIndex.load(git_dir(repo))
    path.unlink()
    with pytest.raises(IndexUnsupported):
        GitIndex.load(git_dir(repo))


def test_an_index_without_a_checksum_is_read_as_git_reads_it(repo: Path) -> None:
    """git under index.skipHash (on with feature.manyFiles) writes 20 zero bytes where the
    checksum goes; git accepts that index, so it is not rebuilt and nothing staged is lost."""
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    path = repo / ".git" / "index"
    data = path.read_bytes()
    path.write_bytes(data[:-20] + bytes(20))
    # git reads it (without the optional lock, so that it does not write the index again)
    assert git(repo, "--no-optional-locks", "status", "--porcelain") == "A  staged.txt\n"
    assert path.read_bytes()[-20:] == bytes(20)
    index = GitIndex.load(git_dir(repo))
    assert ls_files(index) == ls_git(repo)
    assert index.sha("staged.txt") == hash_blob(b"staged\n")
    index.write()  # written back with its checksum, the staged file still staged
    assert path.read_bytes()[-20:] != bytes(20)
    assert git(repo, "status", "--porcelain") == "A  staged.txt\n"


def test_index_version_4_is_read(repo: Path) -> None:
    """Version 4 compresses paths against the previous one; the entries read back whole."""
    expected = ls_files(GitIndex.load(git_dir(repo)))
    git(repo, "update-index", "--index-version", "4")
    assert (repo / ".git" / "index").read_bytes()[4:8] == b"\0\0\0\x04"
    assert ls_files(GitIndex.load(git_dir(repo))) == expected == ls_git(repo)


def test_split_index_is_unsupported(repo: Path) -> None:
    git(repo, "update-index", "--split-index")
    with pytest.raises(IndexUnsupported, match="extension"):
        GitIndex.load(git_dir(repo))


def test_write_waits_for_index_lock_and_times_out(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"someone else")
    before = (repo / ".git" / "index").read_bytes()
    with pytest.raises(TimeoutError, match=r"index\.lock"):
        GitIndex.load(git_dir(repo)).write(timeout=0.05)
    assert lock.read_bytes() == b"someone else"
    assert (repo / ".git" / "index").read_bytes() == before


def _many_files(repo: Path, count: int) -> None:
    """``count`` more committed files: an index over the size hashed beside the writer."""
    folder = repo / "many"
    folder.mkdir()
    for i in range(count):
        (folder / f"note-{i:04d}-{'x' * 40}.md").write_text(f"note {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "many")


def test_a_large_index_is_hashed_on_the_helper_thread_while_the_caller_works(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest waits for an event only the caller's ``meanwhile`` sets: hashed one after
    the other, the write would time out. git reads what was written, stat data and all."""
    import threading

    from filemem.files import gitindex
    _many_files(repo, 400)
    index = GitIndex.load(git_dir(repo))
    assert len(b"".join(index._values)) >= gitindex._HASH_BESIDE
    worked = threading.Event()
    hashed_on: list[str] = []
    real_sha1 = hashlib.sha1

    class Sha1Shim:
        @staticmethod
        def sha1(data: bytes) -> hashlib._Hash:
            if len(data) >= gitindex._HASH_BESIDE:
                hashed_on.append(threading.current_thread().name)
                if not worked.wait(timeout=30):
                    raise TimeoutError("the caller's work did not run while hashing")
            return real_sha1(data)

    monkeypatch.setattr(gitindex, "hashlib", Sha1Shim)
    before = ls_git(repo)
    index.write(meanwhile=worked.set)
    assert hashed_on == ["filemem-helper"]
    assert ls_git(repo) == before
    assert git(repo, "diff-files", "--name-only") == ""
    assert_clean_repo(repo)
    git(repo, "fsck", "--strict")  # the checksum is checked here
    assert ls_files(GitIndex.load(git_dir(repo))) == before  # and by our reader


def test_a_small_index_is_hashed_in_line_and_meanwhile_still_runs(repo: Path) -> None:
    import threading

    from filemem.files import gitindex
    index = GitIndex.load(git_dir(repo))
    assert len(b"".join(index._values)) < gitindex._HASH_BESIDE
    ran: list[str] = []
    index.write(meanwhile=lambda: ran.append(threading.current_thread().name))
    assert ran == [threading.current_thread().name]
    git(repo, "fsck", "--strict")
    assert_clean_repo(repo)


def test_a_failed_digest_leaves_the_index_and_its_lock_as_they_were(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from filemem.files import gitindex
    _many_files(repo, 400)
    before = (repo / ".git" / "index").read_bytes()

    class Failing:
        @staticmethod
        def sha1(data: bytes) -> hashlib._Hash:
            raise MemoryError("no room to hash")

    index = GitIndex.load(git_dir(repo))
    monkeypatch.setattr(gitindex, "hashlib", Failing)
    with pytest.raises(MemoryError, match="no room"):
        index.write()
    assert (repo / ".git" / "index").read_bytes() == before
    assert not (repo / ".git" / "index.lock").exists()


# ---------------------------------------------------------------- the provider's index


def check_index(store: Path) -> None:
    """Index == HEAD, our parser agrees with git, stat data is exact, status is clean."""
    listed = ls_git(store)
    assert ls_files(GitIndex.load(git_dir(store))) == listed
    assert listed == ls_tree_as_index(store)
    assert git(store, "diff-files", "--name-only") == ""
    assert_clean_repo(store)


def test_provider_writes_keep_the_index_exact(make_provider: MakeProvider,
                                              store_path: Path) -> None:
    p = make_provider(budgets=BIG)
    check_index(store_path)
    p.add({**UG, "text": "first"}, ctx())
    check_index(store_path)
    p.add({**WS, "text": "second"}, ctx(agent="coder"))
    p.seed([{**UG, "text": f"seeded {i}"} for i in range(5)], ctx())
    check_index(store_path)
    p.replace({**UG, "match": "first", "text": "first, replaced"}, ctx())
    p.remove({**WS, "match": "second"}, ctx(agent="coder"))
    p.consolidate({**UG, "matches": ["seeded 1", "seeded 2"], "text": "merged"}, ctx())
    check_index(store_path)
    assert len(p.list_entries()) == 5


def test_intent_to_add_survives_a_provider_write(make_provider: MakeProvider,
                                                 store_path: Path) -> None:
    p = make_provider(budgets=BIG)
    (store_path / "notes.txt").write_text("a person's notes\n")
    git(store_path, "add", "-N", "notes.txt")
    assert index_version(store_path) == 3
    status = git(store_path, "status", "--porcelain")
    assert status == " A notes.txt\n"
    p.add({**UG, "text": "written while notes.txt is intent-to-add"}, ctx())
    assert git(store_path, "status", "--porcelain") == status
    assert index_version(store_path) == 3
    listed = ls_git(store_path)
    assert ls_files(GitIndex.load(git_dir(store_path))) == listed
    assert "\tnotes.txt\n" in listed
    assert git(store_path, "diff-files", "--name-only") == "notes.txt\n"  # only the i-t-a file


@pytest.mark.parametrize("command", [("update-index", "--index-version", "4"),
                                     ("update-index", "--split-index")])
def test_an_unsupported_index_is_rebuilt(make_provider: MakeProvider, store_path: Path,
                                         command: tuple[str, ...]) -> None:
    p = make_provider(budgets=BIG)
    p.add({**UG, "text": "before"}, ctx())
    git(store_path, *command)
    p.add({**UG, "text": "after the index was rewritten by git"}, ctx())
    assert index_version(store_path) in (2, 3)
    check_index(store_path)
    p.replace({**UG, "match": "before", "text": "changed"}, ctx())
    check_index(store_path)


def test_index_refreshed_by_git_is_picked_up(make_provider: MakeProvider,
                                             store_path: Path) -> None:
    """git rewrites the index (status refresh, add); the next provider write starts from it."""
    p = make_provider(budgets=BIG)
    p.add({**UG, "text": "one"}, ctx())
    (store_path / "extra.txt").write_text("staged by a person\n")
    git(store_path, "add", "extra.txt")
    p.add({**UG, "text": "two"}, ctx())
    assert git(store_path, "status", "--porcelain") == "A  extra.txt\n"
    assert ls_files(GitIndex.load(git_dir(store_path))) == ls_git(store_path)


def test_a_version_4_index_keeps_what_a_person_staged(make_provider: MakeProvider,
                                                      store_path: Path) -> None:
    p = make_provider(budgets=BIG)
    (store_path / "extra.txt").write_text("staged by a person\n")
    git(store_path, "add", "extra.txt")
    git(store_path, "update-index", "--index-version", "4")
    assert git(store_path, "status", "--porcelain") == "A  extra.txt\n"
    p.add({**UG, "text": "a write while something is staged"}, ctx())
    assert git(store_path, "status", "--porcelain") == "A  extra.txt\n"


def test_a_split_index_is_rebuilt_and_says_so(make_provider: MakeProvider, store_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """Documented limit: a split index (a required extension) is rebuilt from HEAD, so what
    a person staged becomes unstaged; the file itself stays, and a warning says so."""
    p = make_provider(budgets=BIG)
    (store_path / "extra.txt").write_text("staged by a person\n")
    git(store_path, "add", "extra.txt")
    git(store_path, "update-index", "--split-index")
    with caplog.at_level(logging.WARNING, logger="filemem"):
        p.add({**UG, "text": "a write while something is staged"}, ctx())
    assert "unstaged" in caplog.text
    assert git(store_path, "status", "--porcelain") == "?? extra.txt\n"
    assert (store_path / "extra.txt").read_text() == "staged by a person\n"


def test_a_rebuilt_index_keeps_file_modes(make_provider: MakeProvider,
                                          store_path: Path) -> None:
    p = make_provider(budgets=BIG)
    script = store_path / "tool.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (store_path / "link.md").symlink_to("README.md")
    git(store_path, "add", "tool.sh", "link.md")
    git(store_path, "commit", "-q", "-m", "a person adds a script and a link")
    git(store_path, "update-index", "--index-version", "4")
    p.add({**UG, "text": "a write that makes the store rebuild the index"}, ctx())
    assert ls_git(store_path) == ls_tree_as_index(store_path)
    assert_clean_repo(store_path)


def test_a_normal_write_keeps_file_modes(make_provider: MakeProvider, store_path: Path) -> None:
    p = make_provider(budgets=BIG)
    script = store_path / "tool.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    (store_path / "link.md").symlink_to("README.md")
    git(store_path, "add", "tool.sh", "link.md")
    git(store_path, "commit", "-q", "-m", "a person adds a script and a link")
    p.add({**UG, "text": "a write with the index in a format we keep"}, ctx())
    check_index(store_path)
    assert "100755" in ls_git(store_path) and "120000" in ls_git(store_path)
