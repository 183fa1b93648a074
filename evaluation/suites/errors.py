"""The suite room's errors: a problem in a suite file, and what is kept but not used."""


class SuiteError(ValueError):
    """A problem in an EVAL.md file; str() is 'file:line: reason'."""

    def __init__(self, file: str, line: int | None, reason: str):
        self.file, self.line, self.reason = file, line, reason
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {reason}")


class SuiteWarning(UserWarning):
    """Something in an EVAL.md file that is kept but not used, such as an unknown frontmatter key."""
