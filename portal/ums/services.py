"""The UMS services as actions: what the /simple and /xml views (and the demo page) call.

Messaging: login, send, receive, commit, rollback, close (:func:`perform`).  Read-only
GET services: getBrokerInfo, getConfiguration, debug, ping (:func:`read_only`).  Errors
are :class:`UmsError` with the HTTP status the gateway answers and a readable reason.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from xml.sax.saxutils import escape, quoteattr

from broker.admintools.client import AdminClient, AdminError
from broker.protocol.types import DEST_TEMP, DEST_TOPIC
from openmq_client import (
    BrokerUnreachableException,
    BytesMessage,
    InvalidDestinationException,
    JMSException,
    JMSSecurityException,
    MapMessage,
    Message,
    ObjectMessage,
    ResourceAllocationException,
    StreamMessage,
    TextMessage,
    TransactionRolledBackException,
    connect,
)

from .config import UmsConfig
from .sessions import Gateway, LoginRefused, SidLost, UnknownSid, destination, gateway

log = logging.getLogger("portal.ums")

MOM = "openmq"


class UmsError(Exception):
    """A request the gateway refuses or could not carry out."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class UmsRequest:
    """One messaging request, from a query string or a SOAP Service element."""

    service: str
    sid: str | None = None
    destination: str | None = None
    domain: str = "queue"
    user: str | None = None
    password: str | None = None
    timeout_ms: int | None = None
    transacted: bool = False
    text: str | None = None
    data: bytes | None = None
    properties: dict[str, object] = field(default_factory=dict)

    @property
    def topic(self) -> bool:
        return self.domain == "topic"


@dataclass
class UmsReply:
    """The outcome: ``status`` 200, or 404 for a receive that found nothing."""

    service: str
    status: int = 200
    destination: str | None = None
    domain: str | None = None
    sid: str | None = None
    text: str | None = None
    data: bytes | None = None
    content_type: str | None = None
    properties: dict[str, object] = field(default_factory=dict)


def parse_bool(text: str | None) -> bool:
    return (text or "").strip().lower() in ("true", "1")


def build_request(fields: dict[str, str]) -> UmsRequest:
    """A request from query-string fields (or Service attributes), the seed's defaults."""
    service = fields.get("service") or ""
    domain = fields.get("domain") or "queue"
    if domain not in ("queue", "topic"):
        raise UmsError(400, f"domain must be queue or topic, not {domain!r}")
    timeout = fields.get("timeout")
    timeout_ms = None
    if timeout not in (None, ""):
        try:
            timeout_ms = int(timeout)
        except ValueError as exc:
            raise UmsError(400, f"timeout is not a number of milliseconds: {timeout!r}") from exc
        if timeout_ms < 0:
            raise UmsError(400, "timeout must not be negative")
    return UmsRequest(
        service=service,
        sid=fields.get("sid") or None,
        destination=fields.get("destination") or None,
        domain=domain,
        user=fields.get("user"),
        password=fields.get("password"),
        timeout_ms=timeout_ms,
        transacted=parse_bool(fields.get("transacted")),
    )


def jms_error(exc: JMSException, config: UmsConfig) -> UmsError:
    """The HTTP status of a broker-side failure."""
    if isinstance(exc, JMSSecurityException):
        if exc.status == 403:
            return UmsError(403, f"not authorized: {exc}")
        return UmsError(401, f"authentication failed: {exc}")
    if isinstance(exc, InvalidDestinationException):
        return UmsError(400, f"no such destination: {exc}")
    if isinstance(exc, ResourceAllocationException):
        return UmsError(503, f"broker resource limit: {exc}")
    if isinstance(exc, TransactionRolledBackException):
        return UmsError(409, f"transaction rolled back: {exc}")
    if isinstance(exc, BrokerUnreachableException) or (
        exc.status is None and "connect" in str(exc)
    ):
        return unreachable(config, exc)
    return UmsError(500, str(exc))


def unreachable(config: UmsConfig, exc: Exception) -> UmsError:
    """503: the broker cannot be reached now (the gateway connects again by itself on
    the next request once it is back)."""
    return UmsError(
        503, f"the broker at {config.broker_address} is not reachable; try again later ({exc})"
    )


def sid_lost(sid: str, service: str = "") -> UmsError:
    """410 for a sid whose session went with its broker connection."""
    doubt = (
        " (whether this commit reached the broker before the connection was lost is unknown)"
        if service == "commit"
        else ""
    )
    return UmsError(
        410,
        f"sid {sid} is gone: its broker connection was lost (the broker stopped or "
        "restarted), so its session ended and an uncommitted transaction was rolled back"
        f"{doubt}; log in again",
    )


def _need_destination(req: UmsRequest) -> str:
    if not req.destination:
        raise UmsError(400, f"{req.service} needs a destination")
    return req.destination


