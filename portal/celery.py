"""The portal's Celery application: background jobs run by a worker and beat.

Configuration comes from Django settings under the ``CELERY_`` namespace (the broker is
``REDIS_URL``, schedules live in django-celery-beat's tables); tasks are discovered in
the installed apps' ``tasks`` modules.  Start with ``celery -A portal worker -B`` (what
``manage.py up`` runs).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
