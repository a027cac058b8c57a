"""JMX's changing calls in process: getMBeanInfo's bytes against the stock broker's,
invoke run through the admin service's commands on a real (not started) broker, the
notification long poll, and refusals.  End to end with the JDK's client:
tests/interop/test_java_jmx_operations.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker.engine.jmx import JmxServer, JrmpSession, Run, Send, Wait
from broker.engine.jmx_mbeans import Registry
from broker.engine.jmx_stockinfo import info_object
from broker.protocol import jmxser
from broker.protocol.javaser import (
    JavaArray,
    JavaClass,
    ObjectStreamWriter,
    decode_object,
)
from broker.protocol.jrmp import ObjID, encode_call, encode_handshake
from broker.server.jmx_admin import JmxAdminPort

from .test_jmx_rmi import NEW_CLIENT, _ref, _returned, in_process_broker

if TYPE_CHECKING:
    from broker.server.broker import Broker

pytestmark = pytest.mark.fast

INVOKE = 1434350937885235744
SET_ATTRIBUTE = 6738606893952597516
ADD_LISTENERS = -5321691879380783377
FETCH = -5037523307973544478
GET_MBEAN_INFO = -7404813916326233354
D = "com.sun.messaging.jms.server:"
DM_CONFIG = D + "type=DestinationManager,subtype=Config"
DM_MONITOR = D + "type=DestinationManager,subtype=Monitor"
STOCK_INFO = Path(__file__).parent / "data" / "jmx_stock_destination_config_info.ser"

_MARSHALLED = JavaClass(
    "java.rmi.MarshalledObject",
    8988374069173025854,
    (("[", "objBytes", "[B"), ("[", "locBytes", "[B"), ("I", "hash", None)),
)
_OBJECTS = JavaClass("[Ljava.lang.Object;", -8012369246846506644, ())


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = in_process_broker(tmp_path / "var")
    try:
        yield b
    finally:
        b.executor.shutdown(wait=False)


def _marshalled(value: object) -> object:
    w = ObjectStreamWriter()
    w.value(value)
    return jmxser.JavaObject(_MARSHALLED, {"objBytes": bytes(w.out), "hash": 0})


def _login(srv: JmxServer) -> tuple[JrmpSession, ObjID]:
    s = JrmpSession(srv, "127.0.0.1", 4000)
    s.feed(encode_handshake("127.0.0.1", 0))
    (auth,) = s.feed(
        encode_call(srv.server_id, NEW_CLIENT, [jmxser.string_array(["admin", "admin"])])
    )
    (reply,) = s.auth_result(auth, True, "")  # type: ignore[arg-type]
    assert isinstance(reply, Send)
    return s, _ref(_returned(reply.data)[1])


def _strip(value: object) -> object:
    """A decoded MBeanInfo without its constructors (the stock broker lists one, whose
    parameter is a broker class; ours lists none)."""
    assert isinstance(value, dict)
    return {k: v for k, v in value.items() if k != "constructors"}


def test_mbean_info_is_the_stock_brokers() -> None:
    w = ObjectStreamWriter()
    w.value(info_object("Destination/Config"))
    ours = decode_object(bytes(w.out), generic=True)
    stock = decode_object(STOCK_INFO.read_bytes(), generic=True)
    assert _strip(ours) == _strip(stock)


def test_invoke_create_runs_the_admin_command(broker: Broker) -> None:
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)
    dm = jmxser.object_name(DM_CONFIG)
    args = _marshalled(JavaArray(_OBJECTS, ["q", "jmx.unit"]))
    sig = jmxser.string_array(["java.lang.String", "java.lang.String"])
    (run,) = s.feed(encode_call(conn, INVOKE, [dm, "create", args, sig, None]))
    assert isinstance(run, Run)
    port = JmxAdminPort(broker, "admin", "127.0.0.1:4000")
    value = asyncio.run(run.job(port))
    assert broker.router.lookup("jmx.unit", 1) is not None
    (done,) = s.run_result(run, value, None)
    assert isinstance(done, Send) and _returned(done.data) == (1, None)

    # The same again: the admin command refuses (409), as OpenMQ's MBean does.
    (again,) = s.feed(encode_call(conn, INVOKE, [dm, "create", args, sig, None]))
    assert isinstance(again, Run)
    try:
        asyncio.run(again.job(port))
    except Exception as exc:
        error: BaseException | None = exc
    else:
        error = None
    assert error is not None
    (refused,) = s.run_result(again, None, error)
    assert isinstance(refused, Send)
    assert _returned(refused.data) == (2, "javax.management.MBeanException")
    assert b"already exists" in refused.data

    nosuch = encode_call(conn, INVOKE, [dm, "noSuch", _marshalled(None), None, None])
    (unknown,) = s.feed(nosuch)
    assert isinstance(unknown, Send)
    assert _returned(unknown.data) == (2, "javax.management.RuntimeOperationsException")


def test_set_attribute_type_and_writability(broker: Broker) -> None:
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)
    cfg = jmxser.object_name(D + "type=Broker,subtype=Config")
    (ro,) = s.feed(
        encode_call(conn, SET_ATTRIBUTE, [cfg, _marshalled(jmxser.attribute("Version", "x")), None])
    )
    assert isinstance(ro, Send)
    assert _returned(ro.data) == (2, "javax.management.AttributeNotFoundException")
    (bad,) = s.feed(
        encode_call(conn, SET_ATTRIBUTE, [cfg, _marshalled(jmxser.attribute("Port", "x")), None])
    )
    assert isinstance(bad, Send)
    assert _returned(bad.data) == (2, "javax.management.InvalidAttributeValueException")


def test_fetch_waits_until_a_notification(broker: Broker) -> None:
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)
    names = JavaArray(
        JavaClass("[Ljavax.management.ObjectName;", 1262009912426809838, ()),
        [jmxser.object_name(DM_MONITOR)],
    )
    filters = JavaArray(
        JavaClass("[Ljava.rmi.MarshalledObject;", 8988374069173025854, ()), [_marshalled(None)]
    )
    (ids,) = s.feed(encode_call(conn, ADD_LISTENERS, [names, filters, None]))
    assert isinstance(ids, Send) and _returned(ids.data)[0] == 1
    (first,) = s.feed(encode_call(conn, FETCH, [-1, 10, 60_000]))
    assert isinstance(first, Send)  # sequence -1: where the buffer is, at once
    (wait,) = s.feed(encode_call(conn, FETCH, [0, 10, 60_000]))
    assert isinstance(wait, Wait) and wait.seconds == 60
    assert srv.publish(D + "type=Log,subtype=Monitor", "mq.log.level.INFO", "log", "x", 0) == []
    woken = srv.publish(
        DM_MONITOR, "mq.destination.create", "destination", None, 0, destName="a", destType="q"
    )
    assert woken == [s]
    (answer,) = s.wake()
    assert isinstance(answer, Send)
    kind, result = _returned(answer.data)
    assert kind == 1 and isinstance(result, dict)
    assert result["nextSequenceNumber"] == 1
    (targeted,) = result["targetedNotifications"]
    notif = targeted["notif"]
    assert notif["__class__"] == "com.sun.messaging.jms.management.server.DestinationNotification"
    assert (notif["type"], notif["destName"], notif["sequenceNumber"]) == (
        "mq.destination.create",
        "a",
        0,
    )
    assert s.fetch_timeout() == []  # answered: nothing waits any more


# Stock operations this broker cannot serve: imqcmd cannot do them here either
# (docs/reference/jmx.md, "What does not work yet").
UNSERVED: set[tuple[str, str]] = set()


def test_every_stock_operation_is_served() -> None:
    from broker.engine import jmx_operations, jmx_readops
    from broker.engine.jmx_stockinfo import kinds

    missing = {
        (key, op[0])
        for key, kind in kinds().items()
        for op in kind.operations
        if op[0] not in jmx_operations.OPERATIONS.get(key, {})
        and op[0] not in jmx_readops.READ_OPERATIONS.get(key, {})
    }
    assert missing == UNSERVED


def test_every_read_operation_answers(broker: Broker) -> None:
    """Each read-only operation of every MBean (a destination's too) answers a value of
    its declared type, with null arguments, on a broker with a destination."""
    from broker.engine import jmx_readops
    from broker.engine.jmx_stockinfo import kind_key, kinds

    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)
    (run,) = s.feed(
        encode_call(
            conn,
            INVOKE,
            [
                jmxser.object_name(DM_CONFIG),
                "create",
                _marshalled(JavaArray(_OBJECTS, ["q", "jmx.reads"])),
                jmxser.string_array(["java.lang.String", "java.lang.String"]),
                None,
            ],
        )
    )
    assert isinstance(run, Run)
    asyncio.run(run.job(JmxAdminPort(broker, "admin", "127.0.0.1:4000")))
    answered = set()
    for name, _kind, _key in Registry(broker).mbeans():
        key = kind_key(name)
        for op_name, _returns, _d, _impact, params in kinds()[key].operations:
            if op_name not in jmx_readops.READ_OPERATIONS.get(key, {}):
                continue
            args = _marshalled(JavaArray(_OBJECTS, [None] * len(params)))
            sig = jmxser.string_array([p[1] for p in params])
            target = jmxser.object_name(name.canonical)
            (reply,) = s.feed(encode_call(conn, INVOKE, [target, op_name, args, sig, None]))
            assert isinstance(reply, Send)
            kind_of_return, value = _returned(reply.data)
            assert kind_of_return == 1, (name.canonical, op_name, value)
            answered.add((key, op_name))
    # A broker that is not started has no connection, so no Connection MBean.
    expected = {
        (k, op)
        for k, ops in jmx_readops.READ_OPERATIONS.items()
        for op in ops
        if k != "Connection/Monitor"
    }
    assert answered == expected


def test_commit_of_an_unknown_transaction_is_refused(broker: Broker) -> None:
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)
    tm = jmxser.object_name(D + "type=TransactionManager,subtype=Config")
    args = _marshalled(JavaArray(_OBJECTS, ["12345"]))
    sig = jmxser.string_array(["java.lang.String"])
    (run,) = s.feed(encode_call(conn, INVOKE, [tm, "commit", args, sig, None]))
    assert isinstance(run, Run)
    port = JmxAdminPort(broker, "admin", "127.0.0.1:4000")
    try:
        asyncio.run(run.job(port))
    except Exception as exc:
        error: BaseException | None = exc
    else:
        error = None
    assert error is not None
    (refused,) = s.run_result(run, None, error)
    assert isinstance(refused, Send)
    assert _returned(refused.data) == (2, "javax.management.MBeanException")
    assert b"no transaction 12345" in refused.data


def test_events_become_notifications(broker: Broker) -> None:
    """Changes made through the admin commands (as imqcmd's) reach JMX as the stock
    broker's notifications, from the router's events (broker/server/jmx_events.py)."""
    from broker.engine.jmx_names import ObjectName
    from broker.protocol.admin_types import PAUSE, RESUME
    from broker.protocol.jtypes import JInt, JLong
    from broker.protocol.names import JMQ_DEST_TYPE, JMQ_DESTINATION, JMQ_PAUSE_TARGET
    from broker.server.jmx_events import JmxEvents

    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    _login(srv)  # a client connected: notifications are made
    told: list[tuple[str, str, dict[str, object]]] = []

    def collect(server, source, notif_type, kind, message, **fields) -> None:
        told.append((source, notif_type, fields))

    JmxEvents(broker, [srv], collect).attach()
    port = JmxAdminPort(broker, "admin", "127.0.0.1:4000")
    s, conn = _login(srv)
    args = _marshalled(JavaArray(_OBJECTS, ["q", "jmx.events"]))
    sig = jmxser.string_array(["java.lang.String", "java.lang.String"])
    (run,) = s.feed(
        encode_call(conn, INVOKE, [jmxser.object_name(DM_CONFIG), "create", args, sig, None])
    )
    assert isinstance(run, Run)
    asyncio.run(run.job(port))
    dest = {JMQ_DESTINATION: "jmx.events", JMQ_DEST_TYPE: JInt(1)}
    asyncio.run(port.command(PAUSE, {JMQ_PAUSE_TARGET: JMQ_DESTINATION, **dest}))
    asyncio.run(port.command(RESUME, {JMQ_PAUSE_TARGET: JMQ_DESTINATION, **dest}))
    target = D + 'type=Destination,subtype=Config,desttype=q,name="jmx.events"'
    (set_run,) = s.feed(
        encode_call(
            conn,
            SET_ATTRIBUTE,
            [
                jmxser.object_name(target),
                _marshalled(jmxser.attribute("MaxNumMsgs", JLong(5))),
                None,
            ],
        )
    )
    assert isinstance(set_run, Run)
    asyncio.run(set_run.job(port))
    types = [(dict(ObjectName.parse(src).keys)["type"], t) for src, t, _f in told]
    assert types == [
        ("DestinationManager", "mq.destination.create"),
        ("Destination", "mq.destination.pause"),
        ("DestinationManager", "mq.destination.pause"),
        ("Destination", "mq.destination.resume"),
        ("DestinationManager", "mq.destination.resume"),
        ("Destination", "jmx.attribute.change"),
    ]
    change = told[-1][2]
    assert change["attributeName"] == "MaxNumMsgs"
    assert (change["oldValue"], change["newValue"]) == (-1, 5)
    assert told[1][2]["pauseType"] == "ALL"


def test_memory_takeover_and_cluster_events_become_notifications(broker: Broker) -> None:
    """The memory state changing (here: imq.system.max_size made tiny, then unlimited
    again), HA takeovers and cluster members joining and leaving reach JMX as the stock
    broker's BrokerNotification and ClusterNotification, from their MBeans."""
    from broker.engine.jmx_names import ObjectName
    from broker.protocol import admin_requests as req
    from broker.server.jmx_events import JmxEvents

    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    _login(srv)
    told: list[tuple[str, str, str, dict[str, object]]] = []

    def collect(server, source, notif_type, kind, message, **fields) -> None:
        told.append((dict(ObjectName.parse(source).keys)["type"], notif_type, kind, fields))

    JmxEvents(broker, [srv], collect).attach()
    port = JmxAdminPort(broker, "admin", "127.0.0.1:4000")
    for size in ("1", "0"):
        r = req.update_broker_props({"imq.system.max_size": size})
        asyncio.run(port.command(r.type, r.props, r.body or b""))
    states = [
        (f["oldResourceState"], f["newResourceState"])
        for t, n, k, f in told
        if n == "mq.broker.resource.state.change" and t == "Broker" and k == "broker"
    ]
    assert states == [("GREEN ", "RED   "), ("RED   ", "GREEN ")]

    told.clear()
    events = broker.router.observers
    events.router_event("broker.takeover.start", {"failed": "b2", "id": "b1"})
    events.router_event("broker.takeover.complete", {"failed": "b2", "id": "b1"})
    assert [(t, n) for t, n, _k, _f in told] == [
        ("Broker", "mq.broker.takeover.start"),
        ("Cluster", "mq.broker.takeover.start"),
        ("Broker", "mq.broker.takeover.complete"),
        ("Cluster", "mq.broker.takeover.complete"),
    ]
    assert told[0][3]["failedBrokerID"] == "b2" and told[0][3]["brokerID"] == "b1"

    told.clear()
    peer = {"address": "hostb:7677", "instance": "b", "master": True}
    events.router_event("cluster.broker.join", peer)
    events.router_event("cluster.broker.down", peer)
    assert [(t, n, k) for t, n, k, _f in told] == [
        ("Cluster", "mq.cluster.broker.join", "cluster"),
        ("Broker", "mq.cluster.broker.join", "cluster"),
        ("Cluster", "mq.cluster.broker.down", "cluster"),
    ]
    assert told[0][3] == {
        "brokerAddress": "hostb:7677",
        "highlyAvailable": False,
        "isMasterBroker": True,
    }
    # Each kind serialises as OpenMQ's class (imq.jar's serialVersionUID and fields).
    note = jmxser.notification(
        "cluster",
        "mq.cluster.broker.join",
        D + "type=Cluster,subtype=Monitor",
        1,
        0,
        None,
        **told[0][3],
    )
    w = ObjectStreamWriter()
    w.value(note)
    decoded = decode_object(bytes(w.out), generic=True)
    assert decoded["brokerAddress"] == "hostb:7677" and decoded["isMasterBroker"] is True


def test_change_master_broker_answers_a_result_not_an_exception(broker: Broker) -> None:
    """Cluster changeMasterBroker runs CHANGE_CLUSTER_MASTER_BROKER; a refusal comes back,
    as from OpenMQ's MBean, as a ChangeMasterBrokerResult (Success false, the status and
    the reason with OpenMQ's status text), here imq.cluster.dynamicChangeMasterBrokerEnabled
    being false as by default."""
    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    s, conn = _login(srv)
    target = jmxser.object_name(D + "type=Cluster,subtype=Config")
    args = _marshalled(JavaArray(_OBJECTS, ["127.0.0.1:7676", "127.0.0.1:7677"]))
    sig = jmxser.string_array(["java.lang.String", "java.lang.String"])
    (run,) = s.feed(encode_call(conn, INVOKE, [target, "changeMasterBroker", args, sig, None]))
    assert isinstance(run, Run)
    value = asyncio.run(run.job(JmxAdminPort(broker, "admin", "127.0.0.1:4000")))
    (done,) = s.run_result(run, value, None)
    assert isinstance(done, Send)
    assert b"ChangeMasterBrokerResult" in done.data
    w = ObjectStreamWriter()
    w.value(value)
    result = decode_object(bytes(w.out), generic=True)
    assert result["__class__"] == "javax.management.openmbean.CompositeDataSupport"
    # A TreeMap's entries after its size block: name, value, name, value...
    flat = result["contents"]["__custom__java.util.TreeMap"][1:]
    items = dict(zip(flat[::2], flat[1::2], strict=True))
    assert items["Success"] is False and items["StatusCode"] == 405
    assert str(items["DetailMessage"]).endswith("[NOT_ALLOWED(405)]")
    assert "imq.cluster.dynamicChangeMasterBrokerEnabled" in str(items["DetailMessage"])


def test_attribute_changes_reread_only_what_the_event_names(broker: Broker) -> None:
    """A destination created only joins what is compared (no re-read of every MBean for
    each one made, which cost seconds per hundred destinations), one destroyed leaves
    it, and a change of it is still told."""
    from broker.engine.jmx_names import ObjectName
    from broker.protocol import admin_requests as req
    from broker.server.jmx_events import JmxEvents

    srv = JmxServer(Registry(broker), broker, "127.0.0.1", 9999)
    _login(srv)
    told: list[tuple[str, str, dict[str, object]]] = []

    def collect(server, source, notif_type, kind, message, **fields) -> None:
        told.append((source, notif_type, fields))

    events = JmxEvents(broker, [srv], collect)
    events.attach()
    port = JmxAdminPort(broker, "admin", "127.0.0.1:4000")

    def run(r: req.AdminRequest) -> None:
        asyncio.run(port.command(r.type, r.props, r.body or b""))

    dest = ObjectName.parse(D + 'type=Destination,subtype=Config,desttype=q,name="jmx.few"')
    run(req.create_destination("jmx.few", 1))
    assert dest.canonical in events._config
    run(req.update_destination("jmx.few", 1, {"maxNumProducers": 3}))
    changes = [
        (ObjectName.parse(src).canonical, f["attributeName"], f["newValue"])
        for src, t, f in told
        if t == "jmx.attribute.change"
    ]
    assert changes == [(dest.canonical, "MaxNumProducers", 3)]
    run(req.destroy_destination("jmx.few", 1))
    assert dest.canonical not in events._config
