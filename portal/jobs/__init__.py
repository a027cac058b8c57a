"""Background jobs on Celery: expiry reclamation, log rollover, their schedules and runs."""
