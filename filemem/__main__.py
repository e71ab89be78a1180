"""`python -m filemem`: the filemem command."""

from filemem.cli import main

main()
