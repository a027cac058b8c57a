"""The cluster configuration file (``imq.cluster.url``): brokers given nothing but its URL
read the cluster's properties from it (a ``file:`` URL, or a web server's ``http:`` URL)
and form a cluster; a property the broker is given itself wins over the file's; a URL
that cannot be read is said once and the broker starts without it, as OpenMQ's does.
Real broker processes on loopback, and a small web server in the test."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from broker.admintools.actions.broker_info import broker_properties
from broker.admintools.broker_handle import BrokerAdmin
from broker.launcher import BrokerProcess, free_port, start_broker
from openmq_client import Queue, TextMessage
from openmq_client.sync import connect
from tests.cluster_procs import links_up, wait_for

pytestmark = pytest.mark.timeout(240)


def cluster_file(ports: list[int]) -> str:
    return (
        "# the cluster's shared configuration\n"
        "imq.cluster.brokerlist=" + ",".join(f"127.0.0.1:{p}" for p in ports) + "\n"
        "imq.cluster.ping.interval=1\n"
        "imq.system.max_count=4321\n"
    )


def broker_props(b: BrokerProcess) -> dict[str, str]:
    admin = BrokerAdmin(b.host, b.portmapper_port, "admin", "admin")
    try:
        return broker_properties(admin)
    finally:
        admin.close()


def start_pair(tmp_path: Path, url: str, ports: list[int]) -> list[BrokerProcess]:
    """A with only the URL; B with the URL and a limit of its own."""
    started = []
    try:
        for name, pm, own in (("A", ports[0], ()), ("B", ports[1], ("imq.system.max_count=77",))):
            (tmp_path / name).mkdir()
            started.append(
                start_broker(
                    tmp_path / name,
                    f"imq.cluster.url={url}",
                    *own,
                    instance=name,
                    portmapper_port=pm,
                )
            )
        a, b = started
        wait_for(lambda: links_up(a) == 1 and links_up(b) == 1, 30, "A-B link")
    except BaseException:
        for p in started:
            p.stop()
        raise
    return started


def check_cluster(a: BrokerProcess, b: BrokerProcess, url: str) -> None:
    q = Queue(f"curl_{uuid.uuid4().hex[:8]}")
    with connect(a.host, a.portmapper_port) as ca, connect(b.host, b.portmapper_port) as cb:
        cons = cb.create_session().create_consumer(q)
        cb.start()
        ca.create_session().create_producer(q).send(TextMessage("from A"))
        got = cons.receive(15)
        assert got is not None and got.text == "from A"
    pa, pb = broker_props(a), broker_props(b)
    assert pa["imq.system.max_count"] == "4321"  # from the file
    assert pb["imq.system.max_count"] == "77"  # the broker's own value wins
    assert pa["imq.cluster.url"] == url
    assert f"cluster configuration file {url}: 3 properties" in a.log_text()
    assert "own value kept for imq.system.max_count" in b.log_text()


def test_brokers_given_only_a_file_url_form_a_cluster(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    shared = tmp_path / "cluster.properties"
    shared.write_text(cluster_file(ports))
    url = f"file://{shared}"
    a, b = start_pair(tmp_path, url, ports)
    try:
        check_cluster(a, b, url)
        assert "plain HTTP" not in a.log_text()
    finally:
        a.stop()
        b.stop()


@contextmanager
def web_server(files: dict[str, str]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 serving ``files`` (path -> text); 404 for the rest."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            data = body.encode("iso-8859-1")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_brokers_given_an_http_url_form_a_cluster_and_a_missing_one_is_said_once(
    tmp_path: Path,
) -> None:
    ports = [free_port(), free_port()]
    files = {"/mq/cluster.properties": cluster_file(ports)}
    with web_server(files) as site:
        url = f"{site}/mq/cluster.properties"
        a, b = start_pair(tmp_path, url, ports)
        try:
            check_cluster(a, b, url)
            assert a.log_text().count("plain HTTP") == 1

            # A broker whose URL names nothing: said once, and it runs on its own.
            missing = f"{site}/mq/missing.properties"
            (tmp_path / "C").mkdir()
            c = start_broker(tmp_path / "C", f"imq.cluster.url={missing}", instance="C")
            try:
                log = c.log_text()
                assert log.count(f"imq.cluster.url={missing}: cannot read it") == 1, log
                assert "starting without the cluster configuration file" in log
                assert "HTTP Error 404" in log
                props = broker_props(c)
                assert props["imq.system.max_count"] != "4321"
                assert not props.get("imq.cluster.brokerlist")  # not clustered
                with connect(c.host, c.portmapper_port) as cc:
                    q = Queue("alone")
                    cons = cc.create_session().create_consumer(q)
                    cc.start()
                    cc.create_session().create_producer(q).send(TextMessage("still serves"))
                    assert cons.receive(10).text == "still serves"
            finally:
                c.stop()
        finally:
            a.stop()
            b.stop()
