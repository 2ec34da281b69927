"""What goes wrong in an import, said precisely enough to fix the file."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from faillab_core.errors import FaillabError


@dataclass(eq=False)  # not frozen: raising sets __traceback__ on the instance
class ImportProblem(FaillabError):
    """A problem in one file: which record (line or index) and which field, in one line."""

    path: str
    message: str
    location: str | None = None  # "line 12" for JSONL, "record 3" for a JSON list
    field: str | None = None

    def __str__(self) -> str:
        parts = [self.path]
        if self.location:
            parts.append(self.location)
        if self.field:
            parts.append(f"field '{self.field}'")
        return ": ".join(parts) + f": {self.message}"


@dataclass(eq=False)
class ImportProblems(ImportProblem):
    """The first problem of each of several files (a folder with more than one bad file): it
    reads as the first, and ``problems`` holds them all, one line each."""

    problems: tuple[ImportProblem, ...] = ()

    @classmethod
    def of(cls, problems: list[ImportProblem]) -> ImportProblem:
        """One problem as itself; several as one ``ImportProblems``."""
        if len(problems) == 1:
            return problems[0]
        first = problems[0]
        return cls(first.path, first.message, first.location, first.field, tuple(problems))

    def __str__(self) -> str:
        return (f"{super().__str__()} (and {len(self.problems) - 1} more files with "
                "problems)")


def describe_validation_error(err: ValidationError) -> tuple[str, str]:
    """The first failing field's dotted path and its message."""
    first = err.errors()[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or "(record)"
    return field, first.get("msg", "invalid")
