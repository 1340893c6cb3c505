"""``python -m crabrec`` = the ``crabrec`` command."""

from crabrec.cli import main

main()
