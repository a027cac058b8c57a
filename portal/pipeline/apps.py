"""Django app configuration for the metrics pipeline (raw store, Spark rollups, runs)."""

from django.apps import AppConfig


class PipelineConfig(AppConfig):
    """The ``pipeline`` app: the Rollup and PipelineRun tables, the rollup job and task."""

    name = "portal.pipeline"
    label = "pipeline"
    verbose_name = "Metrics pipeline"
    default_auto_field = "django.db.models.BigAutoField"
