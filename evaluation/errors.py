"""Errors that name where bad input is and why, shared by every door."""

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldProblem:
    """One problem with one field of an input (a file, a form, a request body)."""

    field: str
    reason: str
    file: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        prefix = f"{where}: " if where else ""
        return f"{prefix}{self.field}: {self.reason}" if self.field else f"{prefix}{self.reason}"


class InvalidInput(ValueError):
    """Raised with one or more FieldProblems; str() lists them all."""

    def __init__(self, problems: list[FieldProblem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))
