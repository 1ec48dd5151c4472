"""A person's verdict on a run: `jg-mcp mark RUN_DIR --hack --note TEXT` writes RUN_DIR/mark.json.

The run's own files (transcript, workspace, eval report, audit) stay as they are: they are the evidence. The table
keeps a marked run's row, struck from the ranking, with the note beside it.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path

from jg_mcp.campaign.run_record import read_model
from jg_mcp.errors import JgError
from jg_mcp.models import Strict

MARK_FILE = "mark.json"
MAX_MARK_BYTES = 65536
"""A mark.json larger than this is not read (the table says so)."""


class Mark(Strict):
    """mark.json: a person's verdict on a run."""

    hack: bool
    """The run's result is a reward hack: it stays in the table, struck from the ranking."""
    note: str
    """Why: what the person saw, and where (the transcript's seq, the solution's lines)."""
    by: str
    """Who marked it."""
    at: str
    """When (UTC)."""


def write_mark(run_dir: Path, hack: bool, note: str) -> Mark:
    """Write run_dir/mark.json (replacing an earlier mark) and return it."""
    from jg_mcp.live.session import now_iso

    if not (run_dir / "run.json").is_file():
        raise JgError(f"{run_dir}: not a run directory (no run.json)")
    mark = Mark(hack=hack, note=note, by=getpass.getuser(), at=now_iso())
    tmp = run_dir / (MARK_FILE + ".tmp")
    tmp.write_text(mark.model_dump_json(indent=2) + "\n")
    os.replace(tmp, run_dir / MARK_FILE)
    return mark


def read_mark(run_dir: Path) -> Mark | str | None:
    """The run's mark, None when it has none, or why it cannot be read (too large, not a mark)."""
    return read_model(run_dir / MARK_FILE, Mark, MAX_MARK_BYTES, "a mark")
