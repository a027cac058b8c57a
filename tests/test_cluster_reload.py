"""``imqcmd reload cls`` (admin RELOAD_CLUSTER, cluster G_RELOAD_CLUSTER): brokers sharing a
cluster configuration file (imq.cluster.url) take a broker added to it, and leave one
removed from it, without a restart; real broker processes on loopback."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.launcher import free_port, start_broker
from openmq_client import Queue, TextMessage
from openmq_client.sync import connect
from tests.cluster_procs import links_up, wait_for
from tests.test_imqcmd import SUCCESS, run_imqcmd

pytestmark = pytest.mark.timeout(240)


def write_list(path: Path, ports: list[int]) -> None:
    path.write_text(
        "# the cluster's shared configuration\n"
        "imq.cluster.brokerlist=" + ",".join(f"127.0.0.1:{p}" for p in ports) + "\n"
    )


def reload_cls(b, passfile: Path) -> str:
    r = run_imqcmd(b, "reload", "cls", passfile=passfile)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert SUCCESS in r.stdout
    return r.stdout


def brokers_listed(b, passfile: Path) -> str:
    r = run_imqcmd(b, "list", "bkr", passfile=passfile)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


@pytest.mark.django_db
def test_reload_cls_adds_and_removes_a_broker(tmp_path: Path, settings) -> None:
    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    shared = tmp_path / "cluster.properties"
    pa, pb, pc = free_port(), free_port(), free_port()
    write_list(shared, [pa, pb])
    props = (f"imq.cluster.url=file://{shared}", "imq.cluster.ping.interval=1")
    started = []
    for n in "ABC":
        (tmp_path / n).mkdir()
    try:
        a = start_broker(tmp_path / "A", *props, instance="A", portmapper_port=pa)
        started.append(a)
        b = start_broker(tmp_path / "B", *props, instance="B", portmapper_port=pb)
        started.append(b)
        wait_for(lambda: links_up(a) == 1 and links_up(b) == 1, 30, "A-B link")

        # C is added to the shared file and started: A and B do not know it until reloaded.
        write_list(shared, [pa, pb, pc])
        c = start_broker(tmp_path / "C", *props, instance="C", portmapper_port=pc)
        started.append(c)
        assert f"127.0.0.1:{pc}" not in brokers_listed(a, passfile)
        assert links_up(c) == 0

        out = reload_cls(a, passfile)  # A reloads and tells B
        assert f"127.0.0.1:{pc}" in out  # "Brokers added"
        wait_for(lambda: links_up(c) == 2, 30, "C linked to A and B")
        assert "cluster configuration reloaded" in b.log_text()
        listed = brokers_listed(a, passfile)
        assert f"127.0.0.1:{pc}" in listed and "BROKER_DOWN" not in listed

        q = Queue(f"reload_{uuid.uuid4().hex[:8]}")
        with connect(a.host, a.portmapper_port) as ca, connect(c.host, c.portmapper_port) as cc:
            cons = ca.create_session().create_consumer(q)
            ca.start()
            cc.create_session().create_producer(q).send(TextMessage("from C"))
            got = cons.receive(15)
            assert got is not None and got.text == "from C"

        # C is taken out again, through the REST API on B: A and B say GOODBYE to C.
        from django.test import Client

        from broker.admintools import security_actions
        from tests.test_rest_api import ADMIN, ADMIN_PW, point_at, token_client

        write_list(shared, [pa, pb])
        point_at(settings, b, tmp_path)
        security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
        r = token_client(ADMIN, ADMIN_PW).post("/api/broker/cluster/reload/")
        assert r.status_code == 200, r.content
        assert r.json() == {"added": [], "removed": [f"127.0.0.1:{pc}"]}
        wait_for(lambda: f"127.0.0.1:{pc}" not in brokers_listed(a, passfile), 30, "C gone")
        wait_for(lambda: links_up(c) == 0, 30, "C's links down")
        assert links_up(a) == 1 and links_up(b) == 1

        # A configuration that cannot be read changes nothing and says why: imqcmd, and
        # the portal's Cluster page button.
        shared.unlink()
        r = run_imqcmd(a, "reload", "cls", passfile=passfile)
        assert r.returncode != 0 and "cannot read the cluster configuration" in r.stderr
        page = Client()
        assert page.login(username=ADMIN, password=ADMIN_PW)
        html = page.post("/cluster/reload/", follow=True).content.decode()
        assert "cannot read the cluster configuration" in html
        assert links_up(a) == 1
    finally:
        for p in started:
            p.stop()
