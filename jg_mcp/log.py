"""Logging: structlog to stderr, because stdout is the MCP stream in stdio mode.

Log values carry what the agent chose (its commands, paths, request ids, exception messages), so every key and
value of a structlog event and every stdlib record is made printable (jg_mcp.terminal) before it is rendered: an
escape sequence (a clipboard write, a window title, concealed text) or a bidirectional override is written out,
never sent to the reviewer's terminal. Tracebacks keep their line breaks and nothing else."""

import io
import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog
from structlog.typing import ExcInfo

from jg_mcp.terminal import lines, printable

MULTILINE = ("exception", "stack")
"""Keys whose values are rendered on lines of their own (tracebacks): each line is made printable."""


class _CurrentStderr:
    """Writes to whatever sys.stderr is now (test runners and daemons swap it), not the one at setup."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _value(key: str, value: object) -> object:
    if key == "exc_info":
        return value  # rendered by `_traceback`
    if key in MULTILINE and isinstance(value, str):
        return lines(value.split("\n"))
    if isinstance(value, str):
        return printable(value)
    shown = repr(value)
    return value if printable(shown) == shown else printable(shown)


def escape(_logger: object, _name: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: every key, and every value as the renderer would show it (a string as it is, any
    other value as its repr), made printable; a value whose repr is printable already is left for the renderer."""
    return {printable(str(key)): _value(key, value) for key, value in event_dict.items()}


def _traceback(sio: TextIO, exc_info: ExcInfo) -> None:
    """structlog's plain traceback, each of its lines made printable (an exception's message is often the
    agent's)."""
    out = io.StringIO()
    structlog.dev.plain_traceback(out, exc_info)
    sio.write(lines(out.getvalue().split("\n")))


class EscapingFormatter(logging.Formatter):
    """Stdlib records (the MCP SDK's, uvicorn's) made printable: the message on one line, tracebacks line by
    line."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return lines(super().formatException(ei).split("\n"))

    def formatStack(self, stack_info: str) -> str:
        return lines(super().formatStack(stack_info).split("\n"))


def configure(level: str = "INFO") -> None:
    """Send structlog and stdlib logging to stderr at `level`, escaped."""
    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(EscapingFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(handlers=[handler], level=level, force=True)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            escape,
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_traceback),
        ],
        # PrintLogger only print()s to its file (write and flush); its stub asks for a whole TextIO
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        cache_logger_on_first_use=False,
    )


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)
