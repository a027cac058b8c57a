"""The destination rules: how a destination comes to be, changes and goes.

Every way a destination is made passes :meth:`DestinationRules.create` (JMS create,
producers, consumers and sends that auto-create, the admin service, cluster peers): the
name rules OpenMQ's broker applies, auto-creation and the broker's own topics (the log
topic, the metrics topics), the cluster's say over a change its master records, the
stored record.  Destroying, updating and reaping idle auto-created destinations are
here too.  The tables themselves (``queues``, ``topics``, the DMQ) are the context's
(broker/core/context.py), which every part reads; the router offers these moves under
its own names (``router.create_destination`` is :meth:`DestinationRules.create`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.protocol.admin_types import ADMIN_QUEUES
from broker.protocol.destname import (
    INTERNAL_PREFIX,
    name_problem,
    queue_name_problem,
    topic_pattern_problem,
)
from broker.protocol.types import DEST_TEMP, DEST_TOPIC, DMQ_NAME, FLAVOURS, Status
from broker.store.base import DestAdd, DestRemove

from . import topicnames
from .destination import DEST_AUTO, Destination, QueueDestination, TopicDestination
from .errors import RouterError, now_ms

if TYPE_CHECKING:
    from .context import CoreContext
    from .limits import Limits
    from .session import Link
    from .subscriptions import Subscriptions

log = logging.getLogger("broker.router")


class DestinationRules:
    """The destination rules of one router: over its shared state (``ctx``), its limits
    (a destination's dead messages and room for producers) and its subscriptions (a
    topic's go with it)."""

    def __init__(self, ctx: CoreContext, limits: Limits, subs: Subscriptions) -> None:
        self.ctx = ctx
        self.limits = limits
        self.subs = subs

    def _make(
        self,
        name: str,
        is_topic: bool,
        attributes: dict | None,
        *,
        temporary_owner: int | None = None,
        auto: bool = False,
    ) -> Destination:
        """Make a destination with the configured defaults under ``attributes``, wire it
        to the router and enter it in its table (not yet in the store)."""
        defaults = (
            self.ctx.settings.topic_attributes if is_topic else self.ctx.settings.queue_attributes
        )
        attrs = dict(defaults or {})
        attrs.update(attributes or {})
        cls = TopicDestination if is_topic else QueueDestination
        dest = cls(
            name,
            temporary_owner=temporary_owner,
            auto=auto,
            attributes=attrs,
            totals=self.ctx.totals,
        )
        dest.on_dead = self.limits.dead
        dest.on_room = self.limits.room
        if temporary_owner is None:
            dest.store = self.ctx.store
        dest.pager = self.ctx.pager
        if isinstance(dest, TopicDestination):
            self.ctx.topics[name] = dest
        else:
            cluster = self.ctx.observers.cluster
            dest.claims = cluster.positions if cluster is not None else None
            self.ctx.queues[name] = dest
        return dest

    def restore(
        self, name: str, dest_type: int, auto: bool, attributes: dict | None
    ) -> Destination:
        """A destination the message store already holds, made again at recovery."""
        return self._make(name, bool(dest_type & DEST_TOPIC), attributes, auto=auto)

    def create(
        self,
        name: str,
        dest_type: int,
        link: Link | None = None,
        *,
        auto: bool = True,
        attributes: dict | None = None,
    ) -> Destination:
        """CREATE_DESTINATION: returns the destination; raises RouterError on refusal."""
        if not name:
            raise RouterError(Status.BAD_REQUEST, "destination name is empty")
        # Every way a destination comes to be passes here (JMS create, producers,
        # consumers and sends that auto-create, the admin service, cluster peers).
        problem = name_problem(name)
        if problem is not None:
            log.info("destination refused: %s", problem)
            raise RouterError(Status.BAD_REQUEST, problem)
        is_topic = bool(dest_type & DEST_TOPIC)
        if not is_topic:
            # Before the auto-create and conflict checks: OpenMQ's broker answers 415
            # whatever else holds, so must we.
            problem = queue_name_problem(name)
            if problem is not None:
                log.info("destination refused: %s", problem)
                raise RouterError(Status.UNSUPPORTED_TYPE, problem)
        else:
            problem = topic_pattern_problem(name)
            if problem is not None:
                log.info("destination refused: %s", problem)
                raise RouterError(Status.NOT_ACCEPTABLE, problem)
        existing = self.ctx.lookup(name, dest_type)
        if existing is not None:
            raise RouterError(Status.CONFLICT, f"destination {name} already exists")
        temp_owner = None
        if dest_type & DEST_TEMP:
            if link is None:
                raise RouterError(Status.BAD_REQUEST, "temporary destination needs a connection")
            temp_owner = link.id
        elif auto:
            s = self.ctx.settings
            if name == topicnames.LOG_TOPIC and is_topic:
                # The broker's log topic, made for its subscribers as the metrics topics.
                attributes = topicnames.log_topic_attributes(s.log_topic_capacity)
            elif name.startswith(INTERNAL_PREFIX) and name != DMQ_NAME:
                # Only the metrics topics, made (whatever auto-creation allows) with
                # attributes of their own.
                attributes = topicnames.internal_attributes(
                    name, is_topic, enabled=s.metrics_topics, may_watch=self._may_watch
                )
            elif not (s.autocreate_topic if is_topic else s.autocreate_queue) and not (
                name in ADMIN_QUEUES and not is_topic
            ):
                # The admin queue is made on demand whatever auto-creation says (OpenMQ's
                # always exists): with imq.autocreate.queue=false, imqcmd would otherwise
                # be locked out once an idle admin queue was reaped.
                raise RouterError(
                    Status.NOT_FOUND, f"{name} does not exist and auto-creation is disabled"
                )
        if temp_owner is None and not auto:
            self.ctx.observers.check_change("destination", name)
        dest = self._make(
            name,
            is_topic,
            attributes,
            temporary_owner=temp_owner,
            auto=auto and temp_owner is None,
        )
        if dest_type & FLAVOURS:
            dest.flavour = dest_type & FLAVOURS
        if dest.store is not None:
            dest.store.submit((DestAdd(name, self._stored_type(dest), dict(dest.attributes)),))
        log.info(
            "created %s %s%s",
            "topic" if is_topic else "queue",
            name,
            " (temporary)" if temp_owner else " (auto-created)" if dest.auto else "",
        )
        self.ctx.observers.router_event(
            "destination.created", {"name": name, "type": dest.dest_type}
        )
        return dest

    def _may_watch(self, name: str, dest_type: int) -> bool:
        # A destination's metrics topic: it exists, or it may be auto-created.
        s = self.ctx.settings
        can = s.autocreate_topic if dest_type & DEST_TOPIC else s.autocreate_queue
        return can or self.ctx.lookup(name, dest_type) is not None

    def ensure(self, name: str, dest_type: int, link: Link | None) -> Destination:
        """The destination, auto-creating it when allowed (producers, consumers)."""
        dest = self.ctx.lookup(name, dest_type)
        if dest is None:
            dest = self.create(
                name, dest_type & ~DEST_TEMP if not dest_type & DEST_TEMP else dest_type, link
            )
        return dest

    def destroy(self, name: str, dest_type: int, link: Link | None = None) -> None:
        """DESTROY_DESTINATION (a client's or an administrator's); raises RouterError on
        refusal."""
        dest = self.ctx.lookup(name, dest_type)
        if dest is None:
            raise RouterError(Status.NOT_FOUND, f"destination {name} not found")
        if name == DMQ_NAME:
            raise RouterError(Status.FORBIDDEN, "the dead message queue cannot be destroyed")
        if dest.is_temporary and link is not None and dest.temporary_owner != link.id:
            raise RouterError(
                Status.FORBIDDEN, f"temporary destination {name} belongs to another connection"
            )
        if dest.consumers():
            raise RouterError(Status.CONFLICT, f"destination {name} has active consumers")
        if not dest.auto and not dest.is_temporary:
            self.ctx.observers.check_change("destination", name)
        self.remove(dest)

    def update(self, dest: Destination, attributes: dict) -> None:
        """Admin UPDATE_DESTINATION: the new attribute values apply at once (limits are
        checked on the next send, backups are promoted into new active places, producers
        held by a limit that no longer holds are released) and are stored."""
        if not dest.auto and not dest.is_temporary:
            self.ctx.observers.check_change("destination", dest.name)
        dest.attributes.update(attributes)
        if dest.store is not None:
            dest.store.submit((DestAdd(dest.name, self._stored_type(dest), dict(dest.attributes)),))
        if isinstance(dest, QueueDestination):
            dest.promote_backups()
            dest.dq.dispatch(now_ms())
        if dest.waiting_producers:
            self.limits.room(dest)  # the new limits may give them room
        log.info("updated %s %s: %s", "queue" if dest.is_queue else "topic", dest.name, attributes)
        self.ctx.observers.router_event(
            "destination.updated", {"name": dest.name, "type": dest.dest_type}
        )

    def remove(self, dest: Destination) -> None:
        """Take ``dest`` out of its table with its waiting messages (a topic: with its
        subscriptions) and out of the store."""
        if isinstance(dest, QueueDestination):
            self.ctx.queues.pop(dest.name, None)
            for e in dest.dq.clear():
                self.ctx.forget(e)
            dest.dq.active = False
        else:
            assert isinstance(dest, TopicDestination)
            self.ctx.topics.pop(dest.name, None)
            for sub in list(dest.subscriptions):
                self.subs.remove(sub)
        if dest.store is not None:
            dest.store.submit((DestRemove(dest.name, dest.dest_type),))
        log.info("destroyed %s %s", "queue" if dest.is_queue else "topic", dest.name)
        self.ctx.observers.router_event(
            "destination.destroyed", {"name": dest.name, "type": dest.dest_type, "auto": dest.auto}
        )

    def reap_idle(self, now: float, reaptime: float) -> list[str]:
        """Destroy auto-created destinations that had no consumers, producers or
        messages for ``reaptime`` seconds (the administrator guide's rule)."""
        reaped = []
        for dest in self.ctx.each_destination():
            if not dest.auto:
                continue
            if (
                dest.msg_count
                or dest.producers
                or dest.consumers()
                or (isinstance(dest, TopicDestination) and dest.durables)
            ):
                dest.idle_since = None
                continue
            if dest.idle_since is None:
                dest.idle_since = now
            elif now - dest.idle_since >= reaptime:
                self.remove(dest)
                reaped.append(dest.name)
        return reaped

    @staticmethod
    def _stored_type(dest: Destination) -> int:
        return dest.dest_type | (DEST_AUTO if dest.auto else 0)


__all__ = ["DestinationRules"]
