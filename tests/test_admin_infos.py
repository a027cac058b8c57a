"""What the stock OpenMQ admin tools read from our admin replies, checked against OpenMQ
6.9's handlers (GetDestinationsHandler, GetBrokerPropsHandler) and imqcmd's CmdRunner:
the destination type bits (imqcmd hides ``DestType.isTemporary(info.type)`` destinations
unless ``-tmp``), and every broker property ``imqcmd query bkr`` prints.  Real broker
processes; replies decoded with our reader; our imqcmd run as a subprocess.
"""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest

from broker.admintools.actions.destinations import _destination
from broker.admintools.client import AdminClient
from openmq_client import AckMode, Queue, TextMessage, connect
from tests.manage_fork import run_manage

pytestmark = pytest.mark.timeout(180)

# com.sun.messaging.jmq.util.DestType
QUEUE, TOPIC, TEMP, AUTO, DMQ = 0x1, 0x2, 0x10, 0x20, 0x1000


def run(coro):
    return asyncio.run(coro)


def by_name(infos: list[dict]) -> dict[str, dict]:
    return {i["name"]: i for i in infos}


def test_destination_info_type_carries_openmq_bits(broker):
    """type = the full type less INTERNAL/AUTO/ADMIN: TEMP and DMQ stay in it."""

    async def go():
        conn = await connect(broker.host, broker.portmapper_port)
        admin = await AdminClient.open(broker.host, broker.portmapper_port)
        try:
            sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
            tq = await sess.create_temporary_queue()
            tt = await sess.create_temporary_topic()
            prod = await sess.create_producer(Queue("infosAutoQ"))
            await prod.send(TextMessage("x"))
            infos = by_name(await admin.destinations())
            return infos, tq.name, tt.name
        finally:
            await admin.close()
            await conn.close()

    infos, tq, tt = run(go())
    assert infos[tq]["type"] == QUEUE | TEMP and infos[tq]["fulltype"] == QUEUE | TEMP
    assert infos[tt]["type"] == TOPIC | TEMP
    # The admin tool's own reply queue is a temporary queue too.
    admin_replies = [n for n, i in infos.items() if i["type"] & TEMP and n not in (tq, tt)]
    assert admin_replies and all(infos[n]["type"] & QUEUE for n in admin_replies)
    assert infos["mq.sys.dmq"]["type"] == QUEUE | DMQ
    auto = infos["infosAutoQ"]
    assert auto["type"] == QUEUE and auto["fulltype"] == QUEUE | AUTO
    # The action layer (portal, REST) reads the same reply: temporaries and the DMQ flagged.
    rows = {i["name"]: _destination(i) for i in infos.values()}
    assert rows[tq]["temporary"] and rows[tq]["type"] == "queue"
    assert rows["mq.sys.dmq"]["dmq"] and not rows["mq.sys.dmq"]["temporary"]
    assert not rows["infosAutoQ"]["temporary"] and rows["infosAutoQ"]["auto_created"]


def test_broker_props_have_what_query_bkr_reads(broker):
    async def go():
        admin = await AdminClient.open(broker.host, broker.portmapper_port)
        try:
            return await admin.broker_props()
        finally:
            await admin.close()

    props = run(go())
    assert props["imq.product.version"] == "6.9.0"
    assert (props["imq.product.major"], props["imq.product.minor"]) == ("6", "9")
    assert props["imq.product.name"] == "openmq-py"
    assert props["imq.build.number"] == importlib.metadata.version("openmq-py")
    assert props["imq.embedded"] == "false"
    assert props["imq.instancename"] == broker.instance
    assert props[".level"] == "INFO"
    assert props["java.util.logging.FileHandler.limit"] == "-1"  # our default: no size limit
    assert props["imq.log.file.rolloversecs"] == "604800"
    assert props["imq.cluster.ha"] == "false"
    # As OpenMQ's: no cluster configured, and the broker alone is the active list.
    assert props["imq.cluster.brokerlist"] == ""
    assert props["imq.cluster.brokerlist.active"] == f"mq://127.0.0.1:{broker.portmapper_port}/"
    assert props["imq.autocreate.destination.useDMQ"] == "true"
    # Globals.getBrokerID() is null for a stand-alone broker without imq.brokerid.
    assert "imq.brokerid" not in props


def imqcmd(b, *args: str) -> str:
    cmd = ["imqcmd", *args]
    cmd += ["-b", f"127.0.0.1:{b.portmapper_port}", "-u", "admin", "-f", "-rtm", "10"]
    r = run_manage(cmd, env=b.extra["env"], timeout=90, input="admin\n")
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def value(out: str, label: str) -> str:
    found = [ln[len(label) :].strip() for ln in out.splitlines() if ln.startswith(label + "  ")]
    found += [""] if any(ln == label for ln in out.splitlines()) else []
    assert found, f"no {label!r} in:\n{out}"
    return found[-1]


def test_imqcmd_query_bkr_fills_openmq_fields(own_broker, tmp_path):
    b = own_broker("imq.brokerid=infosb1", "imq.log.file.rolloverbytes=2m")
    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")
    out = imqcmd(b, "query", "bkr", "-passfile", str(passfile))
    assert value(out, "Version") == "6.9.0"
    assert value(out, "Broker ID") == "infosb1"
    assert value(out, "Broker is Embedded") == "false"
    assert value(out, "Log Level") == "INFO"
    assert value(out, "Log Rollover Size (bytes)") == str(2 * 1024 * 1024)
    assert value(out, "Log Rollover Interval (seconds)") == "604800"
    assert value(out, "Cluster is Highly Available") == "false"
    assert value(out, "Auto Created Destination useDMQ") == "true"
    assert value(out, "Product") == f"openmq-py {importlib.metadata.version('openmq-py')}"


def test_imqcmd_list_dst_hides_temporaries_unless_tmp(broker, tmp_path):
    passfile = tmp_path / "passfile"
    passfile.write_text("imq.imqcmd.password=admin\n")

    async def hold_temporary(ready: asyncio.Event, done: asyncio.Event) -> None:
        conn = await connect(broker.host, broker.portmapper_port)
        try:
            sess = await conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
            hold_temporary.name = (await sess.create_temporary_queue()).name  # type: ignore[attr-defined]
            ready.set()
            await done.wait()
        finally:
            await conn.close()

    async def go():
        ready, done = asyncio.Event(), asyncio.Event()
        task = asyncio.create_task(hold_temporary(ready, done))
        await ready.wait()
        loop = asyncio.get_running_loop()
        try:
            plain = await loop.run_in_executor(
                None, lambda: imqcmd(broker, "list", "dst", "-passfile", str(passfile))
            )
            tmp = await loop.run_in_executor(
                None, lambda: imqcmd(broker, "list", "dst", "-tmp", "-passfile", str(passfile))
            )
        finally:
            done.set()
            await task
        return plain, tmp

    plain, tmp = run(go())
    name = hold_temporary.name  # type: ignore[attr-defined]
    assert name not in plain and "temporary_destination://" not in plain
    rows = [ln for ln in tmp.splitlines() if ln.startswith(name + " ")]
    assert len(rows) == 1 and rows[0].split()[1:3] == ["Queue", "(temporary)"], tmp
    # The DMQ is listed as a plain queue.
    dmq = [ln.split() for ln in plain.splitlines() if ln.startswith("mq.sys.dmq ")]
    assert dmq and dmq[0][1:3] == ["Queue", "RUNNING"], plain
