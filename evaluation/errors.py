"""Errors that name where bad input is and why, shared by every layer and mapped to one status per door."""

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


class PlainMessage(Exception):
    """Mixin for errors whose message is written for people: a failed run shows it without the type name."""


class InvalidInput(ValueError):
    """Raised with one or more FieldProblems; str() lists them all (HTTP 400)."""

    def __init__(self, problems: list[FieldProblem]):
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


class NotFound(Exception):
    """A named object does not exist (HTTP 404); the message names it."""


class Conflict(Exception):
    """The request is valid but the current state refuses it (HTTP 409); the message says why."""


class CapacityReached(Conflict):
    """Too many runs are active; the caller should try later."""


class RunBusy(Conflict):
    """The run is in a state that does not allow this (e.g. still running, already finished)."""
