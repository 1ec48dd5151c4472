"""Checks of command-line arguments, so a bad one is a usage error (exit 2), never a traceback: argparse types
for ports and numbers (argparse prints its usage and the error), and checks against the file system made
before any work starts (a UsageError: one line that names the argument)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from jg_mcp.errors import UsageError


def port(text: str) -> int:
    """An argparse type: a TCP port number (0 picks a free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 0..65535")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    return _whole(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    return _whole(text, 0)


def positive_float(text: str) -> float:
    """An argparse type: a number above 0 (seconds, minutes)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:  # nan too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number above 0")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a number of at least 0 (seconds)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0:  # nan too
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of at least 0")
    return value


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least {least}")
    return value


def input_file(path: Path | None, what: str) -> None:
    """A file the command reads must exist (None: the argument was not given)."""
    if path is not None and not path.is_file():
        raise UsageError(f"{what} {path} is not a file" if path.exists() else f"{what} {path}: no such file")


def input_dir(path: Path | None, what: str) -> None:
    """A directory the command reads must exist (None: the argument was not given)."""
    if path is not None and not path.is_dir():
        raise UsageError(f"{what} {path} is not a directory" if path.exists() else f"{what} {path}: no such directory")


def output_file(path: Path | None, what: str) -> None:
    """A file the command writes needs an existing directory to go in, checked before the work that fills it, and
    a place no other local user could redirect (`check_output`: a link, another user's file or directory, or a
    directory others can write); the command writes it with `write_output`."""
    from jg_mcp.live.places import check_output

    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise UsageError(f"{what} {path}: no such directory {path.parent}")
    check_output(path, what)


def new_dir(path: Path | None, what: str) -> None:
    """A directory the command creates and fills: it may exist only as an empty directory, and only where no other
    local user could plant, replace or redirect it (`check_place`)."""
    from jg_mcp.live.places import check_place

    if path is None:
        return
    check_place(path, what)
    if os.path.lexists(path) and any(path.iterdir()):
        raise UsageError(f"{what} {path} exists and is not an empty directory")


def dir_to_fill(path: Path | None, what: str) -> None:
    """A directory the command creates when it is missing, or adds to: it must not be a file, nor a place another
    local user could plant, replace or redirect (`check_place`: a link, another user's directory, or one below a
    directory others can write), checked before anything is made or handed over there."""
    # Imported here: the session's module is needed to check a place, not to parse the other arguments.
    from jg_mcp.live.places import check_place

    if path is not None and path.exists() and not path.is_dir():
        raise UsageError(f"{what} {path} is not a directory")
    if path is not None:
        check_place(path, what)
