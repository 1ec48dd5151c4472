"""The project's errors: one base class and a few subclasses that carry data.

The CLI maps them to exit codes (`exit_code`): `UsageError` 2 (the command was called wrongly: a missing goal,
workspace or file, a bad argument), `NoVerdict` 3 (an eval that could not reach a verdict), any other `JgError` 1
(a failure or a verdict).
"""


class JgError(Exception):
    """Base class of every error jg-mcp raises on purpose."""

    exit_code = 1


class UsageError(JgError):
    """The command was called wrongly: a goal, workspace or file that does not exist, a bad argument."""

    exit_code = 2


class NoVerdict(JgError):
    """An eval that ended without a verdict: the harness or the host failed (a full disk, a baseline that would not
    run), not the solution. Its own exit status (3), so that nothing reads it as a rejection (exit 1)."""

    exit_code = 3


class GoalError(JgError):
    """A goal file is malformed: the message names the file and the field."""

    def __init__(self, path: object, field: str, problem: str):
        self.path = str(path)
        self.field = field
        self.problem = problem
        where = f" field '{field}'" if field else ""
        super().__init__(f"{self.path}:{where} {problem}")


class GoalNotFound(GoalError, UsageError):
    """No goal file by that name or path: a usage error (exit 2), and a GoalError for code that catches those."""


class EvalReportError(JgError):
    """An eval report that cannot be read or is not one: the message names the file and the first problem."""

    def __init__(self, path: object, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class PathRefused(JgError):
    """A tool path points outside the workspace or at a protected file."""


class TranscriptError(JgError):
    """A transcript cannot be read or fails an integrity check."""

    def __init__(self, path: object, line: int, problem: str):
        self.path = str(path)
        self.line = line
        self.problem = problem
        super().__init__(f"{self.path}:{line}: {problem}")


class KeyFileRefused(TranscriptError, UsageError):
    """A transcript key file that cannot be read, is too short or is open to others: a usage error (exit 2),
    and a TranscriptError for code that catches those."""

    def __init__(self, path: object, problem: str):
        super().__init__(path, 0, problem)
        self.args = (f"{self.path}: {problem}",)
