"""Moving the master broker to another broker of a running conventional cluster
(``imqcmd changemaster cls``, the admin service's CHANGE_CLUSTER_MASTER_BROKER, JMX
Cluster ``changeMasterBroker``), as OpenMQ's brokers do it (RaptorProtocol's
changeMasterBroker):

1. the master sends its whole change record to the new master (G_NEW_MASTER_BROKER_PREPARE,
   the records back to back as the payload, ``C`` their count); the new master keeps it
   as its own record file and answers;
2. the old master takes the new one as its ``imq.cluster.masterbroker`` (saved in its
   instance's config.properties) and stops keeping the record;
3. it tells the new master (G_NEW_MASTER_BROKER, waiting for the answer), which starts
   keeping the record it was sent, then every other linked broker, which take the new
   master too.

A broker that was not linked then keeps the old master in its configuration until an
administrator changes it (as with OpenMQ).  Only with
``imq.cluster.dynamicChangeMasterBrokerEnabled=true`` and a master broker set in the
instance's configuration (not with ``-D`` on the command line, which would bring the
old master back at the next start): both checked by the admin command.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from broker.core.errors import RouterError
from broker.protocol import gpacket as gp
from broker.protocol.jtypes import JLong
from broker.protocol.types import Status

from .changerecord import ChangeRecord, ChangeRecordError, record_dir, write_last_sync
from .config import ClusterConfig, same_host
from .handlers import Handlers

if TYPE_CHECKING:
    from .changes import ConfigChanges
    from .link_driver import BrokerLink
    from .peers import Peers

log = logging.getLogger("broker.cluster")

# How long the master waits for each broker's answer (OpenMQ's
# imq.cluster.changeMasterBrokerWaitTimeout is 180 s; a linked broker answers at once).
REPLY_TIMEOUT = 60.0


def address_text(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


class MasterChange:
    """The master broker's move (a part of :class:`~broker.cluster.service.ClusterService`)."""

    def __init__(
        self, cfg: ClusterConfig, peers: Peers, changes: ConfigChanges, instance_dir: Path | None
    ) -> None:
        self.cfg = cfg
        self.peers = peers
        self.changes = changes
        self.instance_dir = instance_dir
        # Saves imq.cluster.masterbroker in the instance's configuration (the broker
        # sets it: broker/server/clustering.py).
        self.save_master: Callable[[str], None] = lambda text: None
        self._waiting: dict[int, asyncio.Future[gp.GPacket]] = {}
        self._next_xid = int(time.time() * 1000)
        # The UUID of the record this broker was sent to keep (new master, step 1).
        self._prepared: str | None = None
        self._busy = False

    def handlers(self) -> Handlers:
        return {
            gp.G_NEW_MASTER_BROKER_PREPARE: self._prepare,
            gp.G_NEW_MASTER_BROKER_PREPARE_REPLY: self._reply,
            gp.G_NEW_MASTER_BROKER: self._new_master,
            gp.G_NEW_MASTER_BROKER_REPLY: self._reply,
        }

    # -- on the master broker ----------------------------------------------------------

    async def change(self, new: tuple[str, int], old: tuple[str, int] | None) -> bool:
        """Make ``new`` the master broker; False when it is the master already.
        RouterError (with OpenMQ's status) when refused or failed."""
        master = self.cfg.master
        if master is None:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                "there is no master broker for the cluster (imq.cluster.masterbroker): "
                "change master broker request refused",
            )
        if old is not None and not _same(old, master):
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"the master broker {address_text(old)} that is requested to be changed does "
                f"not match the current master broker {address_text(master)}",
            )
        if _same(new, master):
            log.info(
                "the master broker %s requested is the master broker already", address_text(new)
            )
            return False
        if self.changes.record is None:
            raise RouterError(
                Status.NOT_ALLOWED,
                f"this broker is not the master broker {address_text(master)}: change "
                "master broker request refused (ask the master broker)",
            )
        link = self.peers.link_to(*new)
        if link is None or link.address is None:
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"broker {address_text(new)} has no link up with this broker: change master "
                "broker request refused",
            )
        if self._busy:
            raise RouterError(Status.CONFLICT, "a change of master broker is under way")
        self._busy = True
        try:
            return await self._move(link, new, master)
        finally:
            self._busy = False

    async def _move(self, link: BrokerLink, new: tuple[str, int], master: tuple[str, int]) -> bool:
        record = self.changes.record
        assert record is not None and link.address is not None
        token = str(uuid.uuid4())
        records = list(record.records)
        target = _address_props(link.address)
        xid = self._xid()
        prepare = gp.GPacket(
            gp.G_NEW_MASTER_BROKER_PREPARE,
            {
                "TS": JLong(int(time.time() * 1000)),
                "C": len(records),
                "X": JLong(xid),
                "UUID": token,
                **target,
            },
            b"".join(gp.encode(r, stamp=False) for r in records),
            flags=gp.A_BIT,
        )
        log.info(
            "changing the master broker to %s: sending it the change record (%d records)",
            address_text(new),
            len(records),
        )
        await self._ask(link, prepare, xid, "the change record")
        # From here the new master has the record: this broker follows it.
        self._follow(new)
        announce = {
            "TS": JLong(int(time.time() * 1000)),
            "UUID": token,
            "oldMasterBroker": f"mq://{address_text(master)}/",
            **target,
        }
        xid = self._xid()
        await self._ask(
            link,
            gp.GPacket(gp.G_NEW_MASTER_BROKER, {**announce, "X": JLong(xid)}, flags=gp.A_BIT),
            xid,
            "the new master broker",
            status=Status.ERROR,
        )
        others = [lk for lk in list(self.peers.links.values()) if lk is not link]
        for other in others:
            xid = self._xid()
            try:
                await self._ask(
                    other,
                    gp.GPacket(
                        gp.G_NEW_MASTER_BROKER, {**announce, "X": JLong(xid)}, flags=gp.A_BIT
                    ),
                    xid,
                    "the new master broker",
                )
            except RouterError as exc:
                log.warning(
                    "broker %s was not told the new master broker %s: %s (change its "
                    "imq.cluster.masterbroker before it starts again)",
                    other.address,
                    address_text(new),
                    exc.reason,
                )
        log.info("the master broker is now %s", address_text(new))
        return True

    async def _ask(
        self,
        link: BrokerLink,
        pkt: gp.GPacket,
        xid: int,
        what: str,
        status: int = Status.PRECONDITION_FAILED,
    ) -> None:
        fut: asyncio.Future[gp.GPacket] = asyncio.get_running_loop().create_future()
        self._waiting[xid] = fut
        try:
            link.send(pkt)
            reply = await asyncio.wait_for(fut, REPLY_TIMEOUT)
        except TimeoutError:
            raise RouterError(
                Status.TIMEOUT, f"broker {link.address} did not answer {pkt.name} in time"
            ) from None
        finally:
            self._waiting.pop(xid, None)
        if reply.props.get("S") != Status.OK:
            raise RouterError(
                status,
                f"broker {link.address} refused {what} ({pkt.name}): {reply.props.get('reason')}",
            )

    def _xid(self) -> int:
        self._next_xid += 1
        return self._next_xid

    def _reply(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        xid = pkt.props.get("X")
        fut = self._waiting.get(xid) if isinstance(xid, int) else None
        if fut is not None and not fut.done():
            fut.set_result(pkt)

    # -- on the other brokers ------------------------------------------------------------

    def _prepare(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """Step 1 on the new master: keep the record the master sent."""
        status, reason = Status.OK, None
        try:
            self._from_master(link, pkt)
            self._keep_records(pkt)
            self._prepared = str(pkt.props.get("UUID"))
            log.info("received the change record from master broker %s", link.address)
        except (RouterError, ChangeRecordError, gp.GPacketError) as exc:
            status, reason = Status.PRECONDITION_FAILED, getattr(exc, "reason", str(exc))
            log.warning("%s from %s refused: %s", pkt.name, link.address, reason)
        reply: dict[str, object] = {"X": pkt.props.get("X", JLong(0)), "S": status}
        if reason:
            reply["reason"] = reason
        link.send(gp.GPacket(gp.G_NEW_MASTER_BROKER_PREPARE_REPLY, reply))

    def _new_master(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        """Step 3 on every other broker: the master broker is ``pkt``'s from now on."""
        status, reason = Status.OK, None
        try:
            new = (str(pkt.props.get("host")), int(pkt.props.get("port") or 0))  # type: ignore[call-overload]
            master = self.cfg.master
            sender = link.address
            if (
                master is None
                or sender is None
                or not (
                    _same((sender.host, sender.port), master)
                    or _same((sender.host, sender.port), new)
                )
            ):
                raise RouterError(
                    Status.PRECONDITION_FAILED,
                    f"{pkt.name} from {sender}, which is neither the master broker nor the new one",
                )
            if not _same(new, master):
                if self.cfg.is_me(*new):
                    if self._prepared is None or self._prepared != pkt.props.get("UUID"):
                        raise RouterError(
                            Status.PRECONDITION_FAILED,
                            "this broker was not sent that change record (no prepare)",
                        )
                    assert self.instance_dir is not None
                    self.changes.record = ChangeRecord(self.instance_dir)
                    self._prepared = None
                    log.info("this broker is the master broker now")
                self._follow(new)
        except (RouterError, ValueError) as exc:
            status, reason = Status.PRECONDITION_FAILED, getattr(exc, "reason", str(exc))
            log.warning("%s from %s refused: %s", pkt.name, link.address, reason)
        reply: dict[str, object] = {
            "X": pkt.props.get("X", JLong(0)),
            "UUID": pkt.props.get("UUID"),
            "S": status,
        }
        if reason:
            reply["reason"] = reason
        link.send(gp.GPacket(gp.G_NEW_MASTER_BROKER_REPLY, reply))

    def _from_master(self, link: BrokerLink, pkt: gp.GPacket) -> None:
        master, sender = self.cfg.master, link.address
        if master is None or sender is None or not _same((sender.host, sender.port), master):
            raise RouterError(
                Status.PRECONDITION_FAILED,
                f"{sender} is not the master broker of this broker: {pkt.name} refused",
            )
        if self.instance_dir is None:
            raise RouterError(Status.PRECONDITION_FAILED, "this broker keeps no files")

    def _keep_records(self, pkt: gp.GPacket) -> None:
        records = gp.split_concatenated(pkt.payload) if pkt.payload else []
        count = pkt.props.get("C")
        if count != len(records):
            raise RouterError(
                Status.BAD_REQUEST, f"{len(records)} records sent where C says {count}"
            )
        assert self.instance_dir is not None
        d = record_dir(self.instance_dir)
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / "changerecord.tmp"
        tmp.write_bytes(b"".join(gp.encode(r, stamp=False) for r in records))
        tmp.replace(d / "changerecord")

    def _follow(self, new: tuple[str, int]) -> None:
        """Take ``new`` as the master broker, here and in the saved configuration."""
        if not self.cfg.is_me(*new):
            self.changes.record = None
            if self.instance_dir is not None:
                # What the record held is here already: the next sync starts from now.
                write_last_sync(self.instance_dir, int(time.time() * 1000))
        self.cfg.master = new
        self.save_master(address_text(new))


def _same(a: tuple[str, int], b: tuple[str, int]) -> bool:
    return a[1] == b[1] and same_host(a[0], b[0])


def _address_props(addr: gp.BrokerAddress) -> dict[str, object]:
    # As OpenMQ's BrokerAddressImpl.writeBrokerAddress names a broker in a GPacket.
    return {"instanceName": addr.instance, "HA": False, "port": addr.port, "host": addr.host}
