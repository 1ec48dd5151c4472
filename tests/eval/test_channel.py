"""The wire: JSON headers with raw blobs, deadlines, and a closed pipe told apart from a silent one."""

from __future__ import annotations

import os

import pytest

from jg_mcp.eval import channel


def test_messages_and_blobs_round_trip():
    r, w = os.pipe()
    channel.send(w, {"event": "call", "n": 1}, [b"abc", b""])
    header, blobs = channel.Reader(r).recv(5)
    assert header == {"event": "call", "n": 1, "blobs": [3, 0]} and blobs == [b"abc", b""]


def test_silence_is_a_timeout_and_a_closed_pipe_is_closed():
    r, w = os.pipe()
    with pytest.raises(channel.ChannelTimeout):
        channel.Reader(r).recv(0.2)
    os.close(w)
    with pytest.raises(channel.ChannelClosed):
        channel.Reader(r).recv(5)
