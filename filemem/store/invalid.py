"""What is invalid at HEAD, said the same way to every surface: STORE_CORRUPT naming the
file, why, the commit that brought it and the way out (:func:`filemem.errors.bad_file`).

The commit is looked for here and nowhere else (:func:`filemem.files.origin.introduced`),
only when such an error is reported, and remembered per HEAD and file: a long-running
server answering every call with the error walks history once."""

from __future__ import annotations

from typing import Final

from filemem import errors
from filemem.files import codec
from filemem.files.codec import CodecError
from filemem.files.gitrepo import CommitInfo, GitError, GitRepo
from filemem.files.layout import entry_path, is_entry_path
from filemem.files.origin import introduced
from filemem.store.names import CONFIG_FILE
from filemem.store.state import State

_REMEMBER: Final = 1024


class InvalidFiles:
    """The invalid files of a store's view of HEAD, as errors."""

    def __init__(self, root: str, git: GitRepo) -> None:
        self.root = root
        self.git = git
        self._found: dict[tuple[str, str, str | None], CommitInfo | None] = {}

    def paths(self, state: State) -> list[str]:
        """The invalid files at HEAD: ``filemem.yaml`` first, then entry folders' files in
        path order."""
        config = state.config_problem is not None and \
            state.config_problem.code == errors.STORE_CORRUPT
        return ([CONFIG_FILE] if config else []) + sorted(state.corrupt)

    def error(self, state: State, path: str, more: int = 0) -> errors.ProtocolError:
        """STORE_CORRUPT for the invalid file ``path`` of ``state`` (one of :meth:`paths`)."""
        if path == CONFIG_FILE and state.config_problem is not None:
            reason = str(state.config_problem.details.get("reason")
                         or state.config_problem.message)
            blob, fix = state.config_blob, "restore" if state.config_blob is None else "edit"
        else:
            reason = state.corrupt[path]
            blob, fix = state.blobs.get(path), "edit" if is_entry_path(path) else "remove"
            place = self._place(blob) if fix == "edit" and blob else None
            if place is not None and place != path:  # where it belongs holds it: a copy
                fix = f"copy:{place}" if place in state.blobs else f"move:{place}"
        key = (state.head, path, blob)
        if key not in self._found:
            if len(self._found) >= _REMEMBER:
                self._found.clear()
            self._found[key] = introduced(self.git, state.head, path)
        info = self._found[key]
        return errors.bad_file(
            self.root, path, reason, commit=info.sha if info else None,
            subject=info.message.split("\n", 1)[0] if info else None,
            parents=len(info.parents) if info else 1, fix=fix, more=more)

    def _place(self, blob: str) -> str | None:
        """Where the entry in ``blob`` belongs, if it is a valid entry file."""
        try:
            return entry_path(codec.decode(self.git.read_blob(blob)).entry)
        except (CodecError, GitError, KeyError):
            return None

    def problems(self, state: State) -> list[errors.ProtocolError]:
        """One error per invalid file at HEAD (for ``filemem status`` and ``verify``)."""
        return [self.error(state, p) for p in self.paths(state)]

    def first(self, state: State) -> errors.ProtocolError | None:
        """The error a read or write of ``state`` raises, if any: an unsupported schema
        version as it is, else the first invalid file's (saying how many more there are)."""
        if state.config_problem is not None and \
                state.config_problem.code != errors.STORE_CORRUPT:
            return state.config_problem
        found = self.paths(state)
        return self.error(state, found[0], len(found) - 1) if found else None


__all__ = ["InvalidFiles"]
