"""Entry files meet the editors people use: vim, nano, VS Code (and emacs, macOS Finder).

An entry file ends with one newline that belongs to the file, not to the text
(schemas/entry-file.md), so `cat` and `git diff` see a proper text file, and a file an
editor saves comes back as exactly the text the person typed: with or without the editor's
final newline, LF or CRLF throughout. The swap, backup and temporary files editors leave
beside the file are neither entries nor hand edits: `filemem status`, `adopt` and
`discard` skip them, and the store's .gitignore lists them for git.

Each case says which editor behaviour it reproduces. vim and nano run for real when they
are installed (nano at a pseudo-terminal, driven by waiting for what it draws); VS Code is
not installable here, so its writes are reproduced byte for byte from its source
(``DiskFileSystemProvider.writeFile``: in place, or atomically through ``<name>.vsctmp``).
A store written by filemem before files had a final newline (tests/fixtures/legacy-store)
keeps its texts, verifies, shows no hand edit, and is not rewritten.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files import codec
from filemem.files.layout import EDITOR_FILES, is_editor_file
from tests.conftest import ROOT, assert_clean_repo, ctx, file_of, git, rel

UG = {"track": "user", "scope": "user-global"}
SHARED_UG = "user/user-global/_shared"
VIM = shutil.which("vim")
NANO = shutil.which("nano")
BUNDLE = Path(__file__).parent / "fixtures" / "legacy-store" / "store.bundle"
# the texts the legacy store's entries were written with (tests/fixtures/legacy-store/make.py)
LEGACY_TEXTS = ["Ends with a newline", "I write in vim", "Prefers concise answers, code first",
                "Tests run with make test", "Uses zsh, with oh-my-zsh"]


def fm(*args: str, store: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "filemem", *args, "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          cwd=str(cwd or store.parent),
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def ok(*args: str, store: Path) -> str:
    out = fm(*args, store=store)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout


def status(store: Path) -> dict[str, dict[str, Any]]:
    return {c["path"]: c for c in json.loads(ok("status", "--json", store=store))}


def texts(store: Path) -> list[str]:
    return sorted(e["text"] for e in json.loads(ok("list", "--json", store=store)))


@pytest.fixture
def p(make_provider: Callable[..., filemem.Provider]) -> filemem.Provider:
    return make_provider()


def add(p: filemem.Provider, text: str) -> Path:
    entry = p.add({**UG, "text": text}, ctx())["entry"]
    return file_of(Path(p.store.root), entry["id"])


def adopt_and_check(store: Path, expected: list[str], *, texts_hold_cr: bool = False) -> None:
    """Adopt everything; the texts are as typed, the files end in one newline (LF line ends,
    unless a text holds CRs of its own), git is clean."""
    ok("adopt", "--yes", store=store)
    assert texts(store) == sorted(expected)
    for path in git(store, "ls-files", "user", "agent").split():
        data = (store / path).read_bytes()
        assert data.endswith(b"\n") and not data.endswith(b"\r\n"), path
        assert texts_hold_cr or b"\r" not in data, path
    assert json.loads(ok("verify", "--json", store=store))["ok"] is True
    assert_clean_repo(store)
    assert status(store) == {}


# ---------------------------------------------------------------- the file's final newline


def test_a_written_file_ends_with_one_newline_that_is_not_the_text(
        p: filemem.Provider, store_path: Path) -> None:
    path = add(p, "Prefers concise answers")
    assert path.read_bytes().endswith(b"\n---\nPrefers concise answers\n")
    p.replace({**UG, "match": "concise", "text": "Prefers concise answers\n\n"}, ctx())
    assert path.read_bytes().endswith(b"\n---\nPrefers concise answers\n\n\n")
    assert texts(store_path) == ["Prefers concise answers\n\n"]  # the text's own newlines
    # git's own view: a text file, no "\ No newline at end of file" in any diff
    assert "No newline at end of file" not in git(store_path, "log", "-p")
    assert p.budgets()[0]["used"] == len("Prefers concise answers\n\n")
    assert_clean_repo(store_path)


# ---------------------------------------------------------------- vim


def run_vim(path: Path, *commands: str, options: str = "") -> None:
    """Real vim with its defaults, as a person's `vim file`, `A...<Esc>`, `:wq` runs.
    'backupskip' is emptied: its default skips the backup for files under /tmp, where the
    tests' stores are, and elsewhere vim writes 4913 and renames the file to file~."""
    assert VIM is not None
    args = [VIM, "-u", "DEFAULTS", "-i", "NONE", "-es", "--cmd", f"set backupskip= {options}"]
    for command in commands:
        args += ["-c", command]
    subprocess.run([*args, "-c", "wq", str(path)], check=True, cwd=path.parent,
                   stdin=subprocess.DEVNULL, timeout=60)