def _client(gw: Gateway, sid: str):  # noqa: ANN202 - UmsClient
    try:
        return gw.client(sid)
    except SidLost as exc:
        raise sid_lost(sid) from exc
    except UnknownSid as exc:
        raise UmsError(
            410, f"sid {sid} is not known here (closed, expired or never issued)"
        ) from exc


def _message(req: UmsRequest) -> Message:
    if req.data is not None:
        return BytesMessage(req.data, properties=req.properties or None)
    return TextMessage(req.text if req.text is not None else "", properties=req.properties or None)


def message_payload(msg: Message) -> tuple[str | None, bytes | None, str]:
    """(text, data, content type) of a received message for an HTTP body."""
    if isinstance(msg, TextMessage):
        return msg.text or "", None, "text/plain;charset=UTF-8"
    if isinstance(msg, (BytesMessage, ObjectMessage)):
        return None, msg.data or b"", "application/octet-stream"
    if isinstance(msg, (MapMessage, StreamMessage)):
        return json.dumps(msg.body, default=repr), None, "application/json;charset=UTF-8"
    return "", None, "text/plain;charset=UTF-8"


async def perform(req: UmsRequest, gw: Gateway | None = None) -> UmsReply:
    """Carry out one messaging service."""
    gw = gw or gateway()
    handler = _HANDLERS.get(req.service)
    if handler is None:
        raise UmsError(400, f"unknown service {req.service!r}: one of {', '.join(_HANDLERS)}")
    try:
        return await handler(gw, req)
    except LoginRefused as exc:
        raise UmsError(401, f"authentication failed: {exc}") from exc
    except BrokerUnreachableException as exc:
        log.debug("UMS %s: the broker is not reachable: %s", req.service, exc)
        gw.note_unreachable(exc)
        if gw.lost_connection(req.sid):
            raise sid_lost(req.sid or "", req.service) from exc
        raise unreachable(gw.config, exc) from exc
    except JMSException as exc:
        log.debug("UMS %s failed: %s", req.service, exc)
        raise jms_error(exc, gw.config) from exc


async def _login(gw: Gateway, req: UmsRequest) -> UmsReply:
    client = await gw.login(req.user, req.password, req.transacted)
    return UmsReply(
        "login_reply",
        destination=req.destination,
        domain=req.domain,
        sid=client.sid,
        text=client.sid,
    )


async def _send(gw: Gateway, req: UmsRequest) -> UmsReply:
    name = _need_destination(req)
    dest = destination(name, req.topic)
    msg = _message(req)
    if req.sid:
        client = _client(gw, req.sid)
        client.busy += 1
        try:
            await client.producer.send(msg, destination=dest)
        finally:
            client.busy -= 1
            client.touch()
    else:
        user, password = gw.credentials(req.user, req.password)
        pc = await gw.connection(user, password, slot=False)
        try:
            await pc.send(msg, name, req.topic)
        finally:
            gw.drop_if_dead(pc)
    return UmsReply("send_reply", destination=name, domain=req.domain, sid=req.sid)


async def _receive(gw: Gateway, req: UmsRequest) -> UmsReply:
    name = _need_destination(req)
    timeout_ms = gw.config.receive_timeout_ms if req.timeout_ms is None else req.timeout_ms
    timeout = timeout_ms / 1000
    if req.sid:
        client = _client(gw, req.sid)
        client.busy += 1
        try:
            async with client.receive_lock(name, req.topic):
                cons = await client.consumer(name, req.topic)
                msg = await cons.receive(timeout)
                if msg is None and client.pooled.conn.is_closed:
                    raise BrokerUnreachableException("connection to broker lost")
        finally:
            client.busy -= 1
            client.touch()
    else:
        user, password = gw.credentials(req.user, req.password)
        pc = await gw.connection(user, password, slot=False)
        # A consumer on the shared session, parked for the next one-shot receive of the
        # queue for receive_linger_ms; closing it gives back a message the broker pushed
        # to it that nobody took.
        try:
            cons = await pc.one_shot_consumer(name, req.topic)
            park = gw.config.receive_linger_ms > 0
            try:
                msg = await cons.receive(timeout)
                if msg is None and pc.conn.is_closed:
                    # Not "nothing within the timeout": the broker went away meanwhile.
                    raise BrokerUnreachableException("connection to broker lost")
            except BaseException:
                park = False
                raise
            finally:
                await pc.done_with(cons, name, req.topic, park)
        finally:
            gw.drop_if_dead(pc)
    reply = UmsReply("receive_reply", destination=name, domain=req.domain, sid=req.sid)
    if msg is None:
        reply.status = 404
        return reply
    reply.text, reply.data, reply.content_type = message_payload(msg)
    reply.properties = dict(msg.properties)
    return reply


