"""A hostile remote: trees whose paths leave the store, reach into ``.git`` or hold what a
store never holds. ``filemem sync`` (fast-forward and merge) and ``filemem clone`` must refuse
them before writing anything, with one clear REMOTE_INVALID naming the path.

git's porcelain refuses to make such trees, so they are built here with dulwich's objects
directly, on top of a real store published to a bare remote the normal way."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

import filemem
from filemem.files import layout
from filemem.files.treecheck import first_bad_path
from filemem.owner import remotes as fremotes
from filemem.owner import sync as fsync
from tests.conftest import ctx, git, run_cli

FILE, EXEC, LINK, TREE, GITLINK = 0o100644, 0o100755, 0o120000, 0o040000, 0o160000
ENTRY_ID = "0b7c3f6e-5d1a-4c2b-9e8f-1a2b3c4d5e6f"


@dataclass
class World:
    tmp: Path
    remote: Path
    store: Path
    marker: Path  # what the fsmonitor command would create


def _copy(tree: Tree) -> Tree:
    out = Tree()
    for item in tree.items():
        out.add(item.path, item.mode, item.sha)
    return out


def _insert(repo: Repo, tree: Tree | None, names: list[bytes], mode: int, data: bytes,
            gitlink: bytes) -> Tree:
    """``tree`` (or a new one) with ``names`` (raw tree entry names, one per level) added."""
    out = _copy(tree) if tree is not None else Tree()
    name = names[0]
    if len(names) == 1:
        if mode == GITLINK:
            sha = gitlink
        else:
            blob = Blob.from_string(data)
            repo.object_store.add_object(blob)
            sha = blob.id
        out.add(name, mode, sha)
    else:
        child: Tree | None = None
        if tree is not None and name in tree:
            child_mode, child_sha = tree[name]
            if child_mode == TREE:
                child = repo[child_sha]  # type: ignore[assignment]
        sub = _insert(repo, child, names[1:], mode, data, gitlink)
        out.add(name, TREE, sub.id)
    repo.object_store.add_object(out)
    return out


def push_hostile(remote: Path, shape: list[tuple[list[bytes], int, bytes]]) -> str:
    """A commit on top of the remote's main whose tree also holds ``shape``."""
    repo = Repo(str(remote))
    try:
        parent = repo.refs[b"refs/heads/main"]
        root: Tree = repo[repo[parent].tree]  # type: ignore[assignment,attr-defined]
        for names, mode, data in shape:
            root = _insert(repo, root, names, mode, data, parent)
        commit = Commit()
        commit.tree = root.id
        commit.parents = [parent]
        commit.author = commit.committer = b"Mallory <m@example.org>"
        commit.author_time = commit.commit_time = 1_700_000_000
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = b"innocent looking update\n"
        repo.object_store.add_object(commit)
        assert repo.refs.set_if_equals(b"refs/heads/main", parent, commit.id)
        return commit.id.decode()
    finally:
        repo.close()


