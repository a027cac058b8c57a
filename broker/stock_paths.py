"""Where the stock OpenMQ 6.9 client, broker and captured packets are.

The tests and benchmarks compare ours with what OpenMQ shops run: the stock Java and C
clients, the stock broker and the bytes the real clients wrote. They ship with the
repository under ``third_party/openmq`` (third_party/openmq/README.md: what, from where,
their licences), so a clone stands alone. An environment variable names another copy.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
THIRD_PARTY = ROOT / "third_party" / "openmq"


def _where(variable: str, default: Path) -> Path:
    value = os.environ.get(variable)
    return Path(value) if value else default


# imq.jar, imqadmin.jar and jakarta.jms-api-3.1.0.jar.
JAVA_CLIENT = _where("OPENMQ_JAVA_CLIENT", THIRD_PARTY / "realclient" / "java")
# libmqcrt (lib/) and its headers (include/).
C_CLIENT = _where("OPENMQ_CCLIENT", THIRD_PARTY / "realclient" / "c")
# The stock broker: run.sh PORT VARHOME, its jars under mq/lib.
REALBROKER = _where("OPENMQ_REALBROKER", THIRD_PARTY / "realbroker")
# Packets captured from the real clients, in hex files by conversation.
VECTORS = _where("IMQ_TEST_VECTORS", THIRD_PARTY / "vectors")
# The byte-level facts (packet.md and others) the vectors are read with.
SPEC = _where("IMQ_TEST_SPEC", THIRD_PARTY / "spec")
# The protocol document whose packet table the codec is checked against.
PROTOCOL_SEED = THIRD_PARTY / "seeds" / "000_a0e99a4fa8995b9b.txt"

__all__ = [
    "C_CLIENT",
    "JAVA_CLIENT",
    "PROTOCOL_SEED",
    "REALBROKER",
    "SPEC",
    "THIRD_PARTY",
    "VECTORS",
]
