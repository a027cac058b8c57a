"""Connection-level behaviour: timeouts, broker GOODBYE and PING, the small requests,
destination verification and temporary destinations, and the port mapper."""

from __future__ import annotations

import socket
import struct

from broker.launcher import read_portmapper
from broker.protocol.javaser import decode_hashtable
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.packet import build_packet
from broker.protocol.portmapper import parse_table
from broker.protocol.types import FLAG_A, PacketType

from .wire import Peer, control, login, vector


def test_portmapper_lists_real_service_ports(broker):
    data = read_portmapper(broker.host, broker.portmapper_port)
    table = parse_table(data)
    assert table.instance == broker.instance and table.packet_version == "301"
    assert table.find("NORMAL").port == broker.jms_port
    assert table.find("ADMIN").port == broker.admin_port
    assert table.services[0].type == "PORTMAPPER"
    assert table.services[0].port == broker.portmapper_port


def test_portmapper_answers_clients_that_send_nothing(broker):
    # 2.0-era clients never wrote a version line: the table comes after a short wait.
    with socket.create_connection((broker.host, broker.portmapper_port), timeout=5) as s:
        data = s.recv(4096)
    assert data.startswith(b"101 ")


def test_authentication_timeout_closes_connection(own_broker):
    b = own_broker("imq.authentication.client.response.timeout=1")
    peer = Peer(b.host, b.jms_port)
    peer.send(vector("hello.hex"))
    peer.expect(PacketType.HELLO_REPLY)
    peer.expect(PacketType.AUTHENTICATE_REQUEST)
    goodbye = peer.expect(PacketType.GOODBYE)
    assert "authentication not completed" in goodbye.properties["JMQGoodbyeReasonString"]
    assert peer.closed_by_peer()


def test_broker_says_goodbye_on_shutdown(own_broker):
    b = own_broker()
    peer = login(b.host, b.jms_port)
    b.stop()
    goodbye = peer.expect(PacketType.GOODBYE)
    assert goodbye.properties["JMQGoodbyeReason"] == 1  # SHUTDOWN_BKR
    assert type(goodbye.properties["JMQGoodbyeReason"]) is JInt
    assert not goodbye.flags & FLAG_A
    assert peer.closed_by_peer()


def test_broker_pings_idle_connections(own_broker):
    b = own_broker("imq.ping.interval=1")
    peer = login(b.host, b.jms_port)
    ping = peer.expect(PacketType.PING)
    assert ping.flags & FLAG_A  # protocol level 500 >= 364: a reply is wanted
    peer.send(
        build_packet(
            PacketType.PING_REPLY, props={"JMQStatus": JInt(200)}, consumer_id=ping.consumer_id
        )
    )
    # Still served afterwards.
    peer.request(control(PacketType.PING, 5), PacketType.PING_REPLY)


def test_client_ping_without_reply_flag_gets_nothing(broker):
    peer = login(broker.host, broker.jms_port)
    peer.send(build_packet(PacketType.PING))
    reply = peer.request(control(PacketType.GET_LICENSE, 6), PacketType.GET_LICENSE_REPLY)
    assert reply.properties["JMQLicense"]


def test_generate_uid(broker):
    peer = login(broker.host, broker.jms_port)
    reply = peer.request(
        control(PacketType.GENERATE_UID, 3, JMQQuantity=JInt(5)), PacketType.GENERATE_UID_REPLY
    )
    assert reply.properties["JMQQuantity"] == 5
    ids = struct.unpack(">5q", reply.body)
    assert len(set(ids)) == 5 and all(i > 0 for i in ids)
    peer.request(
        control(PacketType.GENERATE_UID, 4, JMQQuantity=JInt(0)),
        PacketType.GENERATE_UID_REPLY,
        status=400,
    )


def test_info_request(broker):
    peer = login(broker.host, broker.jms_port)
    peer.send(
        build_packet(PacketType.INFO_REQUEST, props={"JMQRequestType": JInt(2)}, consumer_id=7)
    )
    info = peer.expect(PacketType.INFO)
    assert info.properties["JMQRequestType"] == 2
    body = decode_hashtable(info.body)
    assert body["JMQBrokerName"] == broker.instance


def test_verify_destination(broker):
    peer = login(broker.host, broker.jms_port)
    reply = peer.request(
        control(PacketType.VERIFY_DESTINATION, 3, JMQDestination="nope.q", JMQDestType=JInt(1)),
        PacketType.VERIFY_DESTINATION_REPLY,
        404,
    )
    assert reply.properties["JMQCanCreate"] is True
    peer.request(
        control(PacketType.CREATE_DESTINATION, 4, JMQDestination="nope.q", JMQDestType=JInt(1)),
        PacketType.CREATE_DESTINATION_REPLY,
    )
    reply = peer.request(
        control(PacketType.VERIFY_DESTINATION, 5, JMQDestination="nope.q", JMQDestType=JInt(1)),
        PacketType.VERIFY_DESTINATION_REPLY,
    )
    assert reply.properties["JMQDestType"] & 1
    bad = peer.request(
        control(
            PacketType.VERIFY_DESTINATION,
            6,
            JMQDestination="nope.q",
            JMQDestType=JInt(1),
            JMQSelector="a = ",
        ),
        PacketType.VERIFY_DESTINATION_REPLY,
        400,
    )
    assert "selector" in bad.properties["JMQReason"]


