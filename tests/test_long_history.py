"""Long histories: verify resumes from its last clean run (and `--full` replays all), `log
--entry` reads an index of commits by entry, and loose objects are packed on a geometric
schedule that a killed repack cannot spoil. Histories are written through the API or, when
long, by `git fast-import` in filemem's own format (tests.test_history.fast_history)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import filemem
import filemem.owner
from filemem.files import packing, packwrite
from filemem.owner import gitfetch, gitpush, history, logindex, logview, verifycheck
from filemem.owner import sync as fsync
from tests.conftest import BIG, assert_clean_repo, ctx, file_of, git, head, rel, set_text
from tests.test_history import fast_history, ok, person_commits, verify_json

UG = {"track": "user", "scope": "user-global"}
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def p(make_provider: Any) -> filemem.Provider:
    return make_provider(write_policy="auto", budgets=BIG)


def _checkpoint(store: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (store / ".filemem" / "cache" / verifycheck.NAME).read_text())
    return data


# ---------------------------------------------------------------- verify: the checkpoint


def test_verify_resumes_from_the_last_clean_run_and_full_replays_all(
        p: filemem.Provider, store_path: Path) -> None:
    for i in range(3):
        p.add({**UG, "text": f"fact {i}"}, ctx())
    first = verify_json(store_path)  # (verify_json also checks --full gives the same)
    assert first["ok"] and first["commits"] == 4
    proved = head(store_path)
    assert _checkpoint(store_path)["commit"] == proved
    p.add({**UG, "text": "fact 3"}, ctx())
    p.replace({**UG, "match": "fact 0", "text": "fact zero"}, ctx())
    out = fm_json(store_path, "verify", "--json")
    assert out["resumedFrom"] == proved and out["ok"]
    assert (out["commits"], out["auditRows"], out["entriesAtHead"]) == (6, 6, 4)
    text = ok("verify", store=store_path)
    assert f"up to {head(store_path)[:10]} were proved" in text and "--full" in text
    assert fm_json(store_path, "verify", "--full", "--json")["resumedFrom"] is None


def fm_json(store: Path, *args: str, code: int = 0) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "filemem", *args, "--store", str(store)],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert out.returncode == code, (out.stdout, out.stderr)
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_a_forged_commit_after_the_checkpoint_is_found_and_the_checkpoint_dropped(
        p: filemem.Provider, store_path: Path) -> None:
    e = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    assert history.verify(p.store).ok
    proved = head(store_path)
    # a person's commit that reuses the last commit's trailers for another text
    path = file_of(store_path, e["id"])
    set_text(path, "likes coffee")
    msg = git(store_path, "log", "-1", "--format=%B")
    person_commits(store_path, msg, rel(store_path, path))
    report = verify_json(store_path, expect_exit=1)
    assert report["resumedFrom"] == proved
    assert any("likes" in pr["problem"] or "text" in pr["problem"] for pr in report["problems"])
    assert not (store_path / ".filemem" / "cache" / verifycheck.NAME).exists()
    # nothing to resume from now: the next run replays everything, and finds it again
    again = fm_json(store_path, "verify", "--json", code=1)
    assert again["resumedFrom"] is None and again["problems"] == report["problems"]


def test_a_checkpoint_that_is_no_ancestor_or_does_not_parse_means_a_full_replay(
        p: filemem.Provider, store_path: Path) -> None:
    p.add({**UG, "text": "one"}, ctx())
    p.add({**UG, "text": "two"}, ctx())
    assert history.verify(p.store).ok
    # history rewritten behind filemem's back: the proved commit is gone from HEAD's past
    git(store_path, "reset", "-q", "--hard", "HEAD~1")
    report = history.verify(p.store)
    assert report.resumed_from is None and report.ok and report.commits == 2
    for junk in (b"", b"{", b'{"format": 1}', b"[1, 2]", json.dumps(
            {**_checkpoint(store_path), "filemem": "0.0.0-other"}).encode()):
        (store_path / ".filemem" / "cache" / verifycheck.NAME).write_bytes(junk)
        again = history.verify(p.store)
        assert again.resumed_from is None and again.ok and again.commits == 2


def test_a_merge_of_a_line_forked_before_the_checkpoint_is_replayed_from_the_start(
        p: filemem.Provider, store_path: Path) -> None:
    p.add({**UG, "text": "base"}, ctx())
    fork = head(store_path)
    p.add({**UG, "text": "mine"}, ctx())
    assert history.verify(p.store).ok
    # another line from the fork point (a clone's main: filemem writes only on main),
    # merged in with git
    other = store_path.parent / "other"
    git(store_path.parent, "clone", "-q", str(store_path), str(other))
    git(other, "reset", "-q", "--hard", fork)
    side = filemem.open_store(other, write_policy="auto", budgets=BIG)
    side.add({**UG, "text": "theirs"}, ctx())
    side.close()
    git(store_path, "fetch", "-q", str(other), "main:side")
    git(store_path, "merge", "-q", "--no-edit", "side")
    assert_clean_repo(store_path)
    report = history.verify(p.store)
    assert report.resumed_from is None  # the side line must be replayed from its fork
    assert report.ok and report.merges == 1 and report.entries == 3
    assert verify_json(store_path)["resumedFrom"] == head(store_path)


def test_an_outside_removal_brought_back_before_the_checkpoint_stays_settled(
        p: filemem.Provider, store_path: Path) -> None:
    """A person's `git rm` of an audited entry that a later revert brought back is no
    problem, and stays none once filemem removes the entry (an audited removal), whether
    verify resumes from a checkpoint made in between or replays it all; a new removal
    outside filemem after the checkpoint is one."""
    e = p.add({**UG, "text": "keep me"}, ctx())["entry"]
    path = rel(store_path, file_of(store_path, e["id"]))
    git(store_path, "rm", "-q", path)
    git(store_path, "commit", "-q", "-m", "tidy up")
    git(store_path, "revert", "--no-edit", "HEAD")
    assert verify_json(store_path)["ok"]
    assert _checkpoint(store_path)["removals"] == []  # settled: nothing to carry on
    p.remove({**UG, "match": "keep me"}, ctx())
    report = verify_json(store_path)  # the resumed run and --full agree
    assert report["resumedFrom"] is not None and report["problems"] == []
    again = p.add({**UG, "text": "and me"}, ctx())["entry"]
    git(store_path, "rm", "-q", rel(store_path, file_of(store_path, again["id"])))
    git(store_path, "commit", "-q", "-m", "tidy up again")
    report = verify_json(store_path, expect_exit=1)
    assert report["resumedFrom"] is not None
    [problem] = report["problems"]
    assert problem["commit"] == head(store_path)
    assert "made outside filemem, removes 1" in problem["problem"]


def test_a_long_history_verifies_once_then_resumes(p: filemem.Provider,
                                                   store_path: Path) -> None:
    total = fast_history(store_path, entries=50, replaces=1950) + 1
    report = history.verify(p.store)
    assert report.ok and report.commits == total and report.resumed_from is None
    proved = head(store_path)
    fast_history(store_path, entries=5, replaces=45)
    seen: list[tuple[int, int]] = []
    report = history.verify(p.store, lambda done, of: seen.append((done, of)))
    assert report.ok and report.commits == total + 50 and report.resumed_from == proved
    assert seen[-1] == (50, 50) and len(seen) == 50  # only the new commits were replayed
    full = history.verify(p.store, full=True)
    assert (full.commits, full.rows, full.entries) == (report.commits, report.rows,
                                                       report.entries)


# ---------------------------------------------------------------- log --entry: the index


def _log(store: Path, entry_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(ok("log", "--json", "--entry", entry_id,
                                                store=store))
    return items


def test_log_entry_uses_an_index_that_follows_new_commits_and_survives_damage(
        p: filemem.Provider, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = p.add({**UG, "text": "alpha v1"}, ctx())["entry"]
    b = p.add({**UG, "text": "beta v1"}, ctx())["entry"]
    p.replace({**UG, "match": "alpha v1", "text": "alpha v2"}, ctx())
    index = store_path / ".filemem" / "cache" / logindex.NAME
    first = _log(store_path, a["id"][:8])
    assert [i["version"] for i in first] == [2, 1] and index.exists()
    lines = index.read_bytes().splitlines()
    assert lines[0] == logindex.HEADER.rstrip() and len(lines) == 1 + 4  # init + 3 writes
    p.replace({**UG, "match": "alpha v2", "text": "alpha v3"}, ctx())
    assert [i["version"] for i in _log(store_path, a["id"])] == [3, 2, 1]
    assert len(index.read_bytes().splitlines()) == 1 + 5  # extended, not rebuilt
    expected = _log(store_path, a["id"])
    whole = index.read_bytes()
    rows = [line.split(b" ") for line in whole.splitlines()[1:]]
    shifted = [b" ".join(r) for r in rows]
    shifted[1] = b" ".join(rows[1][:3])  # a field gone from one line, one more in the next
    shifted[2] = b" ".join([*rows[2], rows[1][3]])
    for damage in (b"", b"garbage\n", whole[:-20], logindex.HEADER + b"\n",
                   logindex.HEADER + b"%s 1 - -\n" % head(store_path).encode(),
                   logindex.HEADER + b"\n".join(shifted) + b"\n",
                   whole.replace(b" %s " % rows[0][1], b" 12x4 ", 1),
                   whole.replace(b" %s " % rows[0][1], b"  ", 1),
                   whole.replace(rows[0][3], "\u00e9".encode(), 1)):
        # torn, foreign, edited, or lacking the rest of the history
        index.write_bytes(damage)
        assert _log(store_path, a["id"]) == expected
        assert [i["entryId"] for i in _log(store_path, b["id"])] == [b["id"]]
    # the same answer as a walk of the whole history (no index at all) ...
    index.unlink()
    owner_items = logview.log(p.store, a["id"])
    assert [i["commit"] for i in owner_items] == [i["commit"] for i in expected]
    assert [i["version"] for i in owner_items] == [3, 2, 1]
    # ... and without the git CLI (each commit's changed files diffed in Python)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert logview.log(p.store, a["id"]) == owner_items


def test_the_log_index_names_the_entries_a_commit_made_with_git_changed(
        p: filemem.Provider, store_path: Path) -> None:
    a = p.add({**UG, "text": "alpha v1"}, ctx())["entry"]
    b = p.add({**UG, "text": "beta v1"}, ctx())["entry"]
    set_text(file_of(store_path, a["id"]), "alpha by hand")
    git(store_path, "commit", "-qam", "by hand")
    assert [i["action"] for i in _log(store_path, a["id"])] == ["external-commit", "add"]
    assert [i["action"] for i in _log(store_path, b["id"])] == ["add"]
    index = store_path / ".filemem" / "cache" / logindex.NAME
    line = next(ln for ln in index.read_bytes().splitlines() if ln.startswith(
        head(store_path).encode()))
    assert line.endswith(b" " + a["id"].encode())
    # an index written before commits made with git named entries: rebuilt, not trusted
    older = b"filemem-log-index 1\n" + index.read_bytes()[len(logindex.HEADER):].replace(
        line, line.rsplit(b" ", 1)[0] + b" -")
    index.write_bytes(older)
    assert [i["action"] for i in _log(store_path, a["id"])] == ["external-commit", "add"]
    assert index.read_bytes().startswith(logindex.HEADER)


def test_the_log_index_picks_commits_by_id_prefix_and_those_it_could_not_hold() -> None:
    a, b, c, d = (x * 40 for x in "abcd")
    known = {a: ("1", "-", "abc1,def2"), b: ("2", a, logindex.ANY), c: ("3", b, "-"),
             d: ("4", f"{b},{c}", f"x9,{logindex.ANY}")}
    assert logindex.about(known, "def") == {a, b, d}
    assert logindex.about(known, "abc1") == {a, b, d}
    assert logindex.about(known, "zz") == {b, d}
    assert [logindex.time_and_parents(known, sha) for sha in (a, d)] == [(1, ()), (4, (b, c))]
    assert list(logindex.newest_first(known, d)) == [d, c, b, a]


def test_log_entry_with_an_ambiguous_prefix_and_a_commit_with_odd_trailers(
        p: filemem.Provider, store_path: Path) -> None:
    ids = [p.add({**UG, "text": f"fact {i}"}, ctx())["entry"]["id"] for i in range(20)]
    # two ids sharing a first character: that one character is ambiguous
    firsts = [i[0] for i in ids]
    shared = next(c for c in firsts if firsts.count(c) > 1)
    out = subprocess.run([sys.executable, "-m", "filemem", "log", "--entry", shared, "--json",
                          "--store", str(store_path)], capture_output=True, text=True)
    assert out.returncode != 0 and "ambiguous" in out.stdout + out.stderr
    # a commit whose trailers name an "entry" the index cannot hold in one word
    msg = ("note\n\nAudit-Seq: 99999999999999999\nAudit-Ts: 1\nAudit-Action: edit-denied\n"
           'Audit-Entry: "odd id, with spaces"\n')
    person_commits(store_path, msg)
    items = _log(store_path, "odd id")
    assert [i["entryId"] for i in items] == ["odd id, with spaces"]
    assert [i["entryId"] for i in _log(store_path, ids[0])] == [ids[0]]


# ---------------------------------------------------------------- packing


def _loose(store: Path) -> int:
    objects = store / ".git" / "objects"
    return sum(len(os.listdir(objects / d)) for d in os.listdir(objects) if len(d) == 2)


def test_each_writes_pack_is_merged_and_the_packs_stay_few(
        p: filemem.Provider, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write adds one small pack (no loose objects); small packs are merged in-process
    and `git repack --geometric` rolls up what the merges leave: the packs stay few."""
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    monkeypatch.setattr(packwrite, "MERGE_AT", 4)
    monkeypatch.setattr("filemem.store.packschedule.MERGE_CHECK_EVERY", 1)
    monkeypatch.setattr(packwrite, "SMALL_PACK", 4000)  # a merged pack soon counts as big
    monkeypatch.setattr(packing, "WHEN_PACKS", 6)
    monkeypatch.setattr("filemem.store.packschedule.PACK_CHECK_EVERY", 1)
    git_dir = str(store_path / ".git")
    counts, merged = [], 0
    for i in range(60):
        before = packing.pack_count(git_dir)
        p.add({**UG, "text": f"fact {i}"}, ctx())
        counts.append(packing.pack_count(git_dir))
        merged += counts[-1] <= before
        assert _loose(store_path) == 0
    assert max(counts) <= 6 and merged >= 10
    assert_clean_repo(store_path)
    assert history.verify(p.store).ok
    assert len(p.list_entries()) == 60


