"""Start a conventional cluster of real broker processes on loopback (tests, bench)."""

from __future__ import annotations

import time
from pathlib import Path

from broker.launcher import BrokerProcess, free_port, read_portmapper, start_broker


def start_cluster(
    tmp: Path, n: int = 3, *props: str, names: tuple[str, ...] = ("A", "B", "C")
) -> list[BrokerProcess]:
    """``n`` brokers naming each other in imq.cluster.brokerlist; waits until linked."""
    pms = [free_port() for _ in range(n)]
    brokerlist = ",".join(f"127.0.0.1:{p}" for p in pms)
    out = []
    try:
        for i, pm in enumerate(pms):
            out.append(start_member(tmp / names[i], brokerlist, pm, names[i], *props))
        wait_linked(out)
    except BaseException:
        for b in out:
            b.stop()
        raise
    return out


def start_member(tmp: Path, brokerlist: str, pm: int, name: str, *props: str) -> BrokerProcess:
    tmp.mkdir(parents=True, exist_ok=True)
    b = start_broker(
        tmp,
        f"imq.cluster.brokerlist={brokerlist}",
        "imq.cluster.ping.interval=1",
        *props,
        instance=name,
        portmapper_port=pm,
    )
    b.extra["brokerlist"] = brokerlist
    return b


def links_up(b: BrokerProcess) -> int:
    """How many cluster links the broker's log says are up now."""
    text = b.log_text()
    return (
        text.count(" up (dialled)")
        + text.count(" up (accepted)")
        - (text.count(" lost: ") + text.count("left the cluster"))
    )


def wait_for(pred, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def wait_linked(brokers: list[BrokerProcess], timeout: float = 30.0) -> None:
    want = len(brokers) - 1
    wait_for(lambda: all(links_up(b) >= want for b in brokers), timeout, "cluster links")


def portmapper_table(b: BrokerProcess) -> str:
    return read_portmapper(b.host, b.portmapper_port).decode()
