"""The git/file layer: plumbing that knows files and git, nothing of the protocol.

``atomic`` (replacing files: temp, fsync, rename; git's lock files), ``layout`` (where an
entry's file goes), ``codec`` (the entry file: front-matter and body, byte-exact),
``gitrepo`` (objects, trees, commits, refs), ``gitindex`` (git's index), ``worktree``
(working-tree files, the crash-repair journal).
"""
