"""Django app configuration for the broker's shared data model."""

from django.apps import AppConfig


class BrokerAppConfig(AppConfig):
    """The ``broker`` app (named so as not to clash with ``broker.config.BrokerConfig``)."""

    name = "broker"
    label = "broker"
    verbose_name = "OpenMQ broker"
    default_auto_field = "django.db.models.BigAutoField"
