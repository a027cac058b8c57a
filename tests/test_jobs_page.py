"""The portal's Jobs page (administrators only): schedules shown and edited, the last
expiry and log rollover runs, and the log archives offered for download on the log page."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

pytestmark = [pytest.mark.fast, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def admin_client(settings, tmp_path: Path):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from broker.admintools import security_actions

    settings.LOG_ARCHIVE_DIR = tmp_path / "archives"
    user = get_user_model().objects.create_user("jobsadmin", is_staff=True)
    security_actions.create_user("test", "jobsadmin", "jobsadmin-pw", ["admin"])
    client = Client()
    client.force_login(user)
    return client


def test_jobs_page_shows_and_edits_schedules_and_runs(admin_client) -> None:
    from django_celery_beat.models import PeriodicTask

    from portal.jobs.models import ExpiryRun, ExpiryRunItem

    run = ExpiryRun.objects.create(broker="b1 (127.0.0.1:7676)", started=timezone.now())
    ExpiryRunItem.objects.create(run=run, destination="orders", to_dmq=3, discarded=2)
    page = admin_client.get("/jobs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "expiry-reclamation" in html and "portal.jobs.tasks.reclaim_expired" in html
    assert 'value="60"' in html  # imq.message.expiration.interval's default
    assert "queue orders: 3 to DMQ, 2 discarded" in html and "b1 (127.0.0.1:7676)" in html

    answer = admin_client.post("/jobs/expiry-reclamation/schedule/", {"every": "15"})
    assert answer.status_code == 302
    task = PeriodicTask.objects.get(name="expiry-reclamation")
    assert task.interval.every == 15 and task.enabled is False
    assert (
        admin_client.post("/jobs/nope/schedule/", {"every": "5", "enabled": "on"}).status_code
        == 302
    )
    assert "no schedule named" in admin_client.get("/jobs/").content.decode()


def test_log_archives_are_listed_and_downloaded(admin_client, settings) -> None:
    from broker.models import LogRecord
    from portal.jobs.logroll import roll_log_table

    old = timezone.now() - timedelta(days=30)
    LogRecord.objects.bulk_create(
        LogRecord(timestamp=old, level="WARNING", logger="t", message=f"m{i}") for i in range(3)
    )
    run = roll_log_table()
    assert run.records == 3, list(LogRecord.objects.values_list("timestamp", "message"))
    assert not LogRecord.objects.filter(timestamp__lt=timezone.now() - timedelta(days=7)).exists()
    log_page = admin_client.get("/log/").content.decode()
    assert f'href="/log/archives/{run.archive}"' in log_page
    got = admin_client.get(f"/log/archives/{run.archive}")
    assert got.status_code == 200
    lines = gzip.decompress(b"".join(got.streaming_content)).decode().splitlines()
    assert [json.loads(ln)["message"] for ln in lines] == ["m0", "m1", "m2"]
    assert admin_client.get("/log/archives/..%2Fdb.sqlite3").status_code == 404


def test_jobs_pages_are_for_administrators_only(settings) -> None:
    from django.test import Client

    anonymous = Client()
    for url in ("/jobs/", "/log/archives/logrecords-1-2-20260101T000000Z.jsonl.gz"):
        answer = anonymous.get(url)
        assert answer.status_code == 302 and "/login/" in answer["Location"]
    assert anonymous.post("/jobs/expiry-reclamation/run/").status_code == 302
