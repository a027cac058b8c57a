"""Topic subscriptions (plain, durable, shared) and client-ID claims.

Which subscription a new topic consumer attaches to, when it may join one that already
has consumers, deleting a durable subscription, and the SET_CLIENTID rules that name
durable subscriptions.  The client-ID claims are this part's own; the
subscriptions live on their topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.protocol.names import JMQ_SHARE
from broker.protocol.types import Status

from .destination import Destination, Subscription, TopicDestination
from .errors import RouterError

if TYPE_CHECKING:
    from .context import CoreContext
    from .selector import Selector
    from .session import Link, Session


# Between a namespace and a client ID in the name of their combined cluster lock (OpenMQ's).
NAMESPACE_SEPARATOR = "${%%}"


def client_id_lock(client_id: str, namespace: str | None = None) -> str:
    """The cluster lock of a client ID (``clientid:<id>``), or of the pair a namespace
    makes with it (``clientid:<namespace>${%%}<id>``, taken unshared first, as OpenMQ's
    brokers do for its resource adapter's JMQNamespace)."""
    if namespace is None:
        return f"clientid:{client_id}"
    return f"clientid:{namespace}{NAMESPACE_SEPARATOR}{client_id}"


@dataclass
class ClientIDClaim:
    """One connection's SET_CLIENTID."""

    link_id: int
    shared: bool
    namespace: str | None

    def excludes(self, shared: bool) -> bool:
        """Whether this claim refuses another claim of its client ID, ``shared`` or not,
        here or on another broker: unless both are shared (JMQShare)."""
        return not (self.shared and shared)


class Subscriptions:
    """The subscription rules of one router, over its shared state."""

    def __init__(self, ctx: CoreContext) -> None:
        self.ctx = ctx
        # The client IDs in use: name -> the connections' claims (SET_CLIENTID).
        self.client_ids: dict[str, list[ClientIDClaim]] = {}

    def subscription_for(
        self,
        sess: Session,
        topic: TopicDestination,
        selector: Selector | None,
        no_local: bool,
        durable_name: str | None,
        share: bool = False,
        jms_share: bool = False,
        shared_name: str | None = None,
    ) -> Subscription:
        """The subscription a new topic consumer attaches to, keyed as OpenMQ does:
        a plain consumer gets its own; a durable one is (client ID, durable name);
        JMQShare on a non-durable: (client ID, topic, selector); a JMS 2.0 shared
        one: (client ID or None, shared subscription name), or with a durable name
        the durable (client ID or None, durable name)."""
        if share and jms_share:
            raise RouterError(Status.BAD_REQUEST, "both JMQShare and JMQJMSShare are set")
        mode = "jms" if jms_share else "mq" if share else None
        client_id = sess.link.client_id or None
        if topic.is_temporary and (durable_name is not None or mode is not None):
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"temporary topic {topic.name} cannot have durable or shared subscriptions",
            )
        if durable_name is None:
            if mode is None:
                return self.add(topic, selector, no_local, sess.link.id)
            if mode == "jms":
                if not shared_name or not shared_name.strip():
                    raise RouterError(
                        Status.PRECONDITION_FAILED,
                        "a shared subscription needs a name (JMQSharedSubscriptionName)",
                    )
            elif client_id is None:
                raise RouterError(
                    Status.PRECONDITION_FAILED,
                    "a shared (JMQShare) non-durable subscription needs a client ID",
                )
            key, existing, what = self._shared(mode, client_id, topic, selector, shared_name)
            if existing is not None:
                self.check_join(existing, topic, selector, no_local, mode, what)
                return existing
            return self.add(topic, selector, no_local, sess.link.id, share=mode, shared_key=key)
        if client_id is None and mode != "jms":
            raise RouterError(
                Status.PRECONDITION_FAILED,
                "a durable subscription needs a client ID on the connection",
            )
        dkey = (client_id, durable_name)
        existing = self.find_durable(dkey)
        if existing is not None:
            what = f"durable subscription {durable_name}"
            if existing.queue.consumers:
                self.check_join(existing, topic, selector, no_local, mode, what)
                return existing
            if (existing.share == "jms") != (mode == "jms"):
                # JMS 2.0: shared and unshared durable subscriptions may not share a name.
                raise RouterError(
                    Status.CONFLICT,
                    f"{what} exists as a"
                    f"{' shared' if existing.share == 'jms' else 'n unshared'} subscription",
                )
            changed = (
                existing.topic is not topic
                or existing.selector_text != (selector.text if selector else None)
                or existing.no_local != no_local
            )
            if not changed:
                existing.share = mode
                return existing
            # JMS: a changed subscription is the old one deleted and a new one made.
            self.ctx.observers.check_change("durable", durable_name)
            self.remove(existing)
        else:
            self.ctx.observers.check_change("durable", durable_name)
        return self.add(topic, selector, no_local, sess.link.id, dkey, share=mode)

    def remote_subscription(
        self,
        link: Link,
        topic: TopicDestination,
        selector: Selector | None,
        no_local: bool,
        durable_name: str | None,
        mode: str | None,
        shared_name: str | None,
    ) -> Subscription:
        """The subscription a consumer on another broker attaches to on this one, where
        the topic's messages are published: the keys of ``subscription_for`` (``mode``
        "jms", "mq" or None as there), and ``check_join`` when it already has consumers.
        A durable subscription without consumers is taken as it is: the consumer's
        broker applied the durable rules (a changed one is deleted and made again,
        which reaches here through the change record) before it sent its interest."""
        client_id = link.client_id or None
        if durable_name is not None:
            dkey = (client_id, durable_name)
            sub = topic.durables.get(dkey)
            if sub is None:
                return self.add(topic, selector, no_local, link.id, dkey, share=mode)
            what = f"durable subscription {durable_name}"
        elif mode is not None:
            key, found, what = self._shared(mode, client_id, topic, selector, shared_name)
            if found is None:
                return self.add(topic, selector, no_local, link.id, share=mode, shared_key=key)
            sub = found
        else:
            return self.add(topic, selector, no_local, link.id)
        if sub.queue.consumers:
            self.check_join(sub, topic, selector, no_local, mode, what)
        return sub

    def _shared(
        self,
        mode: str,
        client_id: str | None,
        topic: TopicDestination,
        selector: Selector | None,
        shared_name: str | None,
    ) -> tuple[tuple, Subscription | None, str]:
        """A shared non-durable subscription's key as OpenMQ makes it ("jms": client ID
        or None and the JMS 2.0 name, on any topic; "mq": client ID, topic and
        selector), the subscription that has it, and how messages name it."""
        if mode == "jms":
            key: tuple = ("jms", client_id, shared_name)
            return key, self.find_shared(key), f"shared subscription {shared_name}"
        text = selector.text if selector is not None else None
        key = ("mq", client_id, topic.name, text)
        return key, topic.shared.get(key), f"shared subscription of {client_id} on {topic.name}"

    @staticmethod
    def add(
        topic: TopicDestination,
        selector: Selector | None,
        no_local: bool,
        link_id: int,
        durable_key: tuple[str | None, str] | None = None,
        *,
        share: str | None = None,
        shared_key: tuple | None = None,
    ) -> Subscription:
        """A new subscription on ``topic`` (a durable one is recorded in the store)."""
        sub = Subscription(
            topic, selector, no_local, link_id, durable_key, share=share, shared_key=shared_key
        )
        topic.add_subscription(sub)
        return sub

    @staticmethod
    def check_join(
        sub: Subscription,
        topic: TopicDestination,
        selector: Selector | None,
        no_local: bool,
        mode: str | None,
        what: str,
    ) -> None:
        """A consumer joining a subscription that has consumers: 409 unless all share it
        the same way, on the same topic, selector and noLocal, within maxNumSharedConsumers."""
        if sub.share is None or mode is None:
            raise RouterError(Status.CONFLICT, f"{what} is in use and not shared")
        if sub.share != mode:
            raise RouterError(
                Status.CONFLICT,
                f"{what} is shared by {'JMS 2.0' if sub.share == 'jms' else JMQ_SHARE} consumers",
            )
        if sub.topic is not topic:
            raise RouterError(
                Status.CONFLICT, f"{what} is in use on another topic ({sub.topic.name})"
            )
        if sub.selector_text != (selector.text if selector is not None else None):
            raise RouterError(Status.CONFLICT, f"{what} is in use with a different selector")
        if sub.no_local != no_local:
            raise RouterError(Status.CONFLICT, f"{what} is in use with a different noLocal")
        limit = topic.limit("maxNumSharedConsumers")
        if 0 <= limit <= len(sub.queue.consumers):
            raise RouterError(
                Status.CONFLICT, f"{what} already has its maximum of {limit} shared consumers"
            )

    def find_durable(self, key: tuple[str | None, str]) -> Subscription | None:
        for t in self.ctx.each_topic():
            sub = t.durables.get(key)
            if sub is not None:
                return sub
        return None

    def find_shared(self, key: tuple) -> Subscription | None:
        for t in self.ctx.each_topic():
            sub = t.shared.get(key)
            if sub is not None:
                return sub
        return None

    @staticmethod
    def durable_by_id(dest: Destination, sub_id: str) -> Subscription | None:
        """A durable subscription by the message store's name for it."""
        if not isinstance(dest, TopicDestination):
            return None
        for sub in dest.durables.values():
            if sub.sub_id == sub_id:
                return sub
        return None

    def remove(self, sub: Subscription) -> None:
        """Drop a subscription and account out what it still held."""
        forget = self.ctx.forget
        for e in sub.topic.remove_subscription(sub):
            forget(e)

    def unsubscribe(self, client_id: str | None, durable_name: str) -> None:
        """Delete a durable subscription (409 while any consumer is attached).  Without a
        client ID only a JMS 2.0 shared durable subscription made without one is found."""
        sub = self.find_durable((client_id or None, durable_name))
        if sub is None:
            raise RouterError(
                Status.NOT_FOUND,
                f"no durable subscription {durable_name}"
                + (f" for client ID {client_id}" if client_id else " without a client ID"),
            )
        if sub.queue.consumers:
            raise RouterError(Status.CONFLICT, f"durable subscription {durable_name} is in use")
        self.ctx.observers.check_change("durable", durable_name)
        self.remove(sub)
        self.ctx.observers.router_event(
            "durable.removed", {"client_id": client_id or None, "name": durable_name}
        )

    # -- client IDs ------------------------------------------------------------

    def set_client_id(
        self, link: Link, client_id: str | None, shared: bool, namespace: str | None
    ) -> None:
        """SET_CLIENTID with the sharing and namespace rules of the protocol."""
        if client_id is None:
            self.release_client_id(link)
            link.client_id = None
            return
        if not client_id.strip():
            raise RouterError(Status.BAD_REQUEST, "client ID is empty")
        claims = self.client_ids.setdefault(client_id, [])
        for c in claims:
            if c.link_id == link.id:
                continue
            if c.excludes(shared):
                raise RouterError(Status.CONFLICT, f"client ID {client_id} is already in use")
            # Here a claim made without a namespace refuses one naming a namespace too;
            # another broker asks only for the namespace's own lock (holds_client_id_lock).
            if namespace is not None and (c.namespace is None or c.namespace == namespace):
                raise RouterError(
                    Status.CONFLICT, f"client ID {client_id} is already in use in this namespace"
                )
        claims.append(ClientIDClaim(link.id, shared, namespace))
        link.client_id = client_id

    def holds_client_id_lock(self, resource: str, shared: bool) -> bool:
        """Whether this broker's claims hold the cluster lock ``resource`` (a
        :func:`client_id_lock` name) so that another broker asking for it, ``shared`` or
        not, is refused: a client ID's by a claim that excludes the request, a namespace's
        by a claim made in that namespace.  False for any other resource."""
        kind, _, name = resource.partition(":")
        if kind != "clientid":
            return False
        namespace, sep, cid = name.partition(NAMESPACE_SEPARATOR)
        if sep:
            return any(c.namespace == namespace for c in self.client_ids.get(cid, ()))
        return any(c.excludes(shared) for c in self.client_ids.get(name, ()))

    def client_id_in_use(self, client_id: str) -> bool:
        """Whether a connection of this broker has claimed ``client_id``."""
        return bool(self.client_ids.get(client_id))

    def release_client_id(self, link: Link) -> None:
        cid = link.client_id
        if cid is None:
            return
        table = self.client_ids
        claims = [c for c in table.get(cid, []) if c.link_id != link.id]
        if claims:
            table[cid] = claims
        else:
            table.pop(cid, None)


__all__ = ["NAMESPACE_SEPARATOR", "ClientIDClaim", "Subscriptions", "client_id_lock"]