@pytest.mark.skipif(VIM is None, reason="vim is not installed")
@pytest.mark.parametrize("options", [
    "",  # vim's default: swap .x.md.swp, test file 4913, x.md renamed to x.md~, new x.md
    "backup",  # 'backup' on: x.md~ stays beside the file
    "backupcopy=yes",  # copy to x.md~, then x.md written in place
])
def test_real_vim_edit_is_adopted_as_typed(p: filemem.Provider, store_path: Path,
                                           options: str) -> None:
    path = add(p, "Prefers concise answers")
    run_vim(path, "normal A, code first", options=options)
    assert path.read_bytes().endswith(b"\n---\nPrefers concise answers, code first\n")
    if options == "backup":
        assert (path.parent / f"{path.name}~").exists()
    changes = status(store_path)
    assert list(changes) == [rel(store_path, path)]
    assert changes[rel(store_path, path)]["entry"]["text"] == "Prefers concise answers, code first"
    adopt_and_check(store_path, ["Prefers concise answers, code first"])


@pytest.mark.skipif(VIM is None, reason="vim is not installed")
def test_status_and_adopt_while_vim_has_the_file_open(p: filemem.Provider,
                                                      store_path: Path) -> None:
    """vim keeps .x.md.swp beside the file while it is open; `filemem` run from inside vim
    (`:!filemem adopt --yes`) sees the saved edit and skips the swap file."""
    path = add(p, "Prefers concise answers")
    out = store_path.parent / "seen.json"
    cli = f"{sys.executable} -m filemem %s --store {store_path}"
    run_vim(path, "normal A, code first", "w",
            f"silent !ls -a > {out}.ls; {cli % 'status --json'} > {out}; "
            f"{cli % 'adopt --yes'} > {out}.adopt 2>&1")
    assert f".{path.name}.swp" in Path(f"{out}.ls").read_text(encoding="utf-8").split()
    seen = json.loads(out.read_text(encoding="utf-8"))
    assert [c["path"] for c in seen] == [rel(store_path, path)], seen
    assert "Adopted 1" in Path(f"{out}.adopt").read_text(encoding="utf-8")
    assert texts(store_path) == ["Prefers concise answers, code first"]
    assert_clean_repo(store_path)


@pytest.mark.skipif(VIM is None, reason="vim is not installed")
def test_a_new_file_written_with_real_vim(p: filemem.Provider, store_path: Path) -> None:
    add(p, "Prefers concise answers")
    new = store_path / SHARED_UG / "rm-rule.md"
    run_vim(new, "normal iNever run `rm -rf` without asking first")
    assert new.read_bytes() == b"Never run `rm -rf` without asking first\n"
    adopt_and_check(store_path, ["Never run `rm -rf` without asking first",
                                 "Prefers concise answers"])


def test_vims_files_beside_an_entry_are_skipped(p: filemem.Provider, store_path: Path) -> None:
    """What vim leaves when it is killed or still open: its swap file (.x.md.swp, and
    .x.md.swo from a second vim), the 4913 it creates to test the folder, the x.md~ of
    'backup' and the .x.md.un~ of 'undofile'; and its save by rename (x.md renamed to
    x.md~, a new x.md written with the final newline, x.md~ removed)."""
    path = add(p, "Prefers concise answers")
    folder = path.parent
    for name in (f".{path.name}.swp", f".{path.name}.swo", "4913", f"{path.name}~",
                 f".{path.name}.un~"):
        (folder / name).write_bytes(b"b0VIM 9.0\0" + os.urandom(64))
    data = path.read_bytes().replace(b"concise answers", b"concise answers, code first")
    os.rename(path, folder / f"{path.name}.bak~")
    path.write_bytes(data)
    os.unlink(folder / f"{path.name}.bak~")
    assert list(status(store_path)) == [rel(store_path, path)]
    adopt_and_check(store_path, ["Prefers concise answers, code first"])
    assert "Nothing to discard" in ok("discard", "--yes", store=store_path)  # files stay
    assert (folder / "4913").exists() and (folder / f".{path.name}.swp").exists()
    assert git(store_path, "status", "--porcelain") == ""  # the store's .gitignore


