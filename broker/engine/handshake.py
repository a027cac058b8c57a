"""HELLO, AUTHENTICATE and the liveness packets: from NEW to READY (or REFUSED/CLOSED).

The user repository blocks (database, file, directory), so the engine does not call it:
it returns a :class:`~broker.engine.effects.RunBlocking` and holds the connection's
further packets (state VERIFYING) until the driver hands back the record.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from broker.props import SHIPPED_LOOPBACK_ONLY
from broker.protocol.auth import (
    AUTH_BASIC,
    AUTH_DIGEST,
    AuthBodyError,
    decode_auth_body,
    decode_basic_password,
)
from broker.protocol.jtypes import JInt, JLong
from broker.protocol.names import (
    JMQ_AUTH_TYPE,
    JMQ_BROKER_LIST,
    JMQ_BROKER_SESSION_ID,
    JMQ_BYTES,
    JMQ_CHALLENGE,
    JMQ_CONNECTION_ID,
    JMQ_MAX_MSG_BYTES,
    JMQ_PROTOCOL_LEVEL,
    JMQ_RBUFFER_SIZE,
    JMQ_SEQUENCE,
    JMQ_SERVICE,
    JMQ_SIZE,
    JMQ_STATUS,
    JMQ_USER_AGENT,
    JMQ_VERSION,
)
from broker.protocol.packet import BadPacket, Packet, build_packet
from broker.protocol.properties import as_int
from broker.protocol.sysmsgid import SysMessageID
from broker.protocol.types import CURRENT_PACKET_VERSION, PacketType, Status
from broker.security.digest import constant_time_equals, digest_response, md5str
from broker.security.shipped import refused_off_loopback

from .base import EngineBase
from .effects import CancelTimer, Effects, RunBlocking, StartTimer
from .states import CLOSED, ConnEvent

log = logging.getLogger("broker.connection")

MIN_PROTOCOL_LEVEL = 350
MAX_PROTOCOL_LEVEL = 500
# After refusing a login the broker waits this long for the client to close first: the
# C client (libmqcrt) reports "connection closed" instead of the refusal when the socket's
# EOF arrives right behind the AUTHENTICATE_REPLY (its reader tears the connection down
# before the waiting call takes the reply).
REFUSED_LOGIN_LINGER = 2.0
# HELLO_REPLY statuses after which the connection goes on to AUTHENTICATE_REQUEST (OpenMQ's
# HelloHandler); the stock Java client's ReadChannel.checkRedirectStatus closes it itself
# on 301 (reconnecting to JMQStoreOwner) and 408 (trying again later).
_HELLO_GOES_ON = (Status.OK, Status.MOVED_PERMANENTLY, Status.NOT_FOUND, Status.TIMEOUT)


class HandshakeRules(EngineBase):
    """The handshake and authentication handlers of :class:`ConnectionEngine`."""

    # EngineBase's
    user: str | None
    _backlog: list[Packet | BadPacket]

    def on_hello(self, pkt: Packet) -> None:
        if pkt.version != CURRENT_PACKET_VERSION:
            self.fatal(f"packet version {pkt.version} is not supported (clients before MQ 3.5)")
            return
        props = pkt.properties
        level = as_int(props.get(JMQ_PROTOCOL_LEVEL, 100))
        if level > MAX_PROTOCOL_LEVEL or level < MIN_PROTOCOL_LEVEL:
            supported = MAX_PROTOCOL_LEVEL if level > MAX_PROTOCOL_LEVEL else MIN_PROTOCOL_LEVEL
            log.info(
                "protocol level %s from %s not supported, offering %s", level, self.peer, supported
            )
            self.reply(
                pkt,
                Status.BAD_VERSION,
                {JMQ_PROTOCOL_LEVEL: JInt(supported)},
                reason=f"protocol level {level} is not supported",
            )
            return
        b = self.broker
        svc = self.service
        refusal = None
        if svc.paused:
            refusal = f"service {svc.name} is paused"
        elif not b.accepts_connection(svc):
            refusal = "the broker is quiesced"
        elif b.over_connection_limit(svc):
            refusal = f"service {svc.name} has reached its connection limit"
        if refusal is not None:
            svc.connections_rejected += 1
            observers = b.router.observers
            if observers.router_events:
                peer = str(self.peer or "")
                observers.router_event(
                    "connection.rejected",
                    {"service": svc.name, "user": None, "host": peer.rpartition(":")[0] or peer},
                )
            self.reply(pkt, Status.UNAVAILABLE, reason=refusal)
            self.close(refusal)
            return
        self.protocol_level = level
        self.user_agent = str(props.get(JMQ_USER_AGENT, ""))
        self.client_version = str(props.get(JMQ_VERSION, ""))
        flow = props.get(JMQ_SIZE, props.get(JMQ_RBUFFER_SIZE))
        if isinstance(flow, int) and flow > 0:
            self.flow_limit = self.flow_left = int(flow)
        old = props.get(JMQ_CONNECTION_ID)
        if isinstance(old, int):
            b.destroy_stale_connection(old, self)
        reply_props: dict[str, object] = {
            JMQ_CONNECTION_ID: JLong(self.id),
            JMQ_PROTOCOL_LEVEL: JInt(level),
            JMQ_VERSION: b.version,
            JMQ_SERVICE: svc.name,
            JMQ_SIZE: JInt(b.memory.count),
            JMQ_BYTES: JLong(b.memory.bytes),
            JMQ_MAX_MSG_BYTES: JLong(b.router.settings.max_message_size),
            JMQ_BROKER_SESSION_ID: JLong(b.session_id),
        }
        cluster = b.cluster
        if cluster is not None:
            # So a client with reconnect enabled can fail over to another broker.
            reply_props[JMQ_BROKER_LIST] = cluster.broker_list()
        if b.hello_properties:  # an HA cluster's broker list, JMQHA...
            reply_props.update(b.hello_properties)
        # An HA client reconnecting names its cluster and store session; the answer may
        # send it on (301 + JMQStoreOwner) or ask it to wait for a takeover (408).
        status, ha_props, ha_reason = b.hello_verdict(props)
        reply_props.update(ha_props)
        if status == Status.OK and b.failed_over_here(props):
            self.failed_over_at = int(time.time() * 1000)
        if status != Status.OK:
            log.info(
                "HELLO from %s (connection %s was %s): %s %s",
                self.peer,
                self.id,
                old,
                int(status),
                ha_reason,
            )
        self.reply(pkt, status, reply_props, reason=ha_reason)
        self.told_broker_list = reply_props.get(JMQ_BROKER_LIST)
        if status not in _HELLO_GOES_ON:
            # OpenMQ's HelloHandler closes the connection on any other status.
            self.close(ha_reason or f"HELLO refused ({status})")
            return
        if b.memory.count == 0:
            b.flow_waiting.add(self)
        self.auth_type = svc.auth_type
        body = b""
        if self.auth_type == AUTH_DIGEST:
            seed = f"{SysMessageID.from_bytes(pkt.sysmsgid)}:{time.time_ns()}{self.id}"
            self.nonce = md5str(seed)
            body = self.nonce.encode("ascii")
        self.write(
            build_packet(
                PacketType.AUTHENTICATE_REQUEST,
                props={
                    JMQ_AUTH_TYPE: self.auth_type,
                    JMQ_CHALLENGE: True,
                    JMQ_STATUS: JInt(Status.OK),
                    JMQ_SEQUENCE: JInt(pkt.sequence),
                },
                body=body,
                consumer_id=pkt.consumer_id,
            )
        )
        self._to(ConnEvent.HELLO_ACCEPTED)

    def on_authenticate(self, pkt: Packet) -> None:
        auth_type = pkt.properties.get(JMQ_AUTH_TYPE)
        if auth_type != self.auth_type:
            self._auth_failed(pkt, None, f"authentication type {auth_type!r} was not offered")
            return
        try:
            user, credential = decode_auth_body(pkt.body)
        except AuthBodyError as exc:
            self._auth_failed(pkt, None, str(exc))
            return
        repo = self.broker.repository_for(self.service)
        verify = repo.verify_basic
        args: tuple = (user,)
        if verify is not None:
            # LDAP: the directory checks the password (bind as the user); basic only.
            try:
                args = (user, decode_basic_password(credential))
            except AuthBodyError as exc:
                self._auth_failed(pkt, user, str(exc))
                return
        # Hold further packets until the repository answers.
        self._to(ConnEvent.CREDENTIALS_HELD)
        done = functools.partial(self.auth_checked, pkt, user, credential, verify is not None)
        check = verify or repo.lookup
        assert check is not None  # a UserRepository has one of the two
        self._effect(RunBlocking(check, args, done))

    def auth_checked(
        self,
        pkt: Packet,
        user: str,
        credential: str,
        verified: bool,
        record: Any,
        error: BaseException | None,
    ) -> Effects:
        """The repository's answer (``record`` or ``error``) to AUTHENTICATE ``pkt``.
        ``verified``: the repository checked the password itself (LDAP bind)."""
        if self.state is CLOSED:
            return self.take_effects()
        if error is not None:
            log.error("user repository failed for %s: %s", user, error)
            self.reply(pkt, Status.ERROR, reason="user repository unavailable")
            self.close("user repository unavailable")
            return self.take_effects()
        ok = False
        reason = "unknown user or wrong password"
        if verified:
            ok = record is not None
        elif record is not None and record.active:
            if self.auth_type == AUTH_BASIC:
                try:
                    password = decode_basic_password(credential)
                    ok = constant_time_equals(md5str(f"{user}:{password}"), record.password_digest)
                except AuthBodyError as exc:
                    reason = str(exc)
            else:
                ok = constant_time_equals(
                    digest_response(record.password_digest, self.nonce), credential
                )
        elif record is not None:
            reason = "user is inactive"
        if not ok:
            self._auth_failed(pkt, user, reason)
            return self.take_effects()
        if refused_off_loopback(
            self.broker.shipped_loopback_only, self.peer, user, record.password_digest
        ):
            # Answered as any failed login: the client learns nothing more.
            self._auth_failed(
                pkt,
                user,
                "the account is on its shipped password, accepted from loopback addresses "
                f"only ({SHIPPED_LOOPBACK_ONLY.name})",
            )
            return self.take_effects()
        svc = self.service
        allowed, why = self.broker.access.check_connection(svc.name, svc.type, user, record.groups)
        if not allowed:
            log.warning(
                "connection %s: user %s from %s refused on service %s (%s): %s",
                self.id,
                user,
                self.peer,
                svc.name,
                svc.type,
                why,
            )
            self.reply(pkt, Status.FORBIDDEN, reason=f"access denied to {svc.type} service: {why}")
            self.close(f"access denied to {svc.type} service")
            return self.take_effects()
        self.user = user
        self.groups = record.groups
        self._to(ConnEvent.AUTHENTICATED)
        self._effect(CancelTimer("auth"))
        log.info(
            "connection %s: %s authenticated from %s (%s)",
            self.id,
            user,
            self.peer,
            self.user_agent or "unknown client",
        )
        self.reply(pkt, Status.OK)
        told = self.told_broker_list
        if told is not None and self.broker.hello_properties.get(JMQ_BROKER_LIST, told) != told:
            # The members changed while this client logged in: the cluster INFO that
            # told the others passed it by (broker_list_changed reaches logged-in ones).
            self.broker.tell_broker_list(self)
        backlog, self._backlog = self._backlog, []
        if backlog:
            self._process(backlog)
        return self.take_effects()

    def _auth_failed(
        self, pkt: Packet, user: str | None, reason: str, status: int = Status.INVALID_LOGIN
    ) -> None:
        # INVALID_LOGIN as OpenMQ's broker answers (the stock Java client: C4060 "Login
        # failed"; libmqcrt: MQ_BROKER_INVALID_LOGIN); FORBIDDEN is for access control.
        log.warning("authentication failed for user %s from %s: %s", user or "?", self.peer, reason)
        host = self.peer.rpartition(":")[0] or self.peer
        count, delay = self.broker.login_throttle.failed(host, time.monotonic())
        if delay <= 0:
            self._refuse_login(pkt, status)
            return
        log.warning(
            "slowing down failed logins from %s: %d failures within %.0f s, "
            "answering user %s after %.0f s",
            host,
            count,
            self.broker.login_throttle.window,
            user or "?",
            delay,
        )
        # Hold the connection (and whatever it sends) until the delayed answer.
        self._to(ConnEvent.CREDENTIALS_HELD)

        def answer() -> Effects:
            if self.state is not CLOSED:
                self._refuse_login(pkt, status)
            return self.take_effects()

        self._effect(StartTimer("refusal", delay, answer))

    def _refuse_login(self, pkt: Packet, status: int) -> None:
        """Answer a failed login, ignore the rest, and close unless the client does first."""
        self.reply(pkt, status, reason="authentication failed")
        self._to(ConnEvent.LOGIN_REFUSED)

        def close() -> Effects:
            self.close("login refused")
            return self.take_effects()

        self._effect(StartTimer("linger", REFUSED_LOGIN_LINGER, close))

    def on_goodbye(self, pkt: Packet) -> None:
        self.reply(pkt, Status.OK)
        self.close("GOODBYE from the client")

    def on_ping(self, pkt: Packet) -> None:
        self.reply(pkt, Status.OK)

    def on_ping_reply(self, pkt: Packet) -> None:
        self.ping_outstanding = 0