def test_one_write_per_process_still_merges_small_packs(
        store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CLI command writes once and exits: each open store checks on its first commit."""
    monkeypatch.setattr(packwrite, "MERGE_AT", 4)
    git_dir = str(store_path / ".git")
    counts = []
    for i in range(12):
        with filemem.open_store(store_path, create=True, write_policy="auto",
                                budgets=BIG) as p:
            p.add({**UG, "text": f"fact {i}"}, ctx())
        counts.append(len(packwrite.small_packs(git_dir)))
    assert max(counts) <= 4 and min(counts[3:]) < 4, counts
    assert_clean_repo(store_path)


def test_a_merge_that_fails_leaves_the_write_standing(
        p: filemem.Provider, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Merging small packs is housekeeping after the commit: a damaged small pack (or a
    full disk) there is a warning, and the write stands."""
    monkeypatch.setattr(packwrite, "MERGE_AT", 2)
    monkeypatch.setattr("filemem.store.packschedule.MERGE_CHECK_EVERY", 1)

    def damaged(git_dir: str) -> int:
        raise ValueError("object 00 in pack-00 is damaged")

    monkeypatch.setattr(packwrite, "merge_small", damaged)
    for i in range(3):
        p.add({**UG, "text": f"fact {i}"}, ctx())
    assert sorted(e["text"] for e in p.list_entries()) == ["fact 0", "fact 1", "fact 2"]
    assert_clean_repo(store_path)


def test_loose_objects_are_packed_on_a_geometric_schedule(p: filemem.Provider,
                                                          store_path: Path) -> None:
    """Loose objects (a replay after a restart writes them loose; so does git) go into a
    pack once enough are there."""
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    p.add({**UG, "text": "fact"}, ctx())
    subprocess.run(["git", "-C", str(store_path), "hash-object", "-w", "--stdin"],
                   input="a loose object\n", text=True, check=True, capture_output=True)
    assert _loose(store_path) == 1
    assert packing.pack(p.store.git) >= 1
    assert _loose(store_path) == 0
    assert_clean_repo(store_path)
    assert p.list_entries()[0]["text"] == "fact"


def test_what_a_killed_repack_left_is_removed_by_the_next_once_stale(
        p: filemem.Provider, store_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    p.add({**UG, "text": "fact"}, ctx())
    pack_dir = store_path / ".git" / "objects" / "pack"
    pack_dir.mkdir(exist_ok=True)
    left = [pack_dir / ".tmp-4242-pack-0123abcd.pack", pack_dir / ".tmp-4242-pack-0123abcd.idx",
            pack_dir / "tmp_pack_Ab12Cd", pack_dir / "tmp_idx_Ab12Cd"]
    fresh = pack_dir / ".tmp-4343-pack-feed.pack"
    for path in [*left, fresh]:
        path.write_bytes(b"half a pack")
    old = time.time() - 2 * packing.STALE_TEMP
    for path in left:
        os.utime(path, (old, old))
    git_repo = p.store.git
    assert packing.pack(git_repo) >= 1
    assert not any(path.exists() for path in left)
    assert fresh.exists()  # maybe a person's `git gc` running right now
    fresh.unlink()
    assert_clean_repo(store_path)
    assert p.list_entries()[0]["text"] == "fact"


def test_without_the_git_cli_dulwich_packs_and_folds_packs(
        p: filemem.Provider, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    monkeypatch.setattr(packing, "DULWICH_MAX_PACKS", 3)
    git_dir = str(store_path / ".git")
    for i in range(5):
        p.add({**UG, "text": f"fact {i}"}, ctx())
        packing.pack(p.store.git)
        assert packing.pack_count(git_dir) < 3
        assert _loose(store_path) == 0
    for name in os.listdir(os.path.join(git_dir, "objects", "pack")):
        assert os.stat(os.path.join(git_dir, "objects", "pack", name)).st_mode & 0o077 == 0
    assert history.verify(p.store).ok
    assert len(p.list_entries()) == 5


# ---------------------------------------------------------------- the benchmark script


def test_the_long_history_benchmark_runs_and_prints_each_figure(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    out_json = tmp_path / "figures.json"
    env = {**os.environ, "BENCH_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "long_history.py"),
                           "--commits", "300", "--short", "20", "--entries", "20",
                           "--sync-commits", "30", "--writes", "3", "--json", str(out_json)],
                          capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    for label in ("add", "replace", "verify (first run)", "verify (checkpoint)",
                  "verify --full", "log --entry", "sync of 30 commits", ".git"):
        assert any(line.startswith(label) for line in done.stdout.splitlines()), label
    figures = json.loads(out_json.read_text())
    assert figures["verify_ok"] and figures["verify_after_sync_ok"]
    assert figures["packs"] >= 1 and figures["git_mb"] > 0
    assert figures["log_entry_rows"] >= 1


# ---------------------------------------------------------------- sync: the fetch


def test_a_local_remote_is_fetched_by_the_git_cli_or_else_by_dulwich(
        machines: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    m = machines
    calls: list[str | None] = []
    real = gitfetch.fetch_local

    def spy(*args: Any, **kwargs: Any) -> str | None:
        got = real(*args, **kwargs)
        calls.append(got)
        return got

    monkeypatch.setattr(gitfetch, "fetch_local", spy)
    for i in range(3):
        m.a.add({**UG, "text": f"from A {i}"}, ctx())
    fsync.sync(m.a.store)
    result = fsync.sync(m.b.store)
    theirs = git(m.remote, "rev-parse", "main").strip()
    assert calls[-1] == theirs == head(m.b_path)  # git fetched it
    assert result.steps[0]["kind"] == "fast-forward"
    assert git(m.b_path, "rev-parse", "origin/main").strip() == theirs
    assert not (m.b_path / ".git" / "FETCH_HEAD").exists()
    for pack in (m.b_path / ".git" / "objects" / "pack").iterdir():
        assert pack.stat().st_mode & 0o077 == 0  # private, as dulwich's are made
    # no git CLI: dulwich fetches, with the same outcome
    m.a.add({**UG, "text": "from A again"}, ctx())
    fsync.sync(m.a.store)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    fsync.sync(m.b.store)
    assert calls[-1] is None and head(m.b_path) == git(m.remote, "rev-parse", "main").strip()
    assert "from A again" in {e["text"] for e in m.b.list_entries()}
    assert history.verify(m.b.store).ok


def test_the_git_cli_fetch_leaves_a_remote_without_main_to_dulwich(
        p: filemem.Provider, store_path: Path, tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    empty = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", str(empty))
    assert gitfetch.fetch_local(p.store.git, str(empty), "refs/heads/main",
                                "refs/remotes/origin/main") is None
    assert gitfetch.fetch_local(p.store.git, str(tmp_path / "nothing-here"),
                                "refs/heads/main", "refs/remotes/origin/main") is None


# ---------------------------------------------------------------- sync: the push


def test_a_local_remote_is_pushed_to_by_the_git_cli_or_else_by_dulwich(
        machines: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    m = machines
    calls: list[gitpush.Pushed | None] = []
    real = gitpush.push_local

    def spy(*args: Any, **kwargs: Any) -> gitpush.Pushed | None:
        got = real(*args, **kwargs)
        calls.append(got)
        return got

    monkeypatch.setattr(gitpush, "push_local", spy)
    before = git(m.remote, "rev-parse", "main").strip()
    m.a.seed([{**UG, "text": f"seeded {i}"} for i in range(150)], ctx())  # a pack's worth
    m.a.add({**UG, "text": "then one more"}, ctx())
    result = fsync.sync(m.a.store)
    assert [s["kind"] for s in result.steps] == ["push"]
    assert calls == [gitpush.Pushed(moved=False, refused=None)]  # git pushed it
    assert git(m.remote, "rev-parse", "main").strip() == head(m.a_path) != before
    assert git(m.a_path, "rev-parse", "origin/main").strip() == head(m.a_path)
    assert git(m.a_path, "for-each-ref", "--format=%(refname)").split() == [
        "refs/heads/main", "refs/remotes/origin/main"]  # git added no ref of its own
    git(m.remote, "fsck", "--strict")
    assert list((m.remote / "objects" / "pack").glob("*.pack"))
    # no git CLI: dulwich pushes, with the same outcome
    m.a.add({**UG, "text": "pushed by dulwich"}, ctx())
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    fsync.sync(m.a.store)
    assert calls[-1] is None
    assert git(m.remote, "rev-parse", "main").strip() == head(m.a_path)
    fsync.sync(m.b.store)
    assert "pushed by dulwich" in {e["text"] for e in m.b.list_entries()}
    assert history.verify(m.b.store).ok


def test_the_git_cli_push_is_a_compare_and_swap_and_leaves_what_it_cannot_do_to_dulwich(
        machines: Any, tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    m = machines
    remote, ref = str(m.remote), "refs/heads/main"
    old = git(m.remote, "rev-parse", "main").strip()
    m.a.add({**UG, "text": "one"}, ctx())
    new = head(m.a_path)
    root = str(m.a_path)
    # the branch is not where this push expects it: nothing moves
    assert gitpush.push_local(root, remote, ref, "1" * 40, new) == gitpush.Pushed(True, None)
    assert gitpush.push_local(root, remote, ref, None, new) == gitpush.Pushed(True, None)
    assert git(m.remote, "rev-parse", "main").strip() == old
    # the remote's own hook refuses: its reason, nothing moved
    hook = m.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho no pushes today >&2\nexit 1\n")
    hook.chmod(0o755)
    assert gitpush.push_local(root, remote, ref, old, new) == \
        gitpush.Pushed(False, "pre-receive hook declined (it said: no pushes today)")
    hook.unlink()
    # a ref lock held there (another push right now): dulwich's to report
    lock = m.remote / "refs" / "heads" / "main.lock"
    lock.write_text(old + "\n")
    assert gitpush.push_local(root, remote, ref, old, new) is None
    lock.unlink()
    # not a repository, or a relative path: dulwich's too
    assert gitpush.push_local(root, str(tmp_path / "nothing-here"), ref, old, new) is None
    assert gitpush.push_local(root, "remote.git", ref, old, new) is None
    assert git(m.remote, "rev-parse", "main").strip() == old
    assert gitpush.push_local(root, remote, ref, old, new) == gitpush.Pushed(False, None)
    assert git(m.remote, "rev-parse", "main").strip() == new


def test_a_watched_sync_shows_gits_progress_lines_and_nothing_else_git_says(
        machines: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With someone watching (a ``progress`` callback: `filemem sync` on a terminal), the
    git CLI's push and fetch hand over their progress lines as git writes them, as dulwich's
    transfers do, once the transfer has run for ``gitcli.PROGRESS_AFTER`` seconds (0 here;
    a transfer done before then shows none); git's other words (its "To <path>", hints,
    errors) are not shown, filemem says what happened."""
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    from filemem.files import gitcli
    from filemem.owner.remotes import SyncError

    m = machines
    monkeypatch.setattr(gitcli, "PROGRESS_AFTER", 3600.0)  # done long before: nothing shown
    m.a.add({**UG, "text": "quick"}, ctx())
    quiet: list[bytes] = []
    assert [s["kind"] for s in fsync.sync(m.a.store, progress=quiet.append).steps] == ["push"]
    assert fsync.sync(m.b.store, progress=quiet.append).steps[0]["kind"] == "fast-forward"
    assert quiet == []
    monkeypatch.setattr(gitcli, "PROGRESS_AFTER", 0.0)

    def each_progress(shown: list[bytes]) -> bytes:
        assert shown
        for line in shown:
            assert line.endswith((b"\r", b"\n")) and gitcli._PROGRESS_LINE.match(line), line
        return b"".join(shown)

    m.a.seed([{**UG, "text": f"seeded {i}"} for i in range(150)], ctx())
    pushed: list[bytes] = []
    assert [s["kind"] for s in fsync.sync(m.a.store, progress=pushed.append).steps] == ["push"]
    assert b"Writing objects: 100% (" in each_progress(pushed)
    fetched: list[bytes] = []
    assert fsync.sync(m.b.store, progress=fetched.append).steps[0]["kind"] == "fast-forward"
    assert b"Receiving objects: 100% (" in each_progress(fetched)
    assert head(m.b_path) == head(m.a_path)
    # refused by the remote's hook while watched: its reason in filemem's error, and of
    # git's lines only the progress
    hook = m.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho no pushes today >&2\nexit 1\n")
    hook.chmod(0o755)
    m.a.add({**UG, "text": "refused"}, ctx())
    refused: list[bytes] = []
    with pytest.raises(SyncError) as info:
        fsync.sync(m.a.store, progress=refused.append)
    assert info.value.code == "PUSH_REJECTED" and "no pushes today" in info.value.message
    said = each_progress(refused)
    assert b"hint" not in said and b"error" not in said and b"no pushes today" not in said
