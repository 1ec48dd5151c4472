"""The sessions one `jg-mcp serve` makes: the goal loaded and the sandbox chosen once, at start, then one session
(workspace, sandbox, transcript) per client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jg_mcp
from jg_mcp.commands.serve_config import ServeConfig
from jg_mcp.goals import LoadedGoal, find_goal, load_goal
from jg_mcp.live import workspace_fs
from jg_mcp.live.bwrap import Bwrap
from jg_mcp.live.protections import Protections, unsandboxed
from jg_mcp.live.sandbox import NoSandbox, Sandbox
from jg_mcp.live.sandbox_probe import choose
from jg_mcp.live.session import Session, new_run_id
from jg_mcp.live.session_place import SessionConfig
from jg_mcp.record.keys import read_key


def hidden_dirs(loaded: LoadedGoal, config: ServeConfig) -> list[Path]:
    """What commands must not see: goal files, transcripts, other runs, and jg-mcp itself (its whole
    source checkout, eval data included, when it runs from one; the environment is bound back)."""
    package = Path(jg_mcp.__file__).resolve().parent
    source = package.parent if (package.parent / "pyproject.toml").exists() else package
    dirs = [
        loaded.yaml_path.resolve().parent,
        config.transcripts.resolve(),
        config.runs.resolve(),
        source,
        *[h.resolve() for h in config.hide],
    ]
    return list(dict.fromkeys(dirs))


class Sessions:
    """Makes the sessions of one server: `open` loads the goal and chooses the sandbox mode once, at start (or
    refuses the start: `choose` never falls back on its own); the constructor only holds what it found."""

    def __init__(
        self,
        config: ServeConfig,
        loaded: LoadedGoal,
        key: bytes | None,
        template: Bwrap,
        mode: str,
        warning: str | None,
        no_sandbox: Protections,
        workspace_bytes: int | None,
    ):
        self.config = config
        self.loaded = loaded
        self.key = key
        self.template = template
        self.mode, self.warning = mode, warning
        self.unsandboxed = no_sandbox
        """The protections of a session without a sandbox: all waived by `--sandbox none`, none by `auto`."""
        self.workspace_bytes = workspace_bytes

    @classmethod
    def open(cls, config: ServeConfig, probe_dir: Path) -> Sessions:
        """The sessions `config` asks for, with the sandbox probed in `probe_dir`; an error when the goal, the key or
        the sandbox (and its bounded workspace) cannot be had as asked."""
        loaded = load_goal(find_goal(config.goal), import_module=False)
        key = read_key(config.transcript_key_file) if config.transcript_key_file else None
        limits = config.limits
        template = Bwrap(config.runs, hidden_dirs(loaded, config), limits)
        mode, warning = choose(config.sandbox, template, probe_dir, not config.seccomp)
        no_sandbox = unsandboxed(template.asked)
        bounded = mode == "bwrap" and not config.unbounded_workspace
        if config.unbounded_workspace:  # recorded as asked: the audit fails a sandboxed session without the bound else
            template.asked.append("--unbounded-workspace")
        if bounded and (why := workspace_fs.unavailable(probe_dir)) is not None:
            raise workspace_fs.WorkspaceFsError(f"{why}; --unbounded-workspace runs without this bound")
        workspace_bytes = limits.max_workspace_bytes if bounded else None
        return cls(config, loaded, key, template, mode, warning, no_sandbox, workspace_bytes)

    def make(self, workspace: Path | None = None) -> tuple[Session, Callable[[], None]]:
        """A new session and what gives its sandbox's uid back."""
        run_id = new_run_id(self.loaded.name)
        ws = workspace or self.config.runs / run_id / "workspace"
        sandbox: Sandbox = (
            self.template.for_workspace(ws) if self.mode == "bwrap" else NoSandbox(protections=self.unsandboxed)
        )
        try:
            config = SessionConfig(
                workspace_dir=ws,
                transcripts_dir=self.config.transcripts,
                runs_dir=self.config.runs,
                transport=self.config.transport,
                run_id=run_id,
                sandbox=self.mode,
                condition=self.config.condition,
                workspace_bytes=self.workspace_bytes,
            )
            session = Session.open(self.loaded, config, wrap=sandbox, transcript_key=self.key)
        except BaseException:
            sandbox.release()
            raise
        if self.warning:
            session.notice("warning", self.warning)
        return session, sandbox.release
