"""`python -m faillab.cli`: the same entry point as the installed `faillab` script."""

from faillab.cli.commands import run

run()
