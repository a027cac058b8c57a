"""STOMP inside TLS (OpenMQ's imq.bridge.stomp.tls.* listener) with the broker's key
material: stomp.py verifying the broker's certificate, messages both ways with a client
on the plain listener, the port mapper's line for it, a client that does not trust the
certificate refused, and imqbridgemgr's stop and start of the bridge closing and opening
both listeners."""

from __future__ import annotations

import io
import socket
import ssl
import uuid
from pathlib import Path

import pytest
import stomp

from broker.admintools import bridgemgr
from broker.launcher import BrokerProcess, free_port, read_portmapper, start_broker
from broker.protocol.portmapper import parse_table

from .stompkit import Peer
from .test_tls import make_keystore

pytestmark = pytest.mark.timeout(180)


def _stomp_broker_with_tls(tmp_path: Path) -> tuple[BrokerProcess, Path, int, int]:
    """A broker with both STOMP listeners, plain and TLS (its key material made in
    ``tmp_path``): it, the CA file its certificate verifies against, the two ports."""
    cafile = make_keystore(tmp_path)
    tcp_port, tls_port = free_port(), free_port()
    b = start_broker(
        tmp_path,
        "imq.passfile.enabled=true",
        "imq.bridge.enabled=true",
        "imq.bridge.activelist=stomp",
        f"imq.bridge.stomp.tcp.port={tcp_port}",
        "imq.bridge.stomp.tls.enabled=true",
        f"imq.bridge.stomp.tls.port={tls_port}",
    )
    return b, cafile, tcp_port, tls_port


def test_stomp_over_tls(tmp_path: Path) -> None:
    b, cafile, tcp_port, tls_port = _stomp_broker_with_tls(tmp_path)
    try:
        table = parse_table(read_portmapper(b.host, b.portmapper_port))
        lines = {(s.protocol, s.port) for s in table.services if s.name == "stomp[bridge]"}
        assert lines == {("stomp[TCP]", tcp_port), ("stomp[SSL/TLS]", tls_port)}
        q = "/queue/tls" + uuid.uuid4().hex[:10]
        secure = Peer(tls_port, "1.2", cafile=str(cafile))
        plain = Peer(tcp_port, "1.2")
        secure.receipt(secure.conn.subscribe, q, "s", ack="client-individual")
        plain.receipt(plain.conn.subscribe, q + "-back", "s")
        plain.receipt(plain.conn.send, q, "from plain", headers={"k": "v"})
        m = secure.next()
        assert (m.body, m.headers["k"]) == ("from plain", "v")
        secure.ack(m)
        secure.receipt(secure.conn.send, q + "-back", "from tls")
        assert plain.next().body == "from tls"
        secure.close()
        plain.close()
        # A client that does not trust the broker's certificate does not get in.
        with pytest.raises((ssl.SSLError, stomp.exception.ConnectFailedException)):
            untrusting = stomp.Connection12([("127.0.0.1", tls_port)], reconnect_attempts_max=1)
            untrusting.set_ssl(
                [("127.0.0.1", tls_port)],
                ca_certs=ssl.get_default_verify_paths().cafile
                or "/etc/ssl/certs/ca-certificates.crt",
            )
            untrusting.connect("guest", "guest", wait=True)
    finally:
        b.stop()


def test_imqbridgemgr_stops_and_starts_both_stomp_listeners(tmp_path: Path) -> None:
    # stop bridge closes the TLS listener with the plain one (the stock StompServer.stop
    # closes both); start opens both again on their ports.
    b, cafile, tcp_port, tls_port = _stomp_broker_with_tls(tmp_path)

    def bridge(command: str) -> str:
        opts = bridgemgr.Options(command, "bridge", host=b.host, port=b.portmapper_port)
        opts.password, opts.bridge_name, opts.force = "admin", "stomp", True
        out, err = io.StringIO(), io.StringIO()
        assert bridgemgr.run(opts, out, err) == 0, (out.getvalue(), err.getvalue())
        return out.getvalue()

    def connected(port: int, tls: bool) -> socket.socket:
        # Raw sockets: stomp.py does not notice a TLS connection's end (its reader takes
        # an empty read of an SSL socket for "nothing yet").
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        if tls:
            ctx = ssl.create_default_context(cafile=str(cafile))
            ctx.check_hostname = False
            sock = ctx.wrap_socket(sock)
        sock.sendall(b"CONNECT\naccept-version:1.2\nlogin:guest\npasscode:guest\n\n\x00")
        assert sock.recv(4096).startswith(b"CONNECTED\n")
        return sock

    try:
        held = [connected(tcp_port, False), connected(tls_port, True)]
        assert "successful" in bridge("stop")
        for sock in held:
            assert sock.recv(4096) == b"", "a STOMP connection outlived the bridge's stop"
            sock.close()
        for port in (tcp_port, tls_port):
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
        assert "successful" in bridge("start")
        q = "/queue/tls-again" + uuid.uuid4().hex[:10]
        secure = Peer(tls_port, "1.2", cafile=str(cafile))
        plain = Peer(tcp_port, "1.2")
        secure.receipt(secure.conn.subscribe, q, "s")
        plain.receipt(plain.conn.send, q, "after start")
        assert secure.next().body == "after start"
        secure.close()
        plain.close()
    finally:
        b.stop()
