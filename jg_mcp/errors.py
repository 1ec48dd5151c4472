"""The project's errors: one base class and a few subclasses that carry data."""


class JgError(Exception):
    """Base class of every error jg-mcp raises on purpose."""


class GoalError(JgError):
    """A goal file is malformed: the message names the file and the field."""

    def __init__(self, path: object, field: str, problem: str):
        self.path = str(path)
        self.field = field
        self.problem = problem
        where = f" field '{field}'" if field else ""
        super().__init__(f"{self.path}:{where} {problem}")


class PathRefused(JgError):
    """A tool path points outside the workspace or at a protected file."""


class TranscriptError(JgError):
    """A transcript cannot be read or fails an integrity check."""

    def __init__(self, path: object, line: int, problem: str):
        self.path = str(path)
        self.line = line
        self.problem = problem
        super().__init__(f"{self.path}:{line}: {problem}")