def test_autocreate_disabled(own_broker):
    b = own_broker("imq.autocreate.queue=false")
    peer = login(b.host, b.jms_port)
    reply = peer.request(
        control(PacketType.VERIFY_DESTINATION, 3, JMQDestination="x", JMQDestType=JInt(1)),
        PacketType.VERIFY_DESTINATION_REPLY,
        404,
    )
    assert reply.properties["JMQCanCreate"] is False
    peer.request(
        control(PacketType.CREATE_DESTINATION, 4, JMQDestination="x", JMQDestType=JInt(1)),
        PacketType.CREATE_DESTINATION_REPLY,
        404,
    )
    # Topics are still allowed.
    peer.request(
        control(PacketType.CREATE_DESTINATION, 5, JMQDestination="x", JMQDestType=JInt(2)),
        PacketType.CREATE_DESTINATION_REPLY,
    )


def test_temporary_queue_belongs_to_its_connection(broker):
    name = "temporary_destination://queue/127.0.0.1/1/1"
    owner = login(broker.host, broker.jms_port)
    owner.request(
        control(PacketType.CREATE_DESTINATION, 3, JMQDestination=name, JMQDestType=JInt(0x11)),
        PacketType.CREATE_DESTINATION_REPLY,
    )
    other = login(broker.host, broker.jms_port)
    sid = other.request(
        control(PacketType.CREATE_SESSION, 3, JMQAckMode=JInt(1)), PacketType.CREATE_SESSION_REPLY
    ).properties["JMQSessionID"]
    # Another connection may send to it (reply-to) but not consume from it.
    other.request(
        control(
            PacketType.ADD_PRODUCER,
            4,
            JMQDestination=name,
            JMQDestType=JInt(0x11),
            JMQSessionID=JLong(sid),
        ),
        PacketType.ADD_PRODUCER_REPLY,
    )
    other.request(
        control(
            PacketType.ADD_CONSUMER,
            5,
            JMQDestination=name,
            JMQDestType=JInt(0x11),
            JMQSessionID=JLong(sid),
        ),
        PacketType.ADD_CONSUMER_REPLY,
        405,
    )
    # When the owner goes, so does the temporary queue.
    owner.request(
        control(PacketType.GOODBYE, 9, JMQConnectionID=JLong(1)), PacketType.GOODBYE_REPLY
    )
    assert owner.closed_by_peer()
    other.request(
        control(PacketType.VERIFY_DESTINATION, 6, JMQDestination=name, JMQDestType=JInt(0x11)),
        PacketType.VERIFY_DESTINATION_REPLY,
        404,
    )


def test_hello_twice_is_an_error(broker):
    peer = login(broker.host, broker.jms_port)
    peer.send(vector("hello.hex"))
    assert peer.expect(PacketType.HELLO_REPLY).properties["JMQStatus"] == 500


def test_unknown_ids_get_not_found(broker):
    peer = login(broker.host, broker.jms_port)
    peer.request(
        control(PacketType.DESTROY_SESSION, 3, JMQSessionID=JLong(12345)),
        PacketType.DESTROY_SESSION_REPLY,
        404,
    )
    peer.request(
        control(PacketType.DELETE_CONSUMER, 4, JMQConsumerID=JLong(12345)),
        PacketType.DELETE_CONSUMER_REPLY,
        404,
    )
    peer.request(
        control(PacketType.DELETE_PRODUCER, 5, JMQProducerID=JLong(12345)),
        PacketType.DELETE_PRODUCER_REPLY,
        404,
    )
    peer.request(
        control(
            PacketType.ADD_PRODUCER,
            6,
            JMQDestination="q",
            JMQDestType=JInt(1),
            JMQSessionID=JLong(12345),
        ),
        PacketType.ADD_PRODUCER_REPLY,
        404,
    )
    peer.request(
        control(PacketType.COMMIT_TRANSACTION, 7, JMQTransactionID=JLong(12345)),
        PacketType.COMMIT_TRANSACTION_REPLY,
        404,
    )
    peer.request(control(PacketType.ACKNOWLEDGE, 8), PacketType.ACKNOWLEDGE_REPLY, 400)
    # Names no transaction at all (neither JMQTransactionID nor an Xid body).
    peer.request(
        control(PacketType.PREPARE_TRANSACTION, 9), PacketType.PREPARE_TRANSACTION_REPLY, 400
    )