@pytest.fixture
def world(tmp_path: Path) -> World:
    """A store with one entry, published to a bare remote with `filemem sync`."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    store = tmp_path / "A"
    p = filemem.open_store(store, create=True, write_policy="auto")
    try:
        p.add({"track": "user", "scope": "user-global", "text": "published"}, ctx())
        fremotes.add_remote(p.store, "origin", str(remote))
        fsync.sync(p.store)
    finally:
        p.close()
    return World(tmp_path, remote, store, tmp_path / "fsmonitor-ran")


def _hook(w: World) -> bytes:
    return f"[core]\n\tfsmonitor = touch {w.marker}\n".encode()


# (id, tree entries, a piece of the offending path the message must name,
#  files outside the store the shape aims at, relative to the tmp folder)
SHAPES: list[tuple[str, list[tuple[list[bytes], int, bytes]], str, list[str]]] = [
    ("dotdot-dir", [([b"..", b"outside", b"pwned.md"], FILE, b"pwned\n")], "..", ["outside"]),
    ("dot-dir", [([b".", b"dot.txt"], FILE, b"dot\n")], "'.'", []),
    ("dotgit-config", [([b".git", b"config"], FILE, b"HOOK")], ".git", []),
    ("DOTGIT-config", [([b".GIT", b"config"], FILE, b"HOOK")], ".GIT", []),
    ("dotgit-trailing-dot", [([b".git.", b"config"], FILE, b"HOOK")], ".git.", []),
    ("git-short-name", [([b"GIT~1", b"config"], FILE, b"HOOK")], "GIT~1", []),
    ("nested-dotgit", [([b"user", b".git", b"hooks", b"x"], FILE, b"#!/bin/sh\n")],
     "user/.git", []),
    ("deep-dotdot", [([b"user", b"user-global", b"_shared", b"..", b"..", b"..", b"..",
                       b"outside.md"], FILE, b"pwned\n")], "..", ["outside.md"]),
    ("slash-in-name", [([b"../slash-outside.txt"], FILE, b"pwned\n")], "slash-outside.txt",
     ["slash-outside.txt"]),
    # the tree is malformed: git's (and dulwich's) parser ends the name at the NUL
    ("nul-in-name", [([b"nul\0name.txt"], FILE, b"x\n")], "malformed", []),
    ("symlink", [([b"README.md"], LINK, b"/etc/passwd")], "README.md", []),
    ("submodule", [([b"vendor"], GITLINK, b"")], "vendor", []),
    ("executable", [([b"README.md"], EXEC, b"#!/bin/sh\necho hi\n")], "README.md", []),
    ("not-a-store-file", [([b"evil.sh"], FILE, b"#!/bin/sh\nrm -rf ~\n")], "evil.sh", []),
    ("not-an-entry-file", [([b"user", b"notes.txt"], FILE, b"notes\n")], "user/notes.txt", []),
    ("too-deep", [([b"user", b"x", b"y", b"z", b"w", b"v.md"], FILE, b"deep\n")],
     "'user/x'", []),  # the first folder a store does not have
    ("folder-for-a-file", [([b"README.md", b"x"], FILE, b"x\n")], "README.md", []),
]


def _shape(w: World, shape: list[tuple[list[bytes], int, bytes]]
           ) -> list[tuple[list[bytes], int, bytes]]:
    return [(names, mode, _hook(w) if data == b"HOOK" else data) for names, mode, data in shape]


def _snapshot(store: Path) -> dict[str, object]:
    files = sorted(str(p.relative_to(store)) for p in store.rglob("*")
                   if ".git" not in p.relative_to(store).parts[:1]
                   and ".filemem" not in p.relative_to(store).parts[:1])
    return {"head": git(store, "rev-parse", "HEAD").strip(), "files": files,
            "config": (store / ".git" / "config").read_bytes(),
            "index": (store / ".git" / "index").read_bytes()}


def _refused(out: object, needle: str) -> str:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)  # type: ignore[attr-defined]
    error = json.loads(out.stdout)["error"]  # type: ignore[attr-defined]
    assert error["code"] == "REMOTE_INVALID", error
    assert needle in error["message"], error
    assert "Traceback" not in out.stderr  # type: ignore[attr-defined]
    return str(error["message"])


def _nothing_outside(w: World, before: set[str], aimed: list[str]) -> None:
    assert {p.name for p in w.tmp.iterdir()} == before
    for target in aimed:
        assert not (w.tmp / target).exists()
    assert not w.marker.exists()


def _unchanged(w: World, before: dict[str, object]) -> None:
    assert _snapshot(w.store) == before
    assert git(w.store, "status", "--porcelain") == ""
    assert not w.marker.exists()  # `git status` ran no fsmonitor command
    git(w.store, "fsck")


@pytest.mark.parametrize("name,shape,needle,aimed", SHAPES, ids=[s[0] for s in SHAPES])
def test_a_hostile_tree_is_refused_by_sync_and_clone(
        world: World, name: str, shape: list[tuple[list[bytes], int, bytes]], needle: str,
        aimed: list[str]) -> None:
    w = world
    bad = push_hostile(w.remote, _shape(w, shape))
    outside = {p.name for p in w.tmp.iterdir()}

    # fast-forward: the store is exactly the hostile commit's parent
    before = _snapshot(w.store)
    message = _refused(run_cli("sync", "--json", store=w.store), needle)
    assert "nothing was changed" in message.lower()
    if name != "nul-in-name":  # that one is refused by the fetch, before there is a commit
        assert bad[:12] in message
    _unchanged(w, before)
    _nothing_outside(w, outside, aimed)

    # merge: a local commit first, so the histories diverged
    p = filemem.open_store(w.store, write_policy="auto")
    try:
        p.add({"track": "user", "scope": "user-global", "text": "local only"}, ctx())
    finally:
        p.close()
    before = _snapshot(w.store)
    _refused(run_cli("sync", "--json", store=w.store), needle)
    _unchanged(w, before)
    _nothing_outside(w, outside, aimed)

    # clone: nothing left behind, no would-be store, no temporary folder
    target = w.tmp / "C"
    _refused(run_cli("clone", "--json", str(w.remote), str(target)), needle)
    if target.exists():  # it must not; but if it does, git must run nothing in it
        git(target, "status", check=False)
    assert not w.marker.exists()
    assert not target.exists()
    _nothing_outside(w, outside, aimed)


def test_the_same_store_syncs_and_clones_when_the_remote_is_honest(world: World) -> None:
    """The validator lets every file a real store holds through."""
    w = world
    p = filemem.open_store(w.store, write_policy="auto")
    try:
        p.add({"track": "agent", "scope": "workspace", "text": "a workspace entry"},
              ctx(agent="claude-code"))
        fsync.sync(p.store)
    finally:
        p.close()
    out = run_cli("clone", "--json", str(w.remote), str(w.tmp / "C"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["entries"] == 2
    git(w.tmp / "C", "fsck")


# ---------------------------------------------------------------- the rules, one by one


@pytest.mark.parametrize("name", [
    "", ".", "..", ".git", ".GIT", ".Git", ".git.", ".git ", ".git. .", "git~1", "GIT~1",
    ".git\u200c", "\u200c.git", "\ufeff.GIT", ".gi\u200dt", "a/b", "a\\b", "a\0b", "x:y",
    ".git::$INDEX_ALLOCATION",
])
def test_unsafe_names(name: str) -> None:
    assert layout.name_problem(name) is not None


@pytest.mark.parametrize("name", [".gitignore", ".gitattributes", "git", "gitx", ".gitx",
                                  "_shared", "README.md", "...x"])
def test_safe_names(name: str) -> None:
    assert layout.name_problem(name) is None


@pytest.mark.parametrize("path", [
    "filemem.yaml", "README.md", ".gitignore", ".gitattributes",
    f"user/user-global/_shared/{ENTRY_ID}.md",
    f"agent/user-global/claude-code-0123456789/{ENTRY_ID}.md",
    f"agent/workspace/proj-0123456789/_shared/{ENTRY_ID}.md",
    f"user/workspace/_none/_shared/{ENTRY_ID}.md",
])
def test_store_paths(path: str) -> None:
    assert layout.check_tree_path(path, FILE) is None


@pytest.mark.parametrize("path,mode", [
    ("evil.sh", FILE), ("user/notes.txt", FILE), ("user/x/y/z/w/v.md", FILE),
    (f"user/user-global/{ENTRY_ID}.md", FILE), (f"other/user-global/_shared/{ENTRY_ID}.md", FILE),
    (f"user/global/_shared/{ENTRY_ID}.md", FILE),
    (f"user/user-global/_shared/x/{ENTRY_ID}.md", FILE),
    (f"user/workspace/_shared/{ENTRY_ID}.md", FILE),
    (f"user/user-global/Bad Dir/{ENTRY_ID}.md", FILE),
    ("user/user-global/_shared/not-a-uuid.md", FILE),
    ("README.md", LINK), ("README.md", EXEC), ("README.md", GITLINK), ("README.md", 0o100664),
    ("sub/README.md", FILE), ("../README.md", FILE), ("./README.md", FILE),
    ("/README.md", FILE), ("README.md/", FILE), (".git/config", FILE), (".filemem/x", FILE),
])
def test_not_store_paths(path: str, mode: int) -> None:
    assert layout.check_tree_path(path, mode) is not None


def test_the_top_files_are_the_template_s() -> None:
    from filemem.store.create import template_files
    from filemem.store.names import CONFIG_FILE

    assert CONFIG_FILE in layout.TOP_FILES
    assert all(layout.check_tree_path(p) is None for p in template_files())


def test_a_clone_never_takes_git_config_from_the_tree(world: World) -> None:
    """Even with the check bypassed, the working tree writer refuses .git paths."""
    from filemem.files import worktree

    for path in (".git/config", ".GIT/config", "user/.git/hooks/x", "../x", "a/./b", ""):
        with pytest.raises(ValueError):
            worktree.write(str(world.store), path, b"x")
    assert b"fsmonitor" not in (world.store / ".git" / "config").read_bytes()
    assert os.listdir(world.tmp)  # sanity


def _raw_tree(entries: list[tuple[bytes, bytes, str]]) -> bytes:
    return b"".join(mode + b" " + name + b"\0" + bytes.fromhex(sha) for name, mode, sha in entries)


def test_malformed_trees_are_refused_by_the_walker(world: World) -> None:
    """What a network remote could send that the local transport already refuses."""
    from filemem.files.gitrepo import GitRepo, PendingObjects

    repo = GitRepo(str(world.store))
    try:
        commit = repo.head()
        assert commit is not None
        readme = repo.blob_at(repo.commit(commit).tree, "README.md")
        assert readme is not None
        cases = {
            "twice": [(b"README.md", b"100644", readme), (b"README.md", b"100644", readme)],
            "zero-padded mode": [(b"README.md", b"0100644", readme)],
            "not utf-8": [(b"\xff.md", b"100644", readme)],
            "a commit as a file": [(b"README.md", b"100644", commit)],
            "missing": [(b"README.md", b"100644", "ab" * 20)],
            "name with slash": [(b"user/user-global/_shared/" + ENTRY_ID.encode() + b".md",
                                 b"100644", readme)],
        }
        for label, entries in cases.items():
            pending = PendingObjects()
            sha = pending.add(b"tree", _raw_tree(entries))
            repo.write(pending)
            assert first_bad_path(repo, sha, layout.check_tree_path) is not None, label
        pending = PendingObjects()
        sha = pending.add(b"tree", b"100644 README.md\0short")
        repo.write(pending)
        assert first_bad_path(repo, sha, layout.check_tree_path) == (
            "/", "an unreadable tree (a malformed tree object)")
        # the store's own tree passes, and an unchanged tree is not even read again
        tree = repo.commit(commit).tree
        assert first_bad_path(repo, tree, layout.check_tree_path) is None
        assert first_bad_path(repo, tree, lambda p, m: "no", known=tree) is None
    finally:
        repo.close()
