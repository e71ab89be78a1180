"""basic-memory's bulk load, in process: run by bench/versus_basic_memory.py with the Python
of basic-memory's own venv (it needs Python 3.12+ and is never a filemem dependency).

basic-memory keeps the Markdown files as the truth and indexes them into SQLite; bringing in
many notes at once means putting the files in the project folder and indexing them (what
`basic-memory reindex --search --project NAME` does, called here in process so that the
Python start-up is not counted). The project is first indexed empty, so the database and its
migrations are made before anything is timed (filemem's store is also made before its seed).

    python basic_memory_load.py N ROUND   # prints one JSON line: {"seconds": ..., "notes": ...}

The configuration comes from the environment the caller sets (BASIC_MEMORY_CONFIG_DIR,
BASIC_MEMORY_HOME: the project folder of the default project "main").
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import sys
import time


def note(i: int, tag: str) -> str:
    return (f"---\ntitle: {tag} {i:06d}\ntype: note\n---\n\n"
            f"{tag} {i:06d}: the build uses make; tests run with pytest -q; "
            f"deploys go through the staging cluster first (note {i})\n")


def reindex() -> None:
    from basic_memory.cli.commands.db import run_reindex_command
    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines, not ours
        run_reindex_command(embeddings=False, search=True, full=False, project="main")


def main() -> None:
    n, rnd = int(sys.argv[1]), int(sys.argv[2])
    from basic_memory.config import ConfigManager
    config = ConfigManager().config
    home = os.environ["BASIC_MEMORY_HOME"]
    folder = os.path.join(home, f"seed{rnd}")
    os.makedirs(home, exist_ok=True)
    reindex()  # the database, its migrations and the project row: not timed
    start = time.perf_counter()
    os.makedirs(folder)
    for i in range(n):
        with open(os.path.join(folder, f"seed{rnd}-{i:06d}.md"), "w", encoding="utf-8") as f:
            f.write(note(i, f"seed{rnd}"))
    wrote = time.perf_counter()
    reindex()
    done = time.perf_counter()
    with sqlite3.connect(config.database_path) as db:
        notes = db.execute("SELECT count(*) FROM entity WHERE file_path LIKE ?",
                           (f"seed{rnd}/%",)).fetchone()[0]
        found = db.execute("SELECT count(*) FROM search_index WHERE search_index MATCH ?",
                           (f'"seed{rnd}"',)).fetchone()[0] if notes else 0
    print(json.dumps({"seconds": done - start, "write_files": wrote - start,
                      "index": done - wrote, "notes": notes, "found": found}))


if __name__ == "__main__":
    main()
