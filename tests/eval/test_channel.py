"""The wire: length-prefixed JSON, deadlines, a closed pipe told apart from a silent one, garbage refused."""

from __future__ import annotations

import os
import struct

import pytest

from jg_mcp.eval import channel


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
