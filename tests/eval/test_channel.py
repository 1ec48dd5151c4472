"""The wire: length-prefixed JSON, deadlines, a closed pipe told apart from a silent one, garbage refused."""

from __future__ import annotations

import os
import struct
import tempfile

import pytest

from jg_mcp.eval.processes.process import parse
from jg_mcp.eval.wire import channel


def test_messages_round_trip():
    r, w = os.pipe()
    channel.send(w, {"event": "done", "n": 1})
    assert channel.Reader(r).recv(5) == {"event": "done", "n": 1}


def test_silence_is_a_timeout_and_a_closed_pipe_is_closed():
    r, w = os.pipe()
    with pytest.raises(channel.ChannelTimeout):
        channel.Reader(r).recv(0.2)
    os.close(w)
    with pytest.raises(channel.ChannelClosed):
        channel.Reader(r).recv(5)


@pytest.mark.parametrize(
    "raw", [struct.pack("<Q", 1 << 40), struct.pack("<Q", 3) + b"{{{", struct.pack("<Q", 2) + b"[]"]
)
def test_garbage_is_malformed(raw):
    r, w = os.pipe()
    os.write(w, raw)
    with pytest.raises(channel.Malformed):
        channel.Reader(r).recv(5)


HOSTILE = {
    "deep_array": b"[" * 200_000 + b"]" * 200_000,
    "deep_object": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "big_integer": b'{"event": "ready", "version": ' + b"9" * 5000 + b"}",
    "nan": b'{"event": "block_done", "times_ms": [NaN]}',
    "infinity": b'{"event": "block_done", "enqueue_ms": -Infinity}',
    "float_overflow": b'{"event": "block_done", "times_ms": [1e999]}',
    "not_utf8": b'{"event": "\xff"}',
    "lone_surrogate": b'{"event": "done", "error": "\\ud800"}',
    "not_an_object": b"[1, 2]",
    "truncated": b'{"event": "done"',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_any_frame_that_does_not_decode_is_malformed_never_another_error(name):
    """The frame may be the candidate's: whatever it holds, decoding fails only with Malformed."""
    body = HOSTILE[name]
    with tempfile.TemporaryFile() as f:
        f.write(struct.pack("<Q", len(body)) + body)
        f.seek(0)
        with pytest.raises(channel.Malformed):
            channel.Reader(f.fileno()).recv(5)


@pytest.mark.parametrize(
    "raw",
    [
        {"event": "done", "error": 1},
        {"event": "bound"},
        {"event": "done", "hints": [{"reason": "no_such_reason", "detail": "x"}]},
        {"event": "done", "outputs": [{"type": "x", "shape": [[[[1]]]]}]},
        {"event": "block_done", "times_ms": [float("nan")]},
        {"event": "nothing"},
    ],
)
def test_a_decoded_frame_outside_the_protocol_is_malformed(raw):
    with pytest.raises(channel.Malformed):
        parse(raw)


def test_text_a_report_cannot_hold_is_sent_as_replacement_characters():
    """A worker's exception message with a lone surrogate still arrives (as `?`), not as a malformed frame."""
    r, w = os.pipe()
    channel.send(w, {"event": "done", "error": "bad \ud800 text"})
    assert channel.Reader(r).recv(5) == {"event": "done", "error": "bad ? text"}