# ---------------------------------------------------------------- nano


def drive_at_terminal(args: list[str], steps: list[tuple[bytes, bytes | Callable[[], None]]],
                      cwd: Path, timeout: float = 60) -> int:
    """Run a full-screen program at a pseudo-terminal (100x30): for each step, wait until
    the program has drawn ``wait_for``, then type the keys (or call the function)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                            env={**os.environ, "TERM": "xterm"}, close_fds=True,
                            start_new_session=True)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        for wait_for, then in steps:
            while wait_for not in seen:
                if time.monotonic() > deadline:
                    raise AssertionError(f"never drew {wait_for!r}; last: {seen[-300:]!r}")
                ready, _, _ = select.select([master], [], [], 1.0)
                if ready:
                    seen += os.read(master, 65536)
            seen = b""
            if callable(then):
                then()
            else:
                os.write(master, then)
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.mark.skipif(NANO is None, reason="nano is not installed")
@pytest.mark.parametrize("backup", [False, True])
def test_real_nano_edit_is_adopted_as_typed(p: filemem.Provider, store_path: Path,
                                            backup: bool) -> None:
    """nano writes in place and adds the final newline; with --locking it keeps .x.md.swp
    while the file is open, with --backup it leaves x.md~."""
    path = add(p, "Prefers concise answers")
    line = path.read_text(encoding="utf-8").split("\n").index("Prefers concise answers") + 1
    seen: dict[str, Any] = {}

    def while_open() -> None:
        seen["files"] = sorted(os.listdir(path.parent))
        seen["status"] = status(store_path)

    args = [str(NANO), "--ignorercfiles", "--locking", *(["--backup"] if backup else []),
            f"+{line},{len('Prefers concise answers') + 1}", path.name]
    code = drive_at_terminal(args, [(b"concise answers", b", code first"),
                                    (b"code first", b"\x13"),  # ^S: save
                                    (b"Wrote", while_open),
                                    (b"", b"\x18")], cwd=path.parent)  # ^X: exit
    assert code == 0
    assert f".{path.name}.swp" in seen["files"]
    assert list(seen["status"]) == [rel(store_path, path)]
    assert seen["status"][rel(store_path, path)]["entry"]["text"] == \
        "Prefers concise answers, code first"
    assert path.read_bytes().endswith(b"\n---\nPrefers concise answers, code first\n")
    assert (path.parent / f"{path.name}~").exists() == backup
    adopt_and_check(store_path, ["Prefers concise answers, code first"])


def test_nanos_emergency_save_is_skipped(p: filemem.Provider, store_path: Path) -> None:
    """nano killed by a hang-up writes the buffer to x.md.save (x.md.save.1 if that
    exists), beside the file it was editing."""
    path = add(p, "Prefers concise answers")
    for suffix in (".save", ".save.1"):
        (path.parent / f"{path.name}{suffix}").write_bytes(path.read_bytes() + b"unsaved\n")
    assert status(store_path) == {}
    assert git(store_path, "status", "--porcelain") == ""


# ---------------------------------------------------------------- VS Code (reproduced)


@pytest.mark.parametrize(("eol", "final_newline"), [
    (b"\n", False),  # VS Code's defaults on Linux and macOS: "files.insertFinalNewline" off
    (b"\n", True),  # "files.insertFinalNewline": true
    (b"\r\n", False),  # "files.eol": "\r\n" (the default on Windows): CRLF throughout
    (b"\r\n", True),
])
@pytest.mark.parametrize("atomic", [False, True])
def test_vscode_save_is_adopted_as_typed(p: filemem.Provider, store_path: Path,
                                         eol: bytes, final_newline: bool, atomic: bool) -> None:
    """VS Code writes the editor's lines joined by the file's EOL, a final one only with
    insertFinalNewline, either in place or atomically (``<name>.vsctmp``, renamed over)."""
    path = add(p, "Prefers concise answers")
    lines = path.read_bytes().decode("utf-8").split("\n")[:-1]  # the lines VS Code shows
    lines[-1] += ", code first"
    lines.append("and tests before code")
    data = eol.join(line.encode("utf-8") for line in lines) + (eol if final_newline else b"")
    if atomic:
        temp = path.parent / f"{path.name}.vsctmp"
        temp.write_bytes(data)
        assert status(store_path) == {}  # a save in progress (or a killed one) is not an edit
        os.replace(temp, path)
    else:
        with open(path, "r+b") as f:
            f.truncate(0)
            f.write(data)
    got = status(store_path)[rel(store_path, path)]
    assert got["adoptable"], got
    assert got["entry"]["text"] == "Prefers concise answers, code first\nand tests before code"
    adopt_and_check(store_path, ["Prefers concise answers, code first\nand tests before code"])


def test_a_cr_inside_a_text_is_kept_when_the_file_is_not_crlf_throughout(
        p: filemem.Provider, store_path: Path) -> None:
    """An agent's text with CRLF inside: filemem's file has LF front-matter, so its CRs are
    text, and an editor that keeps line ends as they are (vim shows them as ^M) saves it back
    unchanged."""
    path = add(p, "line one\r\nline two")
    assert path.read_bytes().endswith(b"\n---\nline one\r\nline two\n")
    assert texts(store_path) == ["line one\r\nline two"]
    if VIM is not None:
        run_vim(path, "normal GA, edited")
        assert path.read_bytes().endswith(b"\n---\nline one\r\nline two, edited\n")
        adopt_and_check(store_path, ["line one\r\nline two, edited"], texts_hold_cr=True)


# ---------------------------------------------------------------- other editors' files


def test_other_editors_files_are_skipped_and_real_entries_are_not(
        p: filemem.Provider, store_path: Path) -> None:
    """emacs: .#x.md (a lock: a symbolic link to user@host.pid), #x.md# (auto-save), x.md~;
    macOS: .DS_Store, ._x.md; GNOME: .goutputstream-XXXXXX; Kate: .x.md.kate-swp;
    JetBrains: x.md___jb_tmp___; Windows Explorer: Thumbs.db; any tool's x.md.tmp."""
    path = add(p, "Prefers concise answers")
    folder = path.parent
    os.symlink("ana@laptop.4242:1700000000", folder / f".#{path.name}")
    for name in (f"#{path.name}#", ".DS_Store", f"._{path.name}", ".goutputstream-5RZ4X2",
                 f".{path.name}.kate-swp", f"{path.name}___jb_tmp___", "Thumbs.db",
                 f"{path.name}.tmp"):
        (folder / name).write_bytes(b"\0\1 not an entry")
    # names a person might give an entry file are entries, however they look
    for name in ("tmp.md", "save.md", "4913.md", "notes~.md", ".hidden.md", "#1.md"):
        (folder / name).write_text(f"a note in {name}\n", encoding="utf-8")
        assert not is_editor_file(f"{SHARED_UG}/{name}")
    (folder / "notes.txt").write_text("not an entry either, but a person's\n", encoding="utf-8")
    changes = status(store_path)
    assert sorted(changes) == sorted(f"{SHARED_UG}/{n}" for n in (
        "tmp.md", "save.md", "4913.md", "notes~.md", ".hidden.md", "#1.md", "notes.txt"))
    assert "not an entry file" in changes[f"{SHARED_UG}/notes.txt"]["problem"]
    (folder / "notes.txt").unlink()
    adopt_and_check(store_path, ["Prefers concise answers",
                                 *(f"a note in {n}" for n in ("tmp.md", "save.md", "4913.md",
                                                              "notes~.md", ".hidden.md",
                                                              "#1.md"))])
    assert os.path.islink(folder / f".#{path.name}")  # never touched


