"""The fast tier's guard (tests/fasttier.py) refuses, in a test marked ``fast``, a process
and a connection to a listener outside the process, and lets an in-process stand-in
server through."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from .fasttier import FastTierViolation, expect_violation

pytestmark = pytest.mark.fast


def test_starting_a_process_is_refused() -> None:
    with pytest.raises(FastTierViolation, match="subprocess.Popen"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert len(expect_violation()) == 1  # taken, so this test itself passes


def test_a_connection_to_a_listener_of_this_process_is_let_through() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            peer, _ = server.accept()
            conn.sendall(b"x")
            assert peer.recv(1) == b"x"
            peer.close()
    assert expect_violation() == []


def test_a_connection_elsewhere_is_refused() -> None:
    # A port nothing of ours listens on: refused before the connection is tried.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    with pytest.raises(FastTierViolation, match="outside this process"):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    assert len(expect_violation()) == 1
