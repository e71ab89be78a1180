"""Objects read without dulwich (filemem/files/objread.py) against the real git CLI: every
object of stores git itself packed (both kinds of delta, long chains) reads exactly as
`git cat-file` prints it; a damaged or foreign pack is never believed (the read falls back
to dulwich and reports the damage as before); packs made while a reader is open are found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import filemem
from filemem.files.objread import Packs
from filemem.files.objread import loose as read_loose
from tests.conftest import BIG, GIT, ctx, git


def _store(path: Path, adds: int = 40) -> Path:
    with filemem.open_store(path, create=True, budgets=BIG, write_policy="auto") as p:
        p.seed([{"track": "agent", "scope": "workspace", "text": f"seeded fact {i}"}
                for i in range(50)], ctx(agent="coder"))
        for i in range(adds):  # similar texts and trees: material for deltas
            p.add({"track": "user", "scope": "user-global", "text": f"note {i} " * 30},
                  ctx())
    return path


def _objects(path: Path) -> list[tuple[str, str]]:
    out = git(path, "cat-file", "--batch-all-objects",
              "--batch-check=%(objectname) %(objecttype)")
    return [(line.split()[0], line.split()[1]) for line in out.splitlines()]


def _cat(path: Path, kind: str, sha: str) -> bytes:
    assert GIT is not None
    return subprocess.run([GIT, "-C", str(path), "cat-file", kind, sha], check=True,
                          capture_output=True).stdout


@pytest.mark.parametrize("offsets", ["true", "false"])  # OFS_DELTA / REF_DELTA bases
def test_every_object_git_packed_reads_as_git_prints_it(tmp_path: Path, offsets: str) -> None:
    store = _store(tmp_path / "s")
    git(store, "-c", f"repack.useDeltaBaseOffset={offsets}", "repack", "-adf", "-q",
        "--depth=250", "--window=250")
    verify = git(store, "verify-pack", "-v", *map(str, (store / ".git/objects/pack").glob(
        "*.idx")))
    assert "chain length = 2" in verify  # the repack really made delta chains
    packs = Packs(str(store / ".git"))
    objects = _objects(store)
    assert len(objects) > 200
    for sha, kind in objects:
        assert read_loose(str(store / ".git"), sha) is None  # all packed now
        assert packs.get(sha) == (kind.encode(), _cat(store, kind, sha)), sha
    assert packs.get("0" * 40) is None
    assert packs.get("not a sha") is None
    packs.close()


def test_a_damaged_pack_is_never_believed(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", adds=5)
    git(store, "repack", "-adf", "-q")
    expected = {sha: (kind.encode(), _cat(store, kind, sha)) for sha, kind in _objects(store)}
    (pack,) = (store / ".git/objects/pack").glob("*.pack")
    data = bytearray(pack.read_bytes())
    pack.chmod(0o600)
    for at in range(12, len(data) - 20, 97):  # bytes all over the objects' data
        data[at] ^= 0x55
    pack.write_bytes(bytes(data))
    packs = Packs(str(store / ".git"))
    answers = [packs.get(sha) for sha in expected]
    assert None in answers  # the damage was noticed ...
    for sha, got in zip(expected, answers, strict=True):
        assert got is None or got == expected[sha]  # ... and nothing wrong was believed
    pack.write_bytes(bytes(data[: len(data) // 2]))  # cut short
    cut = Packs(str(store / ".git"))
    for sha, want in expected.items():
        got = cut.get(sha)
        assert got is None or got == want
    with pytest.raises(filemem.FilememError):  # reported as before: the store is damaged
        filemem.open_store(store).list_entries()


def test_packs_made_while_open_are_found(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", adds=3)
    packs = Packs(str(store / ".git"))
    first = _objects(store)
    git(store, "repack", "-adq")
    assert all(packs.get(sha) is not None for sha, _ in first)
    with filemem.open_store(store, write_policy="auto") as p:
        p.add({"track": "user", "scope": "user-global", "text": "after the first scan"},
              ctx())
    git(store, "repack", "-adq")  # the old pack is deleted; a new one holds everything
    for sha, kind in _objects(store):
        assert packs.get(sha) == (kind.encode(), _cat(store, kind, sha))
    packs.close()


def test_reading_a_packed_store_does_not_import_dulwich(tmp_path: Path) -> None:
    store = _store(tmp_path / "s", adds=3)
    git(store, "repack", "-adq")
    code = ("import sys, filemem\n"
            f"with filemem.open_store({str(store)!r}) as p:\n"
            "    assert len(p.list_entries()) == 53\n"
            "    p.query({'text': 'note'})\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dulwich'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_merging_small_packs_keeps_every_object_deltas_included(tmp_path: Path) -> None:
    """packwrite.merge_small rolls the writes' small packs and a small pack git wrote with
    deltas into one: whole entries copied as stored, deltas made whole; every object reads
    as `git cat-file` printed it before, and `git fsck --strict` passes."""
    from filemem.files import packwrite

    store = _store(tmp_path / "s", adds=10)
    git(store, "repack", "-a", "-d", "-f", "-q", "--window=50")  # deltas (one small pack)
    with filemem.open_store(store, write_policy="auto", budgets=BIG) as p:
        for i in range(5):
            p.add({"track": "user", "scope": "user-global", "text": f"later {i}"}, ctx())
    git_dir = str(store / ".git")
    assert git(store, "verify-pack", "-v", *[
        str(f) for f in (store / ".git/objects/pack").glob("*.idx")]).count("chain length") > 0
    before = {sha: _cat(store, kind, sha) for sha, kind in _objects(store)}
    packs = packwrite.small_packs(git_dir)
    assert len(packs) == 6
    assert packwrite.merge_small(git_dir) == 6
    assert len(packwrite.small_packs(git_dir)) == 1
    after = {sha: _cat(store, kind, sha) for sha, kind in _objects(store)}
    assert after == before
    git(store, "fsck", "--strict")
    packs_reader = Packs(git_dir)
    for sha in before:
        assert packs_reader.get(sha) is not None


def test_a_batch_pack_of_stored_objects_is_what_git_reads(tmp_path: Path) -> None:
    """A batch's objects are written as stored deflate blocks (packwrite._stored), each made
    in one piece with its entry header (a seed's ~0.7 MB commit among its blobs): git
    verifies the pack and prints every object as written, whatever its size (empty, one
    block, several blocks of 64 KB, at and around their edges)."""
    import zlib

    from filemem.files import gitrepo, packwrite
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    sizes = [0, 1, 330, 0xFFFF, 0x10000, 0x10001, 3 * 0xFFFF, 200_000, 700_000,
             *range(100, 170)]
    items = []
    for i, n in enumerate(sizes):
        raw = bytes(range(256)) * (n // 256) + bytes((i + k) % 251 for k in range(n % 256))
        assert zlib.decompress(packwrite._stored(raw)) == raw
        assert packwrite._stored(raw, b"\x9f") == b"\x9f" + packwrite._stored(raw)
        items.append((gitrepo.object_sha(b"blob", raw), b"blob", raw))
    unique = {sha: (sha, k, raw) for sha, k, raw in items}
    assert len(unique) > packwrite.BATCH  # stored, as a batch is
    name = packwrite.write(str(repo / ".git"), list(unique.values()), durable=True)
    git(repo, "verify-pack", str(repo / ".git/objects/pack" / f"{name}.idx"))
    for sha, _kind, raw in unique.values():
        assert _cat(repo, "blob", sha) == raw


def test_a_pack_is_written_where_the_pack_folder_is_missing(tmp_path: Path) -> None:
    """git makes objects/pack, but a repository may lack it: the first pack makes it."""
    import shutil

    from filemem.files import gitrepo, packwrite
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    shutil.rmtree(repo / ".git" / "objects" / "pack")
    raw = b"a note\n"
    sha = gitrepo.object_sha(b"blob", raw)
    name = packwrite.write(str(repo / ".git"), [(sha, b"blob", raw)], durable=True)
    assert (repo / ".git" / "objects" / "pack" / f"{name}.idx").is_file()
    assert _cat(repo, "blob", sha) == raw


def test_a_writes_pack_is_named_by_its_objects_before_it_is_made(tmp_path: Path) -> None:
    """A write's log record names its pack before the pack is made (it is made during the
    record's flush): the name is the SHA-1 of the objects' sorted binary names, whatever
    their order, and git reads the pack by that name. A merge's pack keeps git's naming,
    after the pack's checksum."""
    import hashlib

    from filemem.files import gitrepo, packwrite
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    raws = [b"one note\n", b"another note\n", b"a third\n"]
    items = [(gitrepo.object_sha(b"blob", raw), b"blob", raw) for raw in raws]
    shas = [sha for sha, _, _ in items]
    expected = "pack-" + hashlib.sha1(b"".join(sorted(map(bytes.fromhex, shas)))).hexdigest()
    assert packwrite.name_of(shas) == packwrite.name_of(reversed(shas)) == expected
    assert packwrite.encode(items).name == packwrite.encode(items[::-1]).name == expected
    name = packwrite.write(str(repo / ".git"), items, durable=True)
    assert name == expected
    git(repo, "verify-pack", str(repo / ".git/objects/pack" / f"{name}.idx"))
    for sha, _kind, raw in items:
        assert _cat(repo, "blob", sha) == raw
    pack = packwrite.encode(items)
    merged = packwrite.assemble([(bytes.fromhex(s), packwrite.chunk(b"blob", r))
                                 for s, _k, r in items])
    assert merged.pack == pack.pack and merged.name == f"pack-{pack.pack[-20:].hex()}"


@pytest.mark.parametrize("firsts", [[], [0], [255], [0, 0, 255], [5, 5, 9], list(range(256)),
                                    [7] * 70, [1, 200, 200, 201, 254]])
def test_the_fan_out_table_counts_the_shas_at_or_below_each_first_byte(
        firsts: list[int]) -> None:
    import struct

    from filemem.files import packwrite
    shas = sorted(bytes([b]) + bytes(19) for b in firsts)
    counts = [sum(1 for s in shas if s[0] <= b) for b in range(256)]
    assert packwrite._fanout(shas) == struct.pack(">256L", *counts)
