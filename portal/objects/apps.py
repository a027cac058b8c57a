"""Django app configuration for the administered objects."""

from django.apps import AppConfig


class ObjectsConfig(AppConfig):
    """The ``objects`` app: administered objects and their object stores."""

    name = "portal.objects"
    label = "objects"
    verbose_name = "Administered objects"
    default_auto_field = "django.db.models.BigAutoField"
