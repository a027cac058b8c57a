"""Record TCP payloads on lo (run inside the namespace): flow -> {seq: bytes}."""

import json
import signal
import socket
import struct
import sys
import time

ports = {int(p) for p in sys.argv[2].split(",")}
out = sys.argv[1]
dur = float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
s.bind(("lo", 0))
s.settimeout(0.5)
rec = []
end = time.time() + dur
# SIGTERM ends the recording early (the scenario that started it is done).
signal.signal(signal.SIGTERM, lambda *_: globals().update(end=0))
while time.time() < end:
    try:
        frame, addr = s.recvfrom(70000)
    except TimeoutError:
        continue
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    ip = frame[14:]
    if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
        continue
    ihl = (ip[0] & 15) * 4
    tot = struct.unpack(">H", ip[2:4])[0]
    src, dst = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
    tcp = ip[ihl:tot]
    sp, dp, seq = struct.unpack(">HHI", tcp[:8])
    off = (tcp[12] >> 4) * 4
    data = tcp[off:]
    if not data or not (sp in ports or dp in ports):
        continue
    rec.append([time.time(), f"{src}:{sp}", f"{dst}:{dp}", seq, data.hex()])
json.dump(rec, open(out, "w"))
