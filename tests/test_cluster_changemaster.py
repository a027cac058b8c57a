"""Moving a conventional cluster's master broker while it runs (``imqcmd changemaster
cls``, admin CHANGE_CLUSTER_MASTER_BROKER: broker/cluster/mastership.py), with two real
broker processes: the change record goes to the new master, both brokers save the new
imq.cluster.masterbroker, and the cluster's changes no longer need the old master."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.admintools.client import AdminClient, AdminError
from broker.launcher import free_port
from broker.protocol.types import DEST_QUEUE
from tests.cluster_procs import start_member, wait_linked

pytestmark = pytest.mark.timeout(180)


def _configure(tmp: Path, name: str, props: dict[str, str]) -> None:
    # Set in the instance's config.properties, not with -D: a master broker given on the
    # command line cannot move (it would come back at the next start), as with OpenMQ.
    path = tmp / name / "var" / "instances" / name / "props" / "config.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


async def _admin(b, action):
    admin = await AdminClient.open(b.host, b.portmapper_port)
    try:
        return await action(admin)
    finally:
        await admin.close()


def test_the_master_broker_moves_with_its_change_record(tmp_path: Path) -> None:
    pm_a, pm_b = free_port(), free_port()
    addr_a, addr_b = f"127.0.0.1:{pm_a}", f"127.0.0.1:{pm_b}"
    brokerlist = f"{addr_a},{addr_b}"
    for name in ("A", "B"):
        _configure(
            tmp_path,
            name,
            {
                "imq.cluster.masterbroker": addr_a,
                "imq.cluster.dynamicChangeMasterBrokerEnabled": "true",
            },
        )
    a = start_member(tmp_path / "A", brokerlist, pm_a, "A")
    b = None
    try:
        b = start_member(tmp_path / "B", brokerlist, pm_b, "B")
        wait_linked([a, b])
        asyncio.run(_admin(a, lambda c: c.create_destination("cm.before", DEST_QUEUE)))

        # Only the master broker can hand the role over; an old master that is not the
        # current one is refused; both as OpenMQ's brokers answer.
        with pytest.raises(AdminError) as refused:
            asyncio.run(_admin(b, lambda c: c.change_master_broker(addr_b)))
        assert refused.value.status == 405, refused.value
        with pytest.raises(AdminError) as mismatch:
            asyncio.run(_admin(a, lambda c: c.change_master_broker(addr_b, addr_b)))
        assert mismatch.value.status == 412, mismatch.value

        asyncio.run(_admin(a, lambda c: c.change_master_broker(addr_b)))

        for broker, name in ((a, "A"), (b, "B")):
            saved = (
                broker.varhome / "instances" / name / "props" / "config.properties"
            ).read_text()
            assert f"imq.cluster.masterbroker={addr_b}" in saved.replace("\\:", ":"), saved
        record = b.varhome / "instances" / "B" / "cluster" / "changerecord"
        assert b"cm.before" in record.read_bytes()
        assert "this broker is the master broker now" in b.log_text()

        # A is an ordinary member now: with it gone, B (the master) still records changes.
        a.stop()
        asyncio.run(_admin(b, lambda c: c.create_destination("cm.after", DEST_QUEUE)))
        assert b"cm.after" in record.read_bytes()
    finally:
        a.stop()
        if b is not None:
            b.stop()
