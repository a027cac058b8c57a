"""The metrics pipeline's tables: the Spark job's rollups and the record of its runs."""

from __future__ import annotations

from django.db import models

GRANULARITIES = ("minute", "hour", "day")


class Rollup(models.Model):
    """One bucket (minute, hour or day) of one broker's (``destination=""``) or one
    destination's samples, as computed by portal/pipeline/rollup.py from the raw store.
    A connection service's buckets have ``dest_type="service"`` and its name.

    Totals (msgs_*, bytes_*) are sums over the bucket; rates are per second; latencies in
    ms, null when the samples carried none.
    """

    GRANULARITY_CHOICES = [(g, g) for g in GRANULARITIES]

    broker = models.CharField(max_length=255)
    destination = models.CharField(max_length=255, blank=True, default="")
    dest_type = models.CharField(max_length=16, blank=True, default="")
    granularity = models.CharField(max_length=8, choices=GRANULARITY_CHOICES)
    bucket_start = models.DateTimeField()
    samples = models.IntegerField(default=0)
    depth_min = models.BigIntegerField(null=True)
    depth_avg = models.FloatField(null=True)
    depth_max = models.BigIntegerField(null=True)
    bytes_max = models.BigIntegerField(null=True)
    msgs_in = models.BigIntegerField(default=0)
    msgs_out = models.BigIntegerField(default=0)
    bytes_in = models.BigIntegerField(default=0)
    bytes_out = models.BigIntegerField(default=0)
    rate_in_avg = models.FloatField(null=True)
    rate_in_max = models.FloatField(null=True)
    rate_out_avg = models.FloatField(null=True)
    rate_out_max = models.FloatField(null=True)
    producers_max = models.IntegerField(null=True)
    consumers_max = models.IntegerField(null=True)
    connections_max = models.IntegerField(null=True)
    memory_state_peak = models.IntegerField(null=True, help_text="0 green .. 3 red")
    memory_bytes_max = models.BigIntegerField(null=True)
    latency_p50 = models.FloatField(null=True)
    latency_p95 = models.FloatField(null=True)
    latency_max = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                # dest_type too: a queue and a topic may share a name.
                fields=["broker", "destination", "dest_type", "granularity", "bucket_start"],
                name="pipeline_rollup_bucket_unique_type",
            )
        ]
        indexes = [
            # The history queries: one series, a time range; and the run's replace.
            models.Index(fields=["granularity", "bucket_start"], name="pipeline_rollup_window"),
        ]

    def __str__(self) -> str:
        who = f"{self.broker}/{self.destination}" if self.destination else self.broker
        return f"{who} {self.granularity} {self.bucket_start:%Y-%m-%d %H:%M}"


class PipelineRun(models.Model):
    """One run of the rollup job over the window [since, until)."""

    STATUS_CHOICES = [("running", "running"), ("ok", "ok"), ("failed", "failed")]
    TRIGGER_CHOICES = [("beat", "beat"), ("manual", "manual")]

    started = models.DateTimeField()
    finished = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=8, choices=STATUS_CHOICES, default="running")
    since = models.DateTimeField()
    until = models.DateTimeField()
    rows_in = models.BigIntegerField(default=0)
    rows_out = models.BigIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    trigger = models.CharField(max_length=8, choices=TRIGGER_CHOICES, default="manual")

    class Meta:
        indexes = [models.Index(fields=["-started"], name="pipeline_run_started")]

    @property
    def duration(self) -> float | None:
        """Seconds the run took (None while running)."""
        if self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    def __str__(self) -> str:
        return f"rollup {self.since:%Y-%m-%d %H:%M}..{self.until:%Y-%m-%d %H:%M} {self.status}"
