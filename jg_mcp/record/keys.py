"""Transcript keys and line MACs: a key read from a file only its owner can read, its id, and the HMAC each line
carries when the server has a key."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from jg_mcp.errors import KeyFileRefused

KEY_ID_TEXT = b"jg-mcp transcript key id"
MAC_NULL = b'"mac":null'


def key_id(key: bytes) -> str:
    return hmac.new(key, KEY_ID_TEXT, hashlib.sha256).hexdigest()[:16]


def read_key(path: Path) -> bytes:
    """A transcript key from a file (surrounding whitespace dropped); at least 16 bytes, and the file readable by
    its owner only (commands run as another user must not read it)."""
    try:
        if os.stat(path).st_mode & 0o077:
            raise KeyFileRefused(path, "the key file is readable or writable by others: chmod 600 it")
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise KeyFileRefused(path, f"cannot read the key file: {exc.strerror or exc}") from None
    if len(key) < 16:
        raise KeyFileRefused(path, f"the key file holds {len(key)} bytes; a transcript key needs at least 16")
    return key


def mac_line(line: bytes, key: bytes) -> bytes:
    """`line` (dumped with `"mac":null`) with its HMAC filled in. `mac` follows seq, prev and ts, which hold
    no such text, so the first occurrence is the field."""
    tag = hmac.new(key, line, hashlib.sha256).hexdigest()
    return line.replace(MAC_NULL, b'"mac":"' + tag.encode() + b'"', 1)


def mac_ok(line: bytes, mac: str | None, key: bytes) -> bool:
    """Whether `line`, as written, carries a valid HMAC under `key`."""
    if not mac:
        return False
    unsigned = line.replace(b'"mac":"' + mac.encode() + b'"', MAC_NULL, 1)
    return unsigned != line and hmac.compare_digest(mac, hmac.new(key, unsigned, hashlib.sha256).hexdigest())
