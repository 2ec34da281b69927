"""Importers turn producer files into native trajectories; ``read_file`` picks the right one."""

from trajectories.importers.detect import FORMATS, ImportProblem, ParsedFile, read_file

__all__ = ["FORMATS", "ImportProblem", "ParsedFile", "read_file"]