def test_discard_leaves_editor_files_and_says_so(p: filemem.Provider, store_path: Path) -> None:
    path = add(p, "Prefers concise answers")
    swap = path.parent / f".{path.name}.swp"
    swap.write_bytes(b"b0VIM 9.0\0")
    (path.parent / "mine.md").write_text("a note\n", encoding="utf-8")
    out = json.loads(ok("discard", "--yes", "--json", store=store_path))
    assert [c["path"] for c in out] == [f"{SHARED_UG}/mine.md"]
    assert swap.exists()
    named = fm("discard", "--yes", str(swap), store=store_path)
    assert named.returncode == 1 and swap.exists()
    assert "editor's swap, backup or temporary file" in named.stderr
    assert "filemem leaves it alone" in named.stderr


def test_the_store_gitignore_lists_exactly_the_editor_files(tmp_path: Path) -> None:
    """One list (filemem.files.layout.EDITOR_FILES), and git itself ignores every example."""
    template = (ROOT / "store-template" / ".gitignore").read_text(encoding="utf-8")
    section = template.split("# editors' swap, backup and temporary files", 1)[1]
    assert section.split("\n")[1:-1] == list(EDITOR_FILES)
    store = tmp_path / "store"
    ok("init", str(store), store=store)
    examples = [".x.md.swp", ".x.md.swx", ".x.md.svz", "4913", "x.md~", ".#x.md", "#x.md#",
                "x.md.save", "x.md.save.1", "x.md.vsctmp", ".goutputstream-AB12CD",
                ".x.md.kate-swp", "x.md___jb_tmp___", "x.md___jb_old___", "x.md.tmp",
                ".DS_Store", "._x.md", "Thumbs.db"]
    paths = [f"{SHARED_UG}/{name}" for name in examples]
    for path in paths:
        (store / path).parent.mkdir(parents=True, exist_ok=True)
        (store / path).write_bytes(b"x")
        assert is_editor_file(path), path
    ignored = git(store, "check-ignore", "--no-index", *paths).split("\n")[:-1]
    assert ignored == paths
    entries = [f"{SHARED_UG}/{name}" for name in ("x.md", "tmp.md", "4913.md", ".x.md")]
    assert git(store, "check-ignore", "--no-index", *entries, check=False) == ""
    assert_clean_repo(store)


