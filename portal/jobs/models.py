"""Records of the background jobs' runs, shown on the portal's Jobs page."""

from __future__ import annotations

from django.db import models


class JobStatus(models.TextChoices):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"


class ExpiryRun(models.Model):
    """One broker told to sweep its expired messages (or, ``broker`` = "store:<instance>",
    a stopped broker's database-store rows reclaimed by the job itself)."""

    broker = models.CharField(max_length=255)
    started = models.DateTimeField(db_index=True)
    finished = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.RUNNING)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-started", "-id"]

    def __str__(self) -> str:
        return f"expiry {self.broker} {self.started:%Y-%m-%d %H:%M:%S} {self.status}"

    @property
    def to_dmq(self) -> int:
        return sum(item.to_dmq for item in self.items.all())

    @property
    def discarded(self) -> int:
        return sum(item.discarded for item in self.items.all())


class ExpiryRunItem(models.Model):
    """Per destination of an :class:`ExpiryRun`: expired messages moved to the DMQ and
    discarded."""

    run = models.ForeignKey(ExpiryRun, on_delete=models.CASCADE, related_name="items")
    destination = models.CharField(max_length=255)
    dest_type = models.CharField(max_length=8, default="queue")
    to_dmq = models.PositiveIntegerField(default=0)
    discarded = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["dest_type", "destination"]


class LogRolloverRun(models.Model):
    """One roll of the database log table: records up to ``last_id`` (from
    ``first_id``) written to ``archive`` and deleted from the table."""

    started = models.DateTimeField(db_index=True)
    finished = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.RUNNING)
    error = models.TextField(blank=True, default="")
    cutoff = models.DateTimeField(null=True, blank=True)
    archive = models.CharField(max_length=255, blank=True, default="")
    first_id = models.BigIntegerField(null=True, blank=True)
    last_id = models.BigIntegerField(null=True, blank=True)
    records = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started", "-id"]
