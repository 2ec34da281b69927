"""The `faillab` command line: a thin face over the domain packages (see `commands`)."""

from faillab.cli.commands import main, run

__all__ = ["main", "run"]
