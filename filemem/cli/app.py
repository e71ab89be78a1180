"""The `filemem` command group; the commands live in the modules beside this one."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="filemem")
def main() -> None:
    """filemem: a memory store for coding agents, kept as Markdown files in git.

    Every change an agent makes is approved by you and recorded as one git commit.
    Start with `filemem init`, then `filemem add`, `filemem query`, `filemem snapshot`.
    """
