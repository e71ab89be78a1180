"""The rewritten history of a redaction, built as new objects beside the old ones.

Every commit reachable from any ref is visited parents first; its tree is rewritten with
the needles out of every file (an entry file through its codec, so its front matter stays
as it was; any other file as bytes), and its message through :func:`redaction.redact_message`.
A commit whose tree, parents and message come out the same keeps its sha; the others get
new objects, written to the object store by the caller before any ref moves. Trees, blobs
and commits are memoised by sha, so a long history costs what changed, not its length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from filemem import config as config_mod
from filemem.files import codec
from filemem.files.codec import CodecError
from filemem.files.gitrepo import TREE_MODE, GitRepo, PendingObjects, serialize_tree
from filemem.files.layout import id_from_path, is_entry_path
from filemem.owner.redaction import Needles, redact_message, refused
from filemem.store.names import CONFIG_FILE

PROGRESS_EVERY: Final = 1000  # commits rewritten between two reports of progress


@dataclass
class Rewrite:
    """What rewriting the history gives: the refs' new values, the new objects, counts."""

    refs: dict[str, tuple[str, str]] = field(default_factory=dict)  # ref -> (old, new)
    commits: dict[str, str] = field(default_factory=dict)  # old sha -> new sha (all seen)
    roots: list[str] = field(default_factory=list)  # rewritten commits with unchanged parents
    files: set[str] = field(default_factory=set)  # paths of files rewritten somewhere
    blobs: set[str] = field(default_factory=set)  # the old blobs that were rewritten
    pending: PendingObjects = field(default_factory=PendingObjects)

    @property
    def rewritten(self) -> int:
        return sum(1 for old, new in self.commits.items() if old != new)


class Rewriter:
    def __init__(self, git: GitRepo, needles: Needles) -> None:
        self.git = git
        self.needles = needles
        self.out = Rewrite()
        self._trees: dict[tuple[str, str], str] = {}
        self._blobs: dict[tuple[str, str], str] = {}

    # ------------------------------------------------------------ files

    def _kind(self, path: str) -> str:
        if is_entry_path(path):
            return "entry"
        return "config" if path == CONFIG_FILE else "file"

    def blob(self, sha: str, path: str) -> str:
        key = (sha, self._kind(path))
        done = self._blobs.get(key)
        if done is None:
            done = self._blobs[key] = self._blob(sha, path, key[1])
        if done != sha:
            self.out.files.add(path)
            self.out.blobs.add(sha)
        return done

    def _blob(self, sha: str, path: str, kind: str) -> str:
        needles = self.needles
        data = self.git.read_blob(sha, path)
        target = kind == "entry" and needles.entry_id is not None \
            and id_from_path(path) == needles.entry_id
        if not target and not needles.found_bytes(data):
            return sha
        new = data
        if kind == "entry":
            try:
                entry = codec.decode(data).entry
            except CodecError:
                entry = None
            if entry is not None:
                text = needles.entry_text(entry.text, entry.id)
                if text != entry.text:
                    new = codec.encode(entry.revised(text=text), data)
                if needles.found_bytes(new):
                    raise refused(f"the front matter of {path} (a key or value there)",
                                  "an entry's metadata is not a text that can be replaced")
        if new == data or needles.found_bytes(new):
            text_of = new.decode("utf-8", "surrogateescape")
            new = needles.free(text_of).encode("utf-8", "surrogateescape")
        if kind == "config" and new != data:
            problem = config_mod.problem(new)
            if problem is not None:
                raise refused(CONFIG_FILE, f"without it the file is not a valid "
                              f"configuration ({problem})")
        return sha if new == data else self.out.pending.add(b"blob", new)

    def tree(self, sha: str, prefix: str = "") -> str:
        key = (sha, prefix)
        done = self._trees.get(key)
        if done is not None:
            return done
        tree = dict(self.git.read_tree(sha, prefix.rstrip("/")))
        changed = False
        for name, (mode, child) in tree.items():
            path = f"{prefix}{name}"
            if self.needles.found(name):
                raise refused(f"the name of {path!r}", "file and folder names are what "
                              "the store is built of")
            new = self.tree(child, path + "/") if mode == TREE_MODE else \
                self.blob(child, path) if mode != 0o160000 else child
            if new != child:
                tree[name] = (mode, new)
                changed = True
        done = self.out.pending.add(b"tree", serialize_tree(tree)) if changed else sha
        self._trees[key] = done
        return done

    # ------------------------------------------------------------ commits

    def commit(self, sha: str) -> str:
        """The rewritten commit (parents must have been rewritten first)."""
        known = self.out.commits.get(sha)
        if known is not None:
            return known
        kind, raw = self.git.read_raw(sha, "commit")
        if kind != b"commit":
            raise refused(f"a ref naming a {kind.decode()} ({sha[:12]})",
                          "only commits can be rewritten")
        header, _, message = raw.partition(b"\n\n")
        lines: list[bytes] = []
        parents_same = True
        signature = False
        for line in header.split(b"\n"):
            if signature and line.startswith(b" "):
                continue  # a signature's continuation: it would not match the new commit
            signature = line.startswith((b"gpgsig", b"mergetag"))
            if signature:
                continue
            if line.startswith(b"tree "):
                line = b"tree " + self.tree(line[5:].decode()).encode()
            elif line.startswith(b"parent "):
                old = line[7:].decode()
                new = self.out.commits[old]
                parents_same = parents_same and new == old
                line = b"parent " + new.encode()
            elif self.needles.found_bytes(line, True):
                raise refused(f"the header of commit {sha[:12]} ({line.split(b' ')[0].decode()})",
                              "a commit's author and committer are not texts of the memory")
            lines.append(line)
        text = message.decode("utf-8", "surrogateescape")
        new_message = redact_message(text, self.needles).encode("utf-8", "surrogateescape")
        new_raw = b"\n".join(lines) + b"\n\n" + new_message
        new_sha = sha if new_raw == raw else self.out.pending.add(b"commit", new_raw)
        if new_sha != sha and parents_same:
            self.out.roots.append(sha)
        self.out.commits[sha] = new_sha
        return new_sha

    def run(self, refs: dict[str, str], progress: Callable[[int], None] | None = None
            ) -> Rewrite:
        """Rewrite everything ``refs`` reach (parents first, no recursion); ``progress``
        is told the commits done so far every :data:`PROGRESS_EVERY`."""
        for name, tip in sorted(refs.items()):
            stack: list[tuple[str, bool]] = [(tip, False)]
            while stack:
                sha, expanded = stack.pop()
                if sha in self.out.commits:
                    continue
                if expanded:
                    self.commit(sha)
                    if progress is not None and len(self.out.commits) % PROGRESS_EVERY == 0:
                        progress(len(self.out.commits))
                    continue
                stack.append((sha, True))
                stack.extend((p, False) for p in self.git.commit(sha).parents
                             if p not in self.out.commits)
            self.out.refs[name] = (tip, self.out.commits[tip])
        return self.out
