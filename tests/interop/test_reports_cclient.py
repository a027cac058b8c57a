"""The stock C client (libmqcrt) reads a broker-made report's IBM MQ properties."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from broker.protocol import mqreports as mq
from openmq_client import BytesMessage, JInt, Queue, connect

from .conftest import CProbe
from .test_cclient import parse_recv_props

pytestmark = pytest.mark.timeout(300)

BODY = bytes(range(200))


def test_c_client_reads_coa_and_cod_reports(broker: Any, c_probe: CProbe) -> None:
    q = f"rptc_{uuid.uuid4().hex[:10]}"
    replies = q + "_replies"
    sent: dict[str, str] = {}

    async def request_and_consume() -> None:
        conn = await connect(broker.host, broker.portmapper_port, request_timeout=20)
        try:
            sess = await conn.create_session()
            prod = await sess.create_producer(Queue(q))
            original = BytesMessage(
                BODY,
                properties={
                    mq.MSG_TYPE: JInt(mq.MQMT_REQUEST),
                    mq.REPORT_COA: JInt(mq.MQRO_COA_WITH_DATA),
                    mq.REPORT_COD: JInt(mq.MQRO_COD_WITH_FULL_DATA),
                },
                reply_to=Queue(replies),
            )
            await prod.send(original)
            sent["id"] = original.message_id or ""
            cons = await sess.create_consumer(Queue(q))
            await conn.start()
            assert await cons.receive(10) is not None  # consumed: the COD follows
        finally:
            await conn.close()

    asyncio.run(request_and_consume())
    r = c_probe.run(broker, "recv-props", replies)
    assert r.checks == {"recv_props": "ok"}, r.explain()
    got = parse_recv_props(r)
    by_feedback = {m["prop.JMS_IBM_Feedback"]: m for m in got}
    assert set(by_feedback) == {("int32", str(mq.MQFB_COA)), ("int32", str(mq.MQFB_COD))}, (
        r.explain()
    )
    coa = by_feedback[("int32", str(mq.MQFB_COA))]
    cod = by_feedback[("int32", str(mq.MQFB_COD))]
    for m in (coa, cod):
        assert m["prop.JMS_IBM_MsgType"] == ("int32", str(mq.MQMT_REPORT))
        assert m["header.MQCorrelationID"] == ("string", sent["id"])
        assert m["header.MQMessageID"][1] != sent["id"]
    assert coa["body"] == ("bytes", BODY[:100].hex())
    assert cod["body"] == ("bytes", BODY.hex())
