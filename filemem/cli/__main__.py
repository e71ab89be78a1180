"""`python -m filemem.cli`: the filemem command."""

from filemem.cli import main

main()
