"""What the harness reads from outside its own process, once: the solution's bytes from the agent's workspace
and a private copy of the goal's two files, which is what the eval hashes and uses."""

from __future__ import annotations

import codecs
import io
import os
import re
import shutil
import tokenize
from dataclasses import dataclass
from pathlib import Path

from jg_mcp.errors import JgError, PathRefused
from jg_mcp.eval.reasons import Reason
from jg_mcp.eval.report import Finding
from jg_mcp.goals import LoadedGoal, load_goal
from jg_mcp.live.safefs import open_dir, read_bounded
from jg_mcp.live.workspace import Workspace


def private_goal(yaml_path: Path, work: Path) -> LoadedGoal:
    """Load the goal from a private copy of its two files: what is hashed is what is used, whatever happens to
    the originals meanwhile, and no worker is pointed at the originals."""
    dest = work / "goal"
    dest.mkdir()
    shutil.copyfile(yaml_path, dest / yaml_path.name)
    shutil.copyfile(yaml_path.with_suffix(".py"), dest / yaml_path.with_suffix(".py").name)
    return load_goal(dest / yaml_path.name)


MAX_SOLUTION_BYTES = 16 * 1024 * 1024
"""The largest solution file read (the server's write_file limit)."""


def read_solution(workspace: Path, rel: str) -> bytes:
    """The solution's bytes, read once through the workspace's directory descriptor: the agent controls the
    workspace, so a link (to a host file the harness, often root, could read) or a FIFO is refused, not followed,
    and nothing is checked by name and then reopened."""
    try:
        ws = Workspace.open(workspace)
        with ws.open_file(ws.parts(rel)) as (fd, st):
            if st.st_size > MAX_SOLUTION_BYTES:
                raise JgError(f"solution file {workspace / rel} is {st.st_size} bytes, over {MAX_SOLUTION_BYTES}")
            return b"".join(read_bounded(fd, st.st_size))
    except (PathRefused, OSError) as exc:
        raise JgError(f"no solution file {workspace / rel} to evaluate: {exc}") from None


COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
"""A coding declaration (PEP 263), as `tokenize` and the compiler find it in a comment line."""


def _declared(data: bytes) -> list[str]:
    """Every encoding named by a coding declaration in the first two lines, whichever line breaks (\\n, \\r, \\r\\n)
    one counts: Python reads only the first it finds, this reads them all so no reading of the lines escapes it."""
    heads = data.split(b"\n", 2)[:2] + re.split(rb"\r\n|\r|\n", data, maxsplit=2)[:2]
    return [m.group(1).decode("ascii") for line in heads if (m := COOKIE.match(line))]


def _utf8(name: str) -> bool:
    try:
        return codecs.lookup(name).name in ("utf-8", "utf-8-sig")
    except LookupError:
        return False


def solution_text(data: bytes) -> str | Finding:
    """The text Python compiles from the solution's bytes, which is what the static check must read; or a finding
    when the eval refuses them. Python decodes a source by its BOM and coding declaration, so a check that read the
    bytes any other way could see a comment where the import runs code (`# coding: utf-7`, where `+AAo-` is a
    newline). A kernel needs no encoding but UTF-8: any other declared one is refused, and so are bytes that are not
    UTF-8 (never decoded with replacement, which would show the check text the compiler never sees)."""
    other = [name for name in _declared(data.removeprefix(codecs.BOM_UTF8)) if not _utf8(name)]
    if other:
        return Finding(
            reason=Reason.SYNTAX,
            detail=f"the source declares the encoding `{other[0]}`; only UTF-8 is accepted (drop the coding line)",
        )
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        return Finding(reason=Reason.SYNTAX, detail=f"source encoding: {exc.msg}; only UTF-8 is accepted")
    if not _utf8(encoding):  # what the scan above missed, Python's own rule still catches
        return Finding(reason=Reason.SYNTAX, detail=f"the source's encoding is `{encoding}`; only UTF-8 is accepted")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        return Finding(reason=Reason.SYNTAX, detail=f"the source is not valid UTF-8 at byte {exc.start}: {exc.reason}")


SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl", ".ptx")
"""The files of a solution besides its main file (open policy): Python modules it imports and the sources it builds.
Nothing else is copied, so a library or object file left in the workspace is never loaded: native code is built
from source, in the candidate's sandbox, where the eval can see what it loads."""
MAX_SOURCE_FILES = 64
"""Most files a solution may have (its main file included); beyond that the eval refuses rather than guess."""
MAX_SOURCES_BYTES = 16 * 1024 * 1024
"""Most bytes all of a solution's files may hold together."""
MAX_SOURCE_DEPTH = 4
"""Deepest directory level below the workspace that is read for sources."""
SKIPPED_DIRS = frozenset({"__pycache__", "build", "node_modules"})
"""Directories never read for sources: bytecode and build output, not source."""


@dataclass(frozen=True)
class SourceFile:
    """One file of a solution: its workspace-relative path and the bytes read once."""

    path: str
    data: bytes


def read_sources(workspace: Path, rel: str, everything: bool) -> list[SourceFile]:
    """The solution's files, each read once beneath the workspace's descriptor (no link followed, no FIFO opened):
    the main file first, as `rel`; with `everything`, also every source file (SOURCE_SUFFIXES) down to
    MAX_SOURCE_DEPTH, skipping hidden and build directories. Over MAX_SOURCE_FILES files or MAX_SOURCES_BYTES is
    refused with a message that says which limit."""
    main = read_solution(workspace, rel)
    found = [SourceFile(rel, main)]
    if not everything:
        return found
    ws = Workspace.open(workspace)
    total = len(main)
    for path in _source_paths(ws.fd, (), main_rel=rel):
        if len(found) >= MAX_SOURCE_FILES:
            raise JgError(f"the workspace holds more than {MAX_SOURCE_FILES} source files; remove the unused ones")
        data = read_solution(workspace, path)
        total += len(data)
        if total > MAX_SOURCES_BYTES:
            raise JgError(f"the workspace's source files hold more than {MAX_SOURCES_BYTES} bytes together")
        found.append(SourceFile(path, data))
    return found


def _source_paths(root_fd: int, parts: tuple[str, ...], main_rel: str) -> list[str]:
    """Workspace-relative paths of the source files under `parts`, sorted, without following links."""
    fd = open_dir(root_fd, parts)
    try:
        with os.scandir(fd) as listing:
            entries = sorted(
                (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in listing
            )
    finally:
        os.close(fd)
    paths: list[str] = []
    for name, is_dir, is_file in entries:
        rel = "/".join((*parts, name))
        if name.startswith("."):
            continue
        if is_dir and name not in SKIPPED_DIRS and len(parts) + 1 < MAX_SOURCE_DEPTH:
            paths += _source_paths(root_fd, (*parts, name), main_rel)
        elif is_file and name.endswith(SOURCE_SUFFIXES) and rel != main_rel:
            paths.append(rel)
        if len(paths) > MAX_SOURCE_FILES:
            break
    return paths
