"""Helpers shared by the cluster suites."""
from __future__ import annotations

import signal
import socket
from typing import Any

import pytest

from support import raw_client
from support.kcoord import KcoordProcess


def _ask_on_waking(process: KcoordProcess, api_key: int, version: int, request: Any) -> Any:
    """Send `request` to `process` while it is paused (SIGSTOP: the kernel queues the bytes),
    wake it (SIGCONT) and return its answer: what a zombie says to what waited for it."""
    assert process.process is not None
    try:
        zombie = socket.create_connection(("127.0.0.1", process.port), timeout=30)
        zombie.sendall(raw_client.encode_request(api_key, version, 7, request))
    finally:
        process.process.send_signal(signal.SIGCONT)
    try:
        frame = raw_client.read_frame(zombie)
    finally:
        zombie.close()
    assert frame is not None, "the woken process closed the connection instead of answering"
    return raw_client.decode_response(api_key, version, frame)[1]


@pytest.fixture
def ask_on_waking():
    """`ask_on_waking(process, api_key, version, request)`: the answer a paused process gives,
    once woken, to a request that reached it while it slept."""
    return _ask_on_waking
