"""STOMP inside TLS (OpenMQ's imq.bridge.stomp.tls.* listener) with the broker's key
material: stomp.py verifying the broker's certificate, messages both ways with a client
on the plain listener, the port mapper's line for it, and a client that does not trust
the certificate refused."""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path

import pytest
import stomp

from broker.launcher import free_port, read_portmapper, start_broker
from broker.protocol.portmapper import parse_table

from .stompkit import Peer
from .test_tls import make_keystore

pytestmark = pytest.mark.timeout(180)


def test_stomp_over_tls(tmp_path: Path) -> None:
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
