"""The JMX MBean catalogue (broker/engine/jmx_mbeans.py, jmx_info.py) in process, held
against what the stock broker listed (tests/interop/data/jmx_stock_catalogue.txt,
captured with JmxCatalog.java): the same MBean names when idle, the same attribute
names and declared Java types for each kind.  The end-to-end comparison with the JDK's
client is tests/interop/test_java_jmx_catalog.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker.engine import jmx_info
from broker.engine.jmx_mbeans import KINDS, Registry, quote, unquote
from broker.engine.jmx_names import ObjectName
from broker.protocol import jmxser
from broker.protocol.javaser import JavaArray, JavaObject, ObjectStreamWriter, decode_object
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.types import DEST_QUEUE, DEST_TOPIC

from .test_jmx_rmi import in_process_broker

if TYPE_CHECKING:
    from broker.server.broker import Broker

pytestmark = pytest.mark.fast

STOCK = Path(__file__).resolve().parent / "interop" / "data" / "jmx_stock_catalogue.txt"
DOMAIN = "com.sun.messaging.jms.server"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = in_process_broker(tmp_path / "var")
    try:
        yield b
    finally:
        b.executor.shutdown(wait=False)


def _stock() -> tuple[set[str], dict[str, dict[str, str]]]:
    """The stock broker's idle MBean names, and its attributes by "Type/Subtype"."""
    names: set[str] = set()
    kinds: dict[str, dict[str, str]] = {}
    for line in STOCK.read_text().splitlines():
        if line.startswith("mbean idle "):
            names.add(line.split(" ", 2)[2])
        elif line.startswith("attr "):
            _p, _phase, name, attr, declared, _rest = line.split(" ", 5)
            keys = dict(kv.split("=", 1) for kv in name.split(":", 1)[1].split(","))
            kinds.setdefault(f"{keys['type']}/{keys['subtype']}", {})[attr] = declared
    return names, kinds