# ---------------------------------------------------------------- a store from before


@pytest.fixture
def legacy(tmp_path: Path) -> Iterator[Path]:
    """A clone of the store tests/fixtures/legacy-store/make.py made with filemem 5b0564d."""
    store = tmp_path / "legacy"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(store)], check=True)
    git(store, "reset", "-q", "--hard", "before-merge")
    yield store


def legacy_files(store: Path) -> dict[str, bytes]:
    return {path: (store / path).read_bytes()
            for path in git(store, "ls-files", "user", "agent").split()}


def test_a_store_from_before_final_newlines_reads_the_same(legacy: Path) -> None:
    files = legacy_files(legacy)
    # its files, as the old filemem wrote them: no final newline, except where the text
    # ended in one (an agent's text, a person's file, a vim edit adopted)
    assert sum(not data.endswith(b"\n") for data in files.values()) == 2
    assert texts(legacy) == LEGACY_TEXTS
    assert status(legacy) == {}
    report = json.loads(ok("verify", "--json", store=legacy))
    assert report["ok"] is True, report["problems"]
    assert legacy_files(legacy) == files  # nothing was rewritten
    assert_clean_repo(legacy)


def test_writing_to_a_store_from_before_changes_only_what_is_written(legacy: Path) -> None:
    files = legacy_files(legacy)
    ok("add", "--yes", "--scope", "user-global", "Likes tea", store=legacy)
    ok("replace", "--yes", "--scope", "user-global", "zsh", "Uses fish", store=legacy)
    changed = {p for p, data in legacy_files(legacy).items() if files.get(p) != data}
    assert len(changed) == 2  # the new entry and the replaced one: no rewrite storm
    for path in changed:
        assert (legacy / path).read_bytes().endswith(b"\n")
    assert texts(legacy) == sorted([*LEGACY_TEXTS[:-1], "Likes tea", "Uses fish"])
    assert json.loads(ok("verify", "--json", store=legacy))["ok"] is True
    assert_clean_repo(legacy)


