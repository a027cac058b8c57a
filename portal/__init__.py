"""The portal (Django project).

Its Celery app (``portal.celery``) is not imported here, as Celery's Django recipe does:
every manage.py process (the broker, imqcmd, migrate) would pay a quarter of a second for
it. ``celery -A portal`` finds ``portal.celery.app`` by itself, the worker binds the
``shared_task`` functions to it, and the portal sends jobs by name through it
(portal/jobs/actions.py).
"""
