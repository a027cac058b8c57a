"""IBM MQ message types in the portal: the message browser shows a message's type,
report options and feedback; the REST API filters a destination's messages by type.
Against the shared test broker, no mocks."""

from __future__ import annotations

import pytest
from django.urls import reverse

from broker.admintools import security_actions
from broker.protocol import mqreports as mq
from broker.protocol.jtypes import JInt
from broker.protocol.types import AckMode
from openmq_client import sync
from openmq_client.destination import Queue
from openmq_client.message import TextMessage

from .test_rest_api import ADMIN, ADMIN_PW, point_at, token_client, unique

pytestmark = pytest.mark.django_db


def fill(b, queue: str) -> None:
    """A plain message, a datagram, a request asking for COA (100 bytes) and COD, and a
    COD report, in that order."""
    with sync.connect(b.host, b.portmapper_port) as conn:
        sess = conn.create_session(AckMode.AUTO_ACKNOWLEDGE)
        prod = sess.create_producer(Queue(queue))
        prod.send(TextMessage("plain"))
        prod.send(TextMessage("datagram", properties={mq.MSG_TYPE: JInt(mq.MQMT_DATAGRAM)}))
        prod.send(
            TextMessage(
                "request",
                properties={
                    mq.MSG_TYPE: JInt(mq.MQMT_REQUEST),
                    mq.REPORT_COA: JInt(mq.MQRO_COA_WITH_DATA),
                    mq.REPORT_COD: JInt(mq.MQRO_COD),
                },
                # Its own queue: the COA report arrives behind it.
                reply_to=Queue(queue + "_replies"),
            )
        )
        prod.send(
            TextMessage(
                "report",
                properties={mq.MSG_TYPE: JInt(mq.MQMT_REPORT), mq.FEEDBACK: JInt(mq.MQFB_COD)},
            )
        )


@pytest.fixture
def api(broker, settings, tmp_path):
    point_at(settings, broker, tmp_path)
    security_actions.create_user("setup", ADMIN, ADMIN_PW, ["admin", "user"])
    return token_client(ADMIN, ADMIN_PW)


def test_rest_filters_messages_by_type(api, broker):
    name = unique("mqrest")
    fill(broker, name)
    url = f"/api/destinations/queue/{name}/messages/"
    rows = api.get(url).json()["results"]
    assert [r["mq_type_name"] for r in rows] == ["", "datagram", "request", "report"]
    request = rows[2]
    assert request["mq_type"] == mq.MQMT_REQUEST
    assert request["report_options"] == "COA (100 bytes), COD"
    assert rows[3]["feedback"] == mq.MQFB_COD and rows[3]["feedback_name"] == "COD (260)"
    for kind, texts in (
        ("request", ["request"]),
        ("datagram", ["datagram"]),
        ("report", ["report"]),
        ("reply", []),
        ("4", ["report"]),
    ):
        got = api.get(url, {"mq_type": kind})
        assert got.status_code == 200, got.content
        assert [r["preview"] for r in got.json()["results"]] == texts, kind
    # Paging counts the matching messages only.
    assert api.get(url, {"mq_type": "request", "start": 1}).json()["results"] == []
    for bad in ("sometimes", "3", "-1"):
        r = api.get(url, {"mq_type": bad})
        assert r.status_code == 400 and "mq_type" in r.content.decode(), bad


def test_message_browser_shows_type_options_and_feedback(api, broker, client):
    from django.contrib.auth import get_user_model

    name = unique("mqui")
    fill(broker, name)
    client.force_login(get_user_model().objects.get(username=ADMIN))
    page = client.get(reverse("messages", args=["q", name]))
    assert page.status_code == 200
    html = page.content.decode()
    assert '<td class="mq-type">datagram</td>' in html
    assert '<td class="mq-reports">COA (100 bytes), COD</td>' in html
    assert '<td class="mq-feedback">COD (260)</td>' in html
    only = client.get(reverse("messages", args=["q", name]), {"mq_type": "report"})
    text = only.content.decode()
    assert text.count('<td class="mq-type">') == 1 and "COD (260)" in text
    bad = client.get(reverse("messages", args=["q", name]), {"mq_type": "nonsense"})
    assert bad.status_code == 200 and "mq_type &#x27;nonsense&#x27;" in bad.content.decode()
    rows = api.get(f"/api/destinations/queue/{name}/messages/", {"mq_type": "request"}).json()
    msg_id = rows["results"][0]["id"]
    detail = client.get(reverse("message", args=["q", name]), {"id": msg_id})
    body = detail.content.decode()
    assert "<th>IBM MQ message type</th><td>request</td>" in body
    assert "<th>Report options</th><td>COA (100 bytes), COD</td>" in body
