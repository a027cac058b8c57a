"""The portal (Django project); its Celery app is loaded with it, as Celery's Django
integration expects, so ``shared_task`` functions bind to it."""

from .celery import app as celery_app

__all__ = ("celery_app",)
