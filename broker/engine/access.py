"""The access checks every rule set that touches a destination uses (security/acl.py):
what a connection may produce to, consume from, browse or auto-create."""

from __future__ import annotations

import logging

from broker.core.errors import RouterError
from broker.core.monitoring import METRICS_PREFIX
from broker.protocol.packet import Packet
from broker.protocol.types import DEST_TEMP, DEST_TOPIC, FLAG_A, Status

from .base import EngineBase

log = logging.getLogger("broker.connection")


class AccessRules(EngineBase):
    """Access control of :class:`ConnectionEngine`'s destination requests and sends."""

    def _denied(self, name: str, dtype: int, op: str) -> str | None:
        """Why the access rules refuse ``op`` on ``name`` (and the auto-creation it would
        cause), or None if they allow it (security/acl.py; docs/developers/protocol.md)."""
        acl = self.broker.access
        svc = self.service
        if dtype & DEST_TEMP or not acl.dest_enabled(svc.name):
            return None
        kind = "topic" if dtype & DEST_TOPIC else "queue"
        user = self.user or ""
        if op != "create":
            ok, why = acl.check_dest(svc.name, svc.type, kind, name, op, user, self.groups)
            if not ok:
                return f"access denied: {user} may not {op} on {kind} {name} ({why})"
        s = self.router.settings
        if not (s.autocreate_topic if kind == "topic" else s.autocreate_queue):
            return None
        dest = self.router.lookup(name, dtype)
        # Only what would be auto-created: an admin-created destination needs no create.
        if dest is None or (op == "create" and dest.auto):
            ok, why = acl.check_create(svc.name, svc.type, kind, name, user, self.groups)
            if not ok:
                return f"access denied: {user} may not create {kind} {name} ({why})"
        return None

    def _require(self, name: str, dtype: int, op: str) -> None:
        why = self._denied(name, dtype, op)
        if why is not None:
            log.info("connection %s: %s", self.id, why)
            raise RouterError(Status.FORBIDDEN, why)

    def _has_producer(self, name: str, dest_type: int) -> bool:
        topic = bool(dest_type & DEST_TOPIC)
        for sess in self.all_sessions():
            for prod in sess.producers.values():
                d = prod.destination
                if d.name == name and bool(d.dest_type & DEST_TOPIC) == topic:
                    return True
        return False

    def send_denied(self, name: str, dest_type: int) -> str | None:
        """Why this connection may not send to the destination, or None: allowed where it
        registered a producer, else checked like ADD_PRODUCER; cached per destination
        and rule generation (a stream of messages, or of their reports, costs one rule
        look-up)."""
        gen = self.broker.access.generation
        if gen != self._acl_gen:
            self._acl_sends.clear()
            self._acl_gen = gen
        key = (name, dest_type)
        why = self._acl_sends.get(key)
        if why is None:
            if self._has_producer(name, dest_type):
                why = ""
            elif dest_type & DEST_TOPIC and name.startswith(METRICS_PREFIX):
                # Only the broker publishes there (an ADD_PRODUCER is refused too).
                why = f"{name} is a metrics topic: only the broker publishes to it"
            else:
                why = self._denied(name, dest_type, "produce") or ""
            self._acl_sends[key] = why
        return why or None

    def _send_allowed(self, pkt: Packet, name: str, dest_type: int) -> bool:
        """A message to a destination this connection registered no producer on is
        checked like ADD_PRODUCER (send_denied); refused, it is answered or logged once."""
        why = self.send_denied(name, dest_type)
        if why is None:
            return True
        key = (name, dest_type)
        if pkt.flags & FLAG_A:
            self.reply(pkt, Status.FORBIDDEN, reason=why)
        elif key not in self._acl_logged:
            self._acl_logged.add(key)
            log.warning("connection %s: messages dropped: %s", self.id, why)
        return False