async def _transaction(gw: Gateway, req: UmsRequest) -> UmsReply:
    if not req.sid:
        raise UmsError(400, f"{req.service} needs the sid of a transacted login")
    client = _client(gw, req.sid)
    if not client.transacted:
        raise UmsError(400, f"sid {req.sid} is not transacted (login with transacted=true)")
    client.busy += 1
    try:
        if req.service == "commit":
            await client.session.commit()
        else:
            await client.session.rollback()
    finally:
        client.busy -= 1
        client.touch()
    return UmsReply(
        f"{req.service}_reply", destination=req.destination, domain=req.domain, sid=req.sid
    )


async def _close(gw: Gateway, req: UmsRequest) -> UmsReply:
    if not req.sid:
        raise UmsError(400, "close needs a sid")
    if not await gw.close_client(req.sid):
        if gw.lost.pop(req.sid, None) is not None:
            raise sid_lost(req.sid)
        raise UmsError(410, f"sid {req.sid} is not known here (closed, expired or never issued)")
    return UmsReply("close_reply", destination=req.destination, domain=req.domain, sid=req.sid)


_HANDLERS = {
    "login": _login,
    "send": _send,
    "receive": _receive,
    "commit": _transaction,
    "rollback": _transaction,
    "close": _close,
}


# -- read-only GET services ------------------------------------------------------------


@dataclass
class ReadOnlyReply:
    status: int
    text: str
    content_type: str


async def _admin(config: UmsConfig, user: str | None, password: str | None) -> AdminClient:
    """An admin connection as the caller: the broker decides whether they are an
    administrator (its user repository and the ADMIN connection rule)."""
    try:
        return await AdminClient.open(
            config.broker_host,
            config.broker_port,
            user or "guest",
            password if password is not None else "guest",
            connect_timeout=15.0,
        )
    except JMSException as exc:
        err = jms_error(exc, config)
        if isinstance(exc, JMSSecurityException):
            raise UmsError(401, f"an administrator's user and password are needed: {exc}") from exc
        raise err from exc


async def read_only(fields: dict[str, str], gw: Gateway | None = None) -> ReadOnlyReply:
    """getBrokerInfo, getConfiguration, debug, ping (the seed's section 3)."""
    gw = gw or gateway()
    config = gw.config
    service = fields.get("service") or ""
    user, password = fields.get("user"), fields.get("password")
    if service == "ping":
        return await _ping(config, user, password)
    if service == "getConfiguration":
        admin = await _admin(config, user, password)
        await admin.close()
        return ReadOnlyReply(200, configuration_xml(config), "text/xml;charset=UTF-8")
    if service == "debug":
        admin = await _admin(config, user, password)
        await admin.close()
        on = parse_bool(fields.get("debug"))
        logging.getLogger("portal.ums").setLevel(logging.DEBUG if on else logging.NOTSET)
        log.info("UMS debug logging %s by %s", "on" if on else "off", user)
        return ReadOnlyReply(
            200, f"service=debug, debug={'true' if on else 'false'}", "text/plain;charset=UTF-8"
        )
    if service == "getBrokerInfo":
        return await _broker_info(config, fields)
    raise UmsError(
        400, f"unknown service {service!r}: GET serves getBrokerInfo, getConfiguration, debug, ping"
    )


def configuration_xml(config: UmsConfig) -> str:
    """getConfiguration's output, in the seed's layout."""
    return (
        "<ums>\n"
        f"    <BrokerAddress>{escape(config.broker_address)}</BrokerAddress>\n"
        f"    <JMSAuthenticate>{'true' if config.authenticate else 'false'}</JMSAuthenticate>\n"
        f"    <CacheDuration>{config.cache_duration_ms}</CacheDuration>\n"
        f"    <SweepInterval>{config.sweep_interval_ms}</SweepInterval>\n"
        f"    <ReceiveTimeout>{config.receive_timeout_ms}</ReceiveTimeout>\n"
        f"    <MaxClientsPerConnection>{config.max_clients_per_connection}</MaxClientsPerConnection>\n"
        "</ums>"
    )


async def _ping(config: UmsConfig, user: str | None, password: str | None) -> ReadOnlyReply:
    start = time.monotonic()
    try:
        conn = await connect(
            config.broker_host,
            config.broker_port,
            user=user or "guest",
            password=password if password is not None else "guest",
            connect_timeout=15.0,
        )
        try:
            session = await conn.create_session()
            await session.close()
        finally:
            await conn.close()
    except JMSSecurityException as exc:
        raise UmsError(401, f"authentication failed: {exc}") from exc
    except JMSException as exc:
        raise jms_error(exc, config) from exc
    except (TimeoutError, OSError) as exc:
        raise UmsError(
            503, f"the broker at {config.broker_address} is not reachable ({exc})"
        ) from exc
    ms = round((time.monotonic() - start) * 1000)
    return ReadOnlyReply(
        200, f"Broker is alive, round trip = {ms} milli secs.", "text/plain;charset=UTF-8"
    )


