"""Acknowledging after a message's home broker left the cluster, with the stock Java
client (HomeGone.java): the consumer's broker answers as OpenMQ's does -- ACKNOWLEDGE
GONE (410) with JMQRemote and the consumer's id, and a local transaction's COMMIT the
same after rolling its work back -- so the client knows its acknowledgement did not
count (C4108 for CLIENT_ACKNOWLEDGE, TransactionRolledBackException C4109 for the
commit) instead of being told "done" for a message its home delivers again.  Our
brokers only: the stock broker's clusters need a private network namespace.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from openmq_client import Queue, TextMessage, connect
from tests.cluster_procs import start_cluster, wait_for

from .jvm import Paused

pytestmark = pytest.mark.timeout(300)


def test_acknowledging_a_message_of_a_broker_that_is_gone(
    tmp_path: Path, java_programs: Any
) -> None:
    home, here = start_cluster(tmp_path, 2)
    run = None
    try:

        async def send() -> None:
            conn = await connect(home.host, home.portmapper_port)
            try:
                sess = await conn.create_session()
                for name in ("goneAck", "goneTxn"):
                    prod = await sess.create_producer(Queue(name))
                    await prod.send(TextMessage(name))
            finally:
                await conn.close()

        asyncio.run(send())
        run = Paused(java_programs.command("HomeGone", here, "goneAck", "goneTxn"))
        assert run.until("info received"), "\n".join(run.before)
        home.proc.kill()  # SIGKILL: gone without a GOODBYE
        wait_for(lambda: " lost: " in here.log_text(), 30, "the link to the home broker lost")
        result = run.finish()
        result.assert_ok(
            [
                "received_both",
                "ack_after_home_gone_fails_remote",
                "commit_after_home_gone_rolls_back",
                "session_goes_on",
            ]
        )
        text = here.log_text()
        # Since its (last) start: a start the launcher retried on a taken port logs one.
        assert "Traceback" not in text[text.rfind(" ready") :]
        assert "of a remote broker that is gone" in text
    finally:
        if run is not None:
            run.kill()
        here.stop()
        home.stop()