def _java_class(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "java.lang.Boolean"
    if isinstance(value, JLong):
        return "java.lang.Long"
    if isinstance(value, JInt):
        return "java.lang.Integer"
    if isinstance(value, str):
        return "java.lang.String"
    return type(value).__name__


def test_idle_names_are_the_stock_brokers(broker: Broker) -> None:
    stock_names, _ = _stock()
    ours = {n.canonical for n in Registry(broker).query(None)}
    assert ours == stock_names
    assert len(Registry(broker)) == 37


def test_every_kind_has_the_stock_attributes_and_types(broker: Broker) -> None:
    _, stock = _stock()
    # Log Monitor has no attribute, so the stock listing never names it.
    served = {f"{t}/{s}": k for (t, s), k in KINDS.items() if k.attrs}
    assert set(served) == set(stock)
    for kind_name, attrs in stock.items():
        kind = served[kind_name]
        assert {a.name: a.type for a in kind.attrs} == attrs, kind_name


def test_every_attribute_reads_as_its_declared_type(broker: Broker) -> None:
    reg = Registry(broker)
    for name in reg.query(None):
        mbean = reg.get(name)
        assert mbean is not None, name.canonical
        for attr in mbean.kind.attrs:
            value = mbean.attributes[attr.name](broker)
            if attr.type == jmxser.COMPOSITE_DATA:
                assert value is None or value.cls.name.endswith("CompositeDataSupport")
                continue
            assert _java_class(value) in ("null", attr.type), (name.canonical, attr.name)


def test_destinations_connections_and_their_names(broker: Broker) -> None:
    from broker.engine import ConnectionEngine
    from broker.server.services import Service

    conn = ConnectionEngine(broker, Service("jms", "NORMAL", "tcp", None, 0, "basic", -1))
    conn.peer = "127.0.0.1:5555"
    conn.user = "guest"
    broker.connections[conn.id] = conn
    session = broker.router.create_session(conn, 1)
    conn.sessions[session.id] = session
    odd = 'we"ird?na\\me'
    broker.router.create_destination(odd, DEST_QUEUE)
    broker.router.create_destination("t1", DEST_TOPIC)
    broker.router.add_consumer(session, odd, DEST_QUEUE)
    broker.router.add_producer(session, odd, DEST_QUEUE)
    reg = Registry(broker)
    names = {n.canonical for n in reg.query(None)}
    assert len(names) == 37 + 4 + 2
    monitor = ObjectName.parse(
        f"{DOMAIN}:type=Destination,subtype=Monitor,desttype=q,name={quote(odd)}"
    )
    assert monitor.canonical in names
    mbean = reg.get(monitor)
    assert mbean is not None
    assert mbean.attributes["Name"](broker) == odd
    assert mbean.attributes["NumConsumers"](broker) == 1
    assert mbean.attributes["NumProducers"](broker) == 1
    assert (
        reg.get(
            ObjectName.parse(
                f"{DOMAIN}:type=Destination,subtype=Monitor,desttype=t,name={quote(odd)}"
            )
        )
        is None
    )
    cxn = reg.get(ObjectName.parse(f"{DOMAIN}:type=Connection,subtype=Monitor,id={conn.id}"))
    assert cxn is not None
    assert cxn.attributes["User"](broker) == "guest"
    assert cxn.attributes["NumConsumers"](broker) == 1
    assert cxn.attributes["NumProducers"](broker) == 1
    jms = reg.get(ObjectName.parse(f"{DOMAIN}:type=Service,subtype=Monitor,name=jms"))
    assert jms is not None
    broker.services.append(conn.service)
    conn.service.connections.add(conn)
    assert jms.attributes["NumProducers"](broker) == 1
    assert jms.attributes["NumConsumers"](broker) == 1
    assert cxn.attributes["Host"](broker) == "127.0.0.1"
    assert cxn.attributes["Port"](broker) == 5555
    consumers = reg.get(ObjectName.parse(f"{DOMAIN}:type=ConsumerManager,subtype=Monitor"))
    assert consumers is not None and consumers.attributes["NumConsumers"](broker) == 1
    assert reg.get(ObjectName.parse(f"{DOMAIN}:type=Connection,subtype=Monitor,id=1")) is None
    assert reg.get(ObjectName.parse(f"{DOMAIN}:type=Broker,subtype=Config,x=1")) is None
    assert reg.get(ObjectName.parse(f"{DOMAIN}:type=Service,subtype=Config,name=nope")) is None

    # The managers' info operations' CompositeData, as Java writes and reads them.
    infos = jmx_info.consumer_infos(broker) + jmx_info.producer_infos(broker)
    assert jmx_info.consumer_ids(broker) == [str(c.id) for c in session.consumers.values()]
    w = ObjectStreamWriter()
    w.value(jmxser.composite_array(infos))
    decoded = decode_object(bytes(w.out), generic=True)
    assert isinstance(decoded, list) and len(decoded) == 2
    assert jmx_info.consumer_info(broker, "12345") is None


def test_object_name_quoting() -> None:
    for text in ("plain", 'a"b', "a*b?c", "back\\slash", "new\nline"):
        assert unquote(quote(text)) == text
    assert quote('a"b') == '"a\\"b"'
    assert unquote("unquoted") is None


def _contents(info: object) -> dict[str, object]:
    """A CompositeData's items by name (its contents TreeMap's entries)."""
    assert isinstance(info, JavaObject)
    tree = info.values["contents"]
    assert isinstance(tree, JavaObject) and tree.custom is not None
    _size, *flat = next(iter(tree.custom.values()))
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def test_readers_tell_a_client_connection_from_another_brokers(broker: Broker) -> None:
    """A consumer, producer or transaction on a client connection shows its host,
    service and user; one whose link is another broker's (the cluster's RemoteLinkRef)
    shows none, and a queue's consumer IDs are those of its local consumers only."""
    from broker.cluster.remote_delivery import RemoteLinkRef
    from broker.core.transaction_record import Transaction
    from broker.engine import ConnectionEngine, jmx_readops
    from broker.server.services import Service

    from .test_router_plugins import RemoteConsumer

    conn = ConnectionEngine(broker, Service("jms", "NORMAL", "tcp", None, 0, "basic", -1))
    conn.peer = "127.0.0.1:5555"
    conn.user = "guest"
    conn.client_id = "cid"
    broker.connections[conn.id] = conn
    session = broker.router.create_session(conn, 1)
    conn.sessions[session.id] = session
    broker.router.create_destination("q", DEST_QUEUE)
    local = broker.router.add_consumer(session, "q", DEST_QUEUE)
    prod = broker.router.add_producer(session, "q", DEST_QUEUE)
    for info in (
        jmx_info.consumer_info(broker, str(local.id)),
        jmx_info.producer_info(broker, str(prod.id)),
    ):
        values = _contents(info)
        assert (values["Host"], values["ServiceName"], values["User"]) == (
            "127.0.0.1",
            "jms",
            "guest",
        )
    assert _contents(jmx_info.consumer_info(broker, str(local.id)))["ClientID"] == "cid"

    dest = broker.router.queues["q"]
    other = RemoteConsumer(RemoteLinkRef("elsewhere"), credit=1)  # type: ignore[arg-type]
    assert dest.attach(other)  # type: ignore[arg-type]
    active = jmx_readops.DESTINATION_MONITOR["getActiveConsumerIDs"](broker, dest, [])
    assert isinstance(active, JavaArray) and list(active.items) == [str(local.id)]

    for link, shown in ((conn, "guest@127.0.0.1:5555"), (RemoteLinkRef(None), "@"), (None, None)):
        txn = Transaction(1, None, link=link)
        assert _contents(jmx_readops._transaction(txn))["ConnectionString"] == shown
