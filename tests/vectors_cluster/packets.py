"""Print the packets of a capture (capture.py's JSON), both directions merged in the
order their GPacket timestamps say: ``python -m tests.vectors_cluster.packets FILE``.

Each TCP flow is put back together by sequence number, cut into link packets and
GPackets (broker/protocol/gpacket.py) and printed one a line with its properties."""

from __future__ import annotations

import json
import sys
from collections import defaultdict

from broker.protocol import gpacket as gp


def flows(records: list) -> dict[tuple[str, str], bytes]:
    """(source, destination) -> the bytes that flowed, in sequence order."""
    segs: dict[tuple[str, str], dict[int, bytes]] = defaultdict(dict)
    for _t, src, dst, seq, data in records:
        segs[src, dst][seq] = bytes.fromhex(data)
    out = {}
    for key, by_seq in segs.items():
        buf = bytearray()
        expect = None
        for seq in sorted(by_seq):
            data = by_seq[seq]
            if expect is not None and seq < expect:  # overlapping retransmission
                data = data[expect - seq :]
            buf += data
            expect = seq + len(by_seq[seq])
        out[key] = bytes(buf)
    return out


def packets(data: bytes) -> list[gp.GPacket | gp.LinkPacket]:
    return gp.GPacketReader().feed(data)


def show(pkt: gp.GPacket | gp.LinkPacket) -> str:
    if isinstance(pkt, gp.LinkPacket):
        return f"link packet {pkt.type} ({len(pkt.body)} bytes)"
    bits = " A" if pkt.wants_reply else ""
    props = {
        k: v
        for k, v in pkt.props.items()
        if k
        not in ("instanceName", "host", "port", "HA", "brokerSession", "storeSession", "brokerID")
    }
    return f"{pkt.name}{bits} {props} payload {len(pkt.payload)}"


def main(path: str) -> None:
    rows = []
    for (src, dst), data in flows(json.load(open(path))).items():
        for pkt in packets(data):
            ts = pkt.timestamp if isinstance(pkt, gp.GPacket) else 0
            rows.append((ts, f"{src} -> {dst}", show(pkt)))
    for ts, way, text in sorted(rows, key=lambda r: r[0]):
        print(ts, way, text)


if __name__ == "__main__":
    main(sys.argv[1])