_STATE_LABELS = {
    0: "RUNNING",
    1: "CONSUMERS_PAUSED",
    2: "PRODUCERS_PAUSED",
    3: "PAUSED",
    4: "UNKNOWN",
}


def _num(info: dict, key: str) -> int:
    v = info.get(key)
    return int(v) if isinstance(v, int) else 0


# What XML 1.0 cannot carry: a name stored before the broker refused such names would
# otherwise make getBrokerInfo's document malformed for every administrator.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def destination_elements(info: dict) -> dict[str, str]:
    """A DestinationInfo as the destination monitor MBean's attribute names."""
    full = _num(info, "fulltype") or _num(info, "type")
    state = _num(info, "destState")
    return {
        "Name": _NOT_XML.sub("\ufffd", str(info.get("name") or "")),
        "Type": "t" if full & DEST_TOPIC else "q",
        "State": str(state),
        "StateLabel": _STATE_LABELS.get(state, "UNKNOWN"),
        "Temporary": "true" if full & DEST_TEMP else "false",
        "CreatedByAdmin": "false" if info.get("autocreated") else "true",
        "NumMsgs": str(_num(info, "nMessages")),
        "TotalMsgBytes": str(_num(info, "nMessageBytes")),
        "NumMsgsPendingAcks": str(_num(info, "nUnackMessages")),
        "NumMsgsHeldInTransaction": str(_num(info, "nTxnMessages")),
        "NumMsgsInDelayDelivery": str(_num(info, "nInDelayMessages")),
        "NumProducers": str(_num(info, "nProducers")),
        "NumConsumers": str(_num(info, "nConsumers")),
        "NumActiveConsumers": str(_num(info, "naConsumers")),
        "NumBackupConsumers": str(_num(info, "nfConsumers")),
        "MaxNumMsgs": str(_num(info, "maxMessages") or -1),
        "MaxTotalMsgBytes": str(_num(info, "maxMessageBytes") or -1),
    }


async def _broker_info(config: UmsConfig, fields: dict[str, str]) -> ReadOnlyReply:
    cmds = [c for c in (fields.get("cmd") or "").split(",") if c]
    wanted = [e for e in (fields.get("dest-elements") or "").split(",") if e]
    admin = await _admin(config, fields.get("user"), fields.get("password"))
    try:
        props = await admin.broker_props()
        infos = await admin.destinations() if "getDestinations" in cmds else []
        # Not the admin connection's own reply queue, made for this request.
        infos = [i for i in infos if i.get("name") != admin.reply_queue.name]
    except AdminError as exc:
        raise UmsError(500, f"the broker refused: {exc}") from exc
    except JMSException as exc:  # the connection was lost meanwhile
        raise jms_error(exc, config) from exc
    finally:
        await admin.close()
    now = datetime.now()
    req_attrs = "".join(
        f" {k}={quoteattr(v)}" for k in ("cmd", "dest-elements") if (v := fields.get(k))
    )
    broker = {
        "InstanceName": props.get("imq.instancename", ""),
        "Version": props.get("imq.product.version", ""),
        "Host": props.get("imq.hostname", "") or config.broker_host,
        "Port": props.get("imq.portmapper.port", str(config.broker_port)),
        "VarHome": props.get("imq.varhome", ""),
    }
    out = [
        '<?xml version="1.0" encoding="UTF-8"?><ums><BrokerInfo><Header><GeneratedDate>',
        f"<Milliseconds>{int(now.timestamp() * 1000)}</Milliseconds>",
        f"<DateString>{escape(now.strftime('%m/%d/%y %I:%M:%S %p'))}</DateString>",
        f"</GeneratedDate><RequestProperties{req_attrs}/><Broker>",
        "".join(f"<{k}>{escape(str(v))}</{k}>" for k, v in broker.items()),
        "</Broker></Header><Body>",
    ]
    if "getDestinations" in cmds:
        out.append("<Destinations>")
        for info in infos:
            el = destination_elements(info)
            out.append(f"<Destination Name={quoteattr(el['Name'])} Type={quoteattr(el['Type'])}>")
            for k, v in el.items():
                if not wanted or k in wanted:
                    out.append(f"<{k}>{escape(v)}</{k}>")
            out.append("</Destination>")
        out.append("</Destinations>")
    out.append("</Body></BrokerInfo></ums>")
    return ReadOnlyReply(200, "".join(out), "text/xml;charset=UTF-8")
