"""The session's workspace: path confinement for the file tools, and change tracking."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from jg_mcp.errors import PathRefused


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    sha256: str


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Workspace:
    """A directory the agent may read and write, and nothing outside it."""

    def __init__(self, root: Path, protected: tuple[str, ...] = ()):
        self.root = Path(root).resolve()
        self.protected = set(protected)
        self._states: dict[str, FileState] = {}

    def resolve(self, path: str, for_write: bool = False) -> Path:
        """Map an agent-supplied path to a real path inside the workspace, or refuse it."""
        if "\0" in path:
            raise PathRefused("path contains a NUL byte")
        if not path.strip():
            raise PathRefused("path is empty")
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = Path(os.path.realpath(candidate))
        if real != self.root and self.root not in real.parents:
            raise PathRefused(
                f"'{path}' resolves to {real}, outside the workspace {self.root}; "
                "use a path relative to the workspace"
            )
        if for_write:
            rel = real.relative_to(self.root).as_posix()
            if rel in self.protected:
                raise PathRefused(f"'{rel}' is a goal file copied in for reference and is read-only")
            if real == self.root or real.is_dir():
                raise PathRefused(f"'{path}' is a directory")
        return real

    def relative(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix()

    def scan(self, limit: int = 50_000) -> dict[str, FileState]:
        """Current regular files with hashes; unchanged (size, mtime) reuse the cached hash."""
        states: dict[str, FileState] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                full = Path(dirpath) / name
                try:
                    st = full.lstat()
                except FileNotFoundError:
                    continue
                if not full.is_file() or full.is_symlink():
                    continue
                rel = full.relative_to(self.root).as_posix()
                old = self._states.get(rel)
                if old and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                    states[rel] = old
                else:
                    states[rel] = FileState(st.st_size, st.st_mtime_ns, file_sha256(full))
                if len(states) >= limit:
                    return states
        return states

    def changes(self) -> tuple[dict[str, FileState], list[str]]:
        """Files written and deleted since the previous call (the first call sees everything)."""
        now = self.scan()
        changed = {p: s for p, s in now.items() if self._states.get(p, None) is None or self._states[p].sha256 != s.sha256}
        deleted = sorted(set(self._states) - set(now))
        self._states = now
        return changed, deleted

    def manifest(self) -> dict[str, dict[str, object]]:
        return {p: {"sha256": s.sha256, "size": s.size} for p, s in sorted(self.scan().items())}
