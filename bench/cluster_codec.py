"""The cluster codec's per-message costs, in process (no sockets, no brokers).

    .venv/bin/python bench/cluster_codec.py

Prints the decode of a typical G_MESSAGE_DATA with its property table shared between
packets of the same table (gpacket._PROPS) and without, and what acknowledging one message
per G_MESSAGE_ACK costs (as OpenMQ's broker requires) against one batched packet.
"""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.protocol import gpacket as gp  # noqa: E402
from broker.protocol.jtypes import JLong  # noqa: E402
from broker.protocol.properties import encode_properties  # noqa: E402

ADDRESS = {
    "instanceName": "A",
    "HA": False,
    "port": 7676,
    "brokerSession": JLong(123456789012),
    "host": "198.18.0.1",
}
UID = gp.ConsumerUID(1234567890123, 99, gp.BrokerAddress("198.18.0.2", "B", 7677))
KEYS = [bytes([i % 256]) * 32 for i in range(50)]


def best(fn, per: int, number: int) -> float:
    """Microseconds per item, best of 7."""
    return min(timeit.repeat(fn, number=number, repeat=7)) / number / per * 1e6


def ack_batch() -> bytes:
    w = gp.BodyWriter()
    for k in KEYS:
        w.raw(k)
        UID.write(w)
    props = {**ADDRESS, "T": 3, "C": len(KEYS), "messageBrokerSession": JLong(5)}
    return gp.encode(gp.GPacket(gp.G_MESSAGE_ACK, props, w.bytes()))


def ack_single() -> list[bytes]:
    table = encode_properties({**ADDRESS, "T": 3, "C": 1, "messageBrokerSession": JLong(5)})
    out = []
    for k in KEYS:
        w = gp.BodyWriter()
        w.raw(k)
        UID.write(w)
        out.append(gp.encode_parts(gp.G_MESSAGE_ACK, table, w.bytes()))
    return out


def main() -> None:
    props = {**ADDRESS, "D": False, "C": 1, "CUID-DCT:1234567890123": 0}
    data = gp.encode(gp.GPacket(gp.G_MESSAGE_DATA, props, b"x" * 300))
    shared = best(lambda: gp.decode(data), 1, 20000)
    saved = gp._RECURRING_PROPS
    gp._RECURRING_PROPS = frozenset()
    try:
        own = best(lambda: gp.decode(data), 1, 20000)
    finally:
        gp._RECURRING_PROPS = saved
    print(f"G_MESSAGE_DATA decode: {shared:.2f} us with the shared table, {own:.2f} us without")
    batch, single = ack_batch(), ack_single()
    print(
        f"acks, per message: send {best(ack_batch, len(KEYS), 400):.2f} us batched, "
        f"{best(ack_single, len(KEYS), 400):.2f} us one per packet; decode "
        f"{best(lambda: gp.decode(batch), len(KEYS), 400):.2f} us batched, "
        f"{best(lambda: [gp.decode(d) for d in single], len(KEYS), 400):.2f} us one per packet"
    )


if __name__ == "__main__":
    main()
