"""Django app configuration for the background jobs."""

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class JobsConfig(AppConfig):
    """The ``jobs`` app: schedules (django-celery-beat), expiry and log rollover runs."""

    name = "portal.jobs"
    label = "jobs"
    verbose_name = "Background jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from .schedules import ensure_schedules_after_migrate

        post_migrate.connect(ensure_schedules_after_migrate, dispatch_uid="jobs.schedules")
