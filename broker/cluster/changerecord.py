"""The master broker's configuration change record (docs/developers/protocol.md).

An ordered log of GPackets -- G_UPDATE_DESTINATION, G_REM_DESTINATION, G_NEW_INTEREST
(a durable subscription made), G_REM_DURABLE_INTEREST -- each with a ``UUID`` property,
kept by the broker named in ``imq.cluster.masterbroker``.  The file is the packets back
to back (each self-delimiting by its size field), which is also the format of
``runbroker -backup FILE`` and what ``-restore FILE`` reads.

The other brokers keep the time they last synchronised with the master
(``lastsync``), and ask for the records since then when they link to it.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from broker.protocol import gpacket as gp

RECORDED = {
    gp.G_UPDATE_DESTINATION,
    gp.G_REM_DESTINATION,
    gp.G_NEW_INTEREST,
    gp.G_REM_DURABLE_INTEREST,
    gp.G_RESET_PERSISTENCE,
}
# Records a little older than the last synchronisation are sent again (clock skew).
SKEW_MS = 2 * 60 * 1000


class ChangeRecordError(ValueError):
    """A change record file that cannot be read (said with the file's name)."""


def record_dir(instance_dir: Path) -> Path:
    return instance_dir / "cluster"


def read_records(path: Path) -> list[gp.GPacket]:
    """The records of a change record (or backup) file; [] when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    try:
        records = gp.split_concatenated(data)
    except gp.GPacketError as exc:
        raise ChangeRecordError(f"{path}: not a change record ({exc})") from None
    for r in records:
        if r.type not in RECORDED:
            raise ChangeRecordError(f"{path}: {r.name} is not a change record entry")
    return records


class ChangeRecord:
    """The master's record, in memory and in ``<instance>/cluster/changerecord``."""

    def __init__(self, instance_dir: Path) -> None:
        self.path = record_dir(instance_dir) / "changerecord"
        self.records = read_records(self.path)

    def append(self, pkt: gp.GPacket) -> gp.GPacket:
        """Record ``pkt`` (a copy with a UUID and the time of recording)."""
        rec = gp.GPacket(pkt.type, {**pkt.props, "UUID": str(uuid.uuid4())}, pkt.payload)
        raw = gp.encode(rec)
        rec = gp.decode(raw)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        self.records.append(rec)
        return rec

    def since(self, ts_ms: int) -> list[gp.GPacket]:
        return [r for r in self.records if r.timestamp > ts_ms - SKEW_MS]


def read_last_sync(instance_dir: Path) -> int:
    try:
        return int((record_dir(instance_dir) / "lastsync").read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0


def write_last_sync(instance_dir: Path, ts_ms: int) -> None:
    d = record_dir(instance_dir)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "lastsync.tmp"
    tmp.write_text(str(ts_ms))
    tmp.replace(d / "lastsync")


def backup(instance_dir: Path, target: Path) -> int:
    """``runbroker -backup FILE``: copy the record to ``target``; how many records."""
    source = record_dir(instance_dir) / "changerecord"
    records = read_records(source)
    target.write_bytes(b"".join(gp.encode(r, stamp=False) for r in records))
    return len(records)


def restore(instance_dir: Path, source: Path) -> int:
    """``runbroker -restore FILE``: replace the record with a backup; how many records."""
    records = read_records(source)
    if not source.exists():
        raise ChangeRecordError(f"{source}: no such file")
    d = record_dir(instance_dir)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / "changerecord.tmp"
    tmp.write_bytes(b"".join(gp.encode(r, stamp=False) for r in records))
    tmp.replace(d / "changerecord")
    return len(records)


def change_event_entry(event: gp.GPacket) -> gp.GPacket:
    """The record entry a G_CONFIG_CHANGE_EVENT carries; GPacketError saying why not."""
    try:
        entry = gp.decode(event.payload)
    except gp.GPacketError as exc:
        raise gp.GPacketError(f"G_CONFIG_CHANGE_EVENT body does not deserialise: {exc}") from None
    if entry.type not in RECORDED:
        raise gp.GPacketError(f"G_CONFIG_CHANGE_EVENT carries {entry.name}, not a record entry")
    return entry


def changes_reply_entries(reply: gp.GPacket) -> list[gp.GPacket]:
    """The record entries of a G_GET_CONFIG_CHANGES_REPLY (as many as its ``C`` says);
    GPacketError saying why when the body is not that."""
    try:
        entries = gp.split_concatenated(reply.payload)
    except gp.GPacketError as exc:
        raise gp.GPacketError(
            f"G_GET_CONFIG_CHANGES_REPLY body does not deserialise: {exc}"
        ) from None
    count = reply.props.get("C")
    if isinstance(count, int) and count != len(entries):
        raise gp.GPacketError(
            f"G_GET_CONFIG_CHANGES_REPLY says {int(count)} record(s) but carries {len(entries)}"
        )
    for e in entries:
        if e.type not in RECORDED:
            raise gp.GPacketError(
                f"G_GET_CONFIG_CHANGES_REPLY carries {e.name}, not a record entry"
            )
    return entries


def now_ms() -> int:
    return int(time.time() * 1000)
