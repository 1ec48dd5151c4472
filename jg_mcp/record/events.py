"""The events of a transcript: one JSON line each, a tagged union on `event` (header, request, response,
file_change, notice, close), and the format's version. Each carries `seq` (0, 1, 2, ...), `prev` (the sha256 of
the previous line's bytes, GENESIS for the header) and, in a keyed transcript, `mac`. `jg_mcp.record.transcript`
writes them; past a transcript's budget an event keeps its place but not its large payloads
(`without_large_payloads`), and a scan's file changes past the first few are summarised in one notice
(`summarise_changes`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter
from pydantic_core import to_json

from jg_mcp.live.protections import Protections
from jg_mcp.models import Strict

FORMAT_VERSION = 6
"""1: the first format. 2: the header records the commands' environment and the sandbox limits.
3: events may carry `mac` (keyed transcripts, the header's `key_id`); a request too large to record keeps
its size in `params_size` instead of its params. 4: a response to a call cancelled before it finished (the
client cancelled it or disconnected) says so in `cancelled`. 5: a file change seen while other commands ran names
them in `running`. 6: the header records which protections were in force and which the operator waived in
`protections`, and the size of the workspace's own file system in `workspace_fs_bytes` (None: unbounded)."""
GENESIS = "0" * 64
SHA256_HEX = r"^[0-9a-f]{64}$"
"""A sha256 digest as the transcript spells it."""
KEPT_PAST_BUDGET_BYTES = 1024
"""Largest payload field (its JSON) still recorded whole once the transcript has passed its budget: small params
(a short command, which the audit's policy checks read) stay readable, and a line past the budget takes at most a
few KiB: its payload fields, an id of at most jg_mcp.live.stdio.MAX_ID_CHARS characters, and the chain's hashes."""
KEPT_PARAMS = ("name", "uri")
"""Entries of a request's params kept past the budget when its params are not (each a string of at most 200
characters): the tool's or prompt's name and a resource's uri, which the steps and the condition check read."""


class EventBase(Strict):
    seq: int = -1
    """Position in the transcript, from 0."""
    prev: str = GENESIS
    """sha256 of the previous line's bytes (without its newline)."""
    ts: float = 0.0
    """Unix time the event was written."""
    mac: str | None = None
    """HMAC-SHA256 (hex) under the transcript key of this line with `"mac":null`; None when unkeyed or before
    format 3."""


class Header(EventBase):
    event: Literal["header"] = "header"
    format_version: int = FORMAT_VERSION
    """Transcript format version; readers accept every version up to theirs."""
    jg_mcp_version: str
    run_id: str
    goal: str
    """Goal name."""
    goal_sha256: str
    """Hash of the goal YAML and module as served."""
    condition: str
    """The experimental condition; `goal-only` unless an ablation was named."""
    sandbox: str
    """How run_command was isolated: `bwrap` or `none`."""
    protections: Protections | None = None
    """Which protections the commands ran under and which the operator waived (format 6); None before."""
    sandbox_limits: dict[str, int] | None = None
    """bwrap's limits on commands (jg_mcp.live.sandbox.SandboxLimits); None unsandboxed or before format 2."""
    env: dict[str, str] | None = None
    """The environment variables run_command's commands saw, except those in `env_redacted`: under bwrap
    the sandbox's allow-list, unsandboxed the server's own. None before format 2 (not recorded)."""
    env_redacted: list[str] = []
    """Variables the commands saw whose values were not recorded because they look like secrets."""
    workspace: str
    host: dict[str, Any]
    gpu: dict[str, Any]
    """query_gpu's answer at start."""
    started_at: str
    """ISO 8601 UTC."""
    transport: str = "stdio"
    key_id: str | None = None
    """Names the transcript key (an HMAC of a fixed text under it) when events carry a `mac`; None unkeyed."""
    workspace_fs_bytes: int | None = None
    """The size of the file system of its own that held the workspace and the compile cache while commands ran
    (jg_mcp.live.workspace_fs): what they could take of the host's disk. None: the workspace lay on the host's file
    system (unsandboxed, `serve --unbounded-workspace`, or a transcript from before this field)."""


class Request(EventBase):
    event: Literal["request"] = "request"
    request_id: str | int | None
    method: str
    """The JSON-RPC method, e.g. `tools/call`."""
    params: dict[str, Any] | None = None
    params_size: int | None = None
    """Set when the request was too large to record and was refused: its size (characters of its params,
    or bytes of its line on stdio); `params` is then None."""


class Response(EventBase):
    event: Literal["response"] = "response"
    request_id: str | int | None
    method: str
    duration_ms: float
    is_error: bool = False
    result: dict[str, Any] | None = None
    error: str | None = None
    """The protocol error's message, when the request failed before any tool ran, or why it was cancelled."""
    cancelled: bool = False
    """The call was cancelled before it finished (the client cancelled it or disconnected): there is no
    result, and `error` says so. False before format 4, where such a call shows as an error naming
    CancelledError."""


class FileChange(EventBase):
    event: Literal["file_change"] = "file_change"
    request_id: str | int | None
    path: str
    """Workspace-relative path."""
    op: Literal["write", "delete"]
    sha256: Annotated[str, Field(pattern=SHA256_HEX)] | None = None
    """The content's sha256 in hex: also its blob's name, so nothing else is one (no path, no `..`)."""
    size: int | None = None
    stored: bool = True
    """False when the content exceeded the blob cap and only its hash was kept."""
    cause: str
    """The tool that changed it: `write_file` or `run_command`."""
    running: list[str | int] | None = None
    """The ids of other commands still running when the change was seen (format 5): any of them may have made it,
    as may the call `request_id` names (a scan sees what changed, not who changed it)."""


class Notice(EventBase):
    event: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"]
    message: str


class Close(EventBase):
    event: Literal["close"] = "close"
    reason: str
    """Why the session ended: `client disconnected`, `SIGTERM`, ..."""
    ended_at: str
    manifest: dict[str, dict[str, Any]]
    """Final workspace: path -> {sha256, size}."""


Event = Annotated[Header | Request | Response | FileChange | Notice | Close, Field(discriminator="event")]
EVENT = TypeAdapter(Event)


PAYLOAD_FIELDS: dict[type[EventBase], tuple[str, ...]] = {
    Request: ("params", "method"),
    Response: ("result", "error", "method"),
    Notice: ("message",),
}
"""The fields of each kind of event whose size the agent decides (a method too: an unknown one is recorded as sent).
The others are small or bounded elsewhere: ids (MAX_ID_CHARS), a file change's path, the header, and the close,
whose manifest lists the workspace's files."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def without_large_payloads(event: EventBase) -> EventBase:
    """`event` with each payload field (PAYLOAD_FIELDS) whose JSON (pydantic_core.to_json, as the line spells it)
    is over KEPT_PAST_BUDGET_BYTES recorded by that JSON's size and sha256: a string as a sentence naming them, a
    dict as `{"omitted": {"sha256": ..., "size": ...}}`, a request's params with their KEPT_PARAMS."""
    update: dict[str, Any] = {}
    for name in PAYLOAD_FIELDS.get(type(event), ()):
        value = getattr(event, name)
        data = b"" if value is None else to_json(value)
        if len(data) <= KEPT_PAST_BUDGET_BYTES:
            continue
        digest = sha256_bytes(data)
        if isinstance(value, str):
            update[name] = f"(omitted past the transcript's budget: {len(data)} bytes of JSON, sha256 {digest})"
            continue
        kept = {k: v for k in KEPT_PARAMS if isinstance(v := value.get(k), str) and len(v) <= 200}
        update[name] = {**(kept if name == "params" else {}), "omitted": {"sha256": digest, "size": len(data)}}
    return event.model_copy(update=update) if update else event


SUMMARISED = "file changes summarised past the transcript's budget"
"""How the message of a notice made by `summarise_changes` begins (the audit recognises it)."""


def summarise_changes(changes: Sequence[FileChange]) -> Notice:
    """One error notice standing for `changes` (file changes of one scan not recorded one by one, the transcript
    having passed its budget): their number, writes and deletions, bytes written, and the sha256 of the JSON list
    of their [path, sha256, size] sorted by path (a deletion with null sha256 and size), as pydantic_core.to_json
    spells it. Its message stays under KEPT_PAST_BUDGET_BYTES whatever the paths and ids."""
    listing = sorted(([c.path, c.sha256, c.size] for c in changes), key=lambda x: (x[0], x[1] or ""))
    writes = [c for c in changes if c.op == "write"]
    rid = to_json(changes[0].request_id).decode()
    call = f"request {rid[:40]}" if len(rid) <= 40 else f"request {rid[:37]}..."
    return Notice(
        level="error",
        message=f"{SUMMARISED}: {len(changes)} more changes seen by the scan after {call} ({changes[0].cause[:40]}) "
        f"are not recorded one by one: {len(writes)} writes of {sum(c.size or 0 for c in writes)} bytes in all and "
        f"{len(changes) - len(writes)} deletions, whose list [[path, sha256, size], ...] sorted by path (null "
        f"sha256 and size for a deletion) as JSON has sha256 {sha256_bytes(to_json(listing))}. A replay cannot "
        "rebuild them; the close event's manifest lists the final files",
    )
