"""A full disk, for real: a small tmpfs filled to many levels. A write fails with one clear
line (STORE_FULL, exit 6) and nothing half-written gets a real name; reads still answer;
after space is freed nothing is left behind and the store is consistent."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import filemem
from tests.conftest import BIG, assert_clean_repo, ctx, git, run_cli

UG = {"track": "user", "scope": "user-global"}
SIZE = 4 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(disk: Path, leave: int) -> Path:
    """Fill the disk so that about ``leave`` bytes stay free."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        chunk = b"\0" * 65536
        try:
            while True:
                st = os.statvfs(disk)
                free = st.f_bavail * st.f_frsize
                if free <= leave:
                    break
                f.write(chunk[: max(1, min(len(chunk), free - leave))])
                f.flush()
        except OSError:
            pass
    return filler


def leftovers(store: Path) -> list[str]:
    """Temp files a failed write could leave: none may survive."""
    found = []
    for root, _dirs, files in os.walk(store):
        for name in files:
            if root.endswith(".filemem") and name in ("lock", "ledger.lock"):
                continue  # lock files that live there for good (the store lock, the ledger's)
            if name.startswith(("tmp_", ".tmp")) or name.endswith((".tmp", ".lock")) \
                    or ".filemem-tmp" in name:
                found.append(os.path.relpath(os.path.join(root, name), store))
    return found


@pytest.mark.parametrize("leave", [0, 512, 4096, 16384, 65536])
def test_a_write_on_a_full_disk_fails_cleanly(small_disk: Path, leave: int) -> None:
    store = small_disk / "store"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        for i in range(3):
            p.add({**UG, "text": f"before the disk filled {i}"}, ctx())
    head = git(store, "rev-parse", "HEAD")
    filler = fill(small_disk, leave)
    text = "x" * 300 + " written on a full disk"  # five fit the layer's budget
    results = [run_cli("add", "--yes", "--track", "user", "--scope", "user-global", text,
                       store=store) for _ in range(5)]
    for out in results:
        assert "Traceback" not in out.stderr, out.stderr
        assert out.returncode in (0, 6), out.stderr
        if out.returncode == 6:
            assert out.stderr.startswith("filemem: STORE_FULL: the disk holding the store")
            assert len(out.stderr.strip().splitlines()) == 1
    # reads answer on the full disk (a recall bump may be skipped, with a note)
    listed = run_cli("list", "--json", store=store)
    assert listed.returncode == 0, listed.stderr
    queried = run_cli("query", "before", "--json", store=store)
    assert queried.returncode == 0, queried.stderr
    assert len(json.loads(queried.stdout)["entries"]) == 3
    assert "Traceback" not in queried.stderr
    written = sum(out.returncode == 0 for out in results)
    if leave == 0:
        assert written == 0  # not a byte to spare: every write is refused
    filler.unlink()
    # space again: the next open repairs what a half-done write left; nothing is leaked
    with filemem.open_store(store, write_policy="auto") as p:
        texts = [e["text"] for e in p.list_entries()]
        assert texts.count(text) == written
        assert len(texts) == 3 + written
        p.add({**UG, "text": "after space came back"}, ctx())
    assert leftovers(store) == []
    assert_clean_repo(store)
    if written == 0:
        assert git(store, "rev-list", "--count", f"{head.strip()}..HEAD").strip() == "1"
    assert run_cli("verify", store=store).returncode == 0


def test_an_import_on_a_full_disk_leaks_no_pack(small_disk: Path) -> None:
    store = small_disk / "store"
    filemem.init_store(store).close()
    many = [{"track": "agent", "scope": "user-global", "text": f"fact number {i} " + "y" * 300}
            for i in range(1000)]  # one pack of ~300 KB: more than is left
    filler = fill(small_disk, 64 * 1024)
    with filemem.open_store(store, write_policy="auto", budgets=BIG) as p:
        with pytest.raises(filemem.StoreFull, match="nothing was written"):
            p.import_entries(many, ctx())
        assert p.list_entries() == []
    filler.unlink()
    assert leftovers(store) == []
    pack = store / ".git" / "objects" / "pack"
    assert all(name.endswith((".pack", ".idx")) for name in os.listdir(pack))
    packs = {n.rsplit(".", 1)[0] for n in os.listdir(pack)}
    assert all((pack / f"{n}.idx").exists() and (pack / f"{n}.pack").exists() for n in packs)
    assert_clean_repo(store)