def test_a_store_from_before_skips_editor_files_without_them_in_its_gitignore(
        legacy: Path) -> None:
    """Its .gitignore predates the list: filemem skips editor files by its own rule (git,
    going by that .gitignore, lists them as untracked)."""
    assert "4913" not in (legacy / ".gitignore").read_text(encoding="utf-8")
    entry = next(iter(legacy_files(legacy)))
    folder, name = (legacy / entry).parent, entry.rsplit("/", 1)[1]
    for editor_file in (f".{name}.swp", "4913", f"{name}~", f"#{name}#", f"{name}.save",
                        f"{name}.vsctmp", ".DS_Store", f"._{name}"):
        (folder / editor_file).write_bytes(b"\0 an editor's")
    os.symlink("ana@laptop.4242:1700000000", folder / f".#{name}")
    assert git(legacy, "status", "--porcelain", "--untracked-files=all").count("??") == 9
    data = (legacy / entry).read_bytes()
    (legacy / entry).write_bytes(data + b" (edited)\n")
    assert list(status(legacy)) == [entry]
    ok("adopt", "--yes", store=legacy)
    assert status(legacy) == {}
    ok("discard", "--yes", store=legacy)
    assert (folder / "4913").exists() and os.path.islink(folder / f".#{name}")
    assert git(legacy, "status", "--porcelain", "--untracked-files=all").count("??") == 9


def test_the_view_cache_takes_files_from_before(legacy: Path) -> None:
    ok("list", store=legacy)  # a cold start parses every file and saves the cache
    store = filemem.open_store(legacy)
    parsed: dict[str, Any] = {}
    try:
        assert store.store._cache.load(parsed) == len(LEGACY_TEXTS)  # type: ignore[attr-defined]
    finally:
        store.close()


def test_a_sync_merge_made_before_final_newlines_recomputes(legacy: Path) -> None:
    """The merge's fork was written without a final newline; recomputing the merge now
    writes it with one: the same entry, so the merge commit checks out, and verify of the
    whole history (the sync merge included) passes."""
    git(legacy, "reset", "-q", "--hard", "origin/main")
    assert git(legacy, "rev-list", "--count", "--merges", "HEAD").strip() == "1"
    fork = git(legacy, "diff", "--name-only", "HEAD~1", "HEAD").split()
    assert len(fork) == 1 and not (legacy / fork[0]).read_bytes().endswith(b"\n")
    report = json.loads(ok("verify", "--json", store=legacy))
    # the whole history verifies: the merge recomputes (the same entries, written anew
    # with a final newline) and each side of it replays on its own to what it holds
    assert report["ok"] is True, report["problems"]
    assert report["merges"] == 1 and report["externalCommits"] == []
    assert report["entriesAtHead"] == len(LEGACY_TEXTS) + 1


def test_codec_reads_old_files_and_editor_files() -> None:
    entry = codec.decode(codec.encode(filemem_entry("Prefers concise answers"))).entry
    new = codec.encode(entry)
    assert new.endswith(b"\nPrefers concise answers\n")
    assert codec.decode(new[:-1]).entry == entry  # as filemem wrote it before
    assert codec.encodings(entry) == (new, new[:-1])
    assert codec.decode(new.replace(b"\n", b"\r\n")).entry == entry  # CRLF throughout
    assert codec.decode(new.replace(b"\n", b"\r\n")[:-2]).entry == entry
    with_newline = entry.revised(text="Ends with a newline\n")
    assert codec.encodings(with_newline) == (codec.encode(with_newline),)
    # an old file whose text ended in a newline: read one newline shorter, and said so
    old = codec.encode(with_newline)[:-1]
    assert codec.decode(old).entry.text == "Ends with a newline"
    assert codec.legacy_text(old) == "Ends with a newline\n"
    assert codec.legacy_text(new[:-1]) is None


def filemem_entry(text: str) -> Any:
    from filemem.model import Entry

    return Entry(id="0f7c1b1e-4a5b-4c3d-9e8f-001122334455", track="user", scope="user-global",
                 workspace_key="", agent_key="", text=text, source="s", tags=(), version=1,
                 created_at=1, updated_at=1, session_id=None)
