"""Logging: structlog to stderr, because stdout is the MCP stream in stdio mode."""

import logging
import sys

import structlog


class _CurrentStderr:
    """Writes to whatever sys.stderr is now (test runners and daemons swap it), not the one at setup."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str = "INFO") -> None:
    """Send structlog and stdlib logging to stderr at `level`."""
    logging.basicConfig(stream=_CurrentStderr(), level=level, format="%(levelname)s %(name)s: %(message)s", force=True)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        # PrintLogger only print()s to its file (write and flush); its stub asks for a whole TextIO
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        cache_logger_on_first_use=False,
    )


def get(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)
