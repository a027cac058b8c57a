"""Administered objects and the JNDI object stores they are published to.

Written only through :mod:`portal.objects.actions` (the single write path)."""

from __future__ import annotations

from django.db import models


class ObjectStore(models.Model):
    """A JNDI object store, named by imqobjmgr's -j properties: its initial context
    factory and provider URL (plus the credentials publishing needs).  The store with an
    empty factory is the database alone: objects kept here are published nowhere."""

    name = models.CharField(max_length=200, unique=True)
    factory_initial = models.CharField(max_length=200, blank=True)
    provider_url = models.CharField(max_length=1000, blank=True)
    # java.naming.security.* (authentication, principal, credentials) and any other
    # java.naming.* property given with -j.
    properties = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["factory_initial", "provider_url"], name="objects_store_unique_url"
            )
        ]

    def __str__(self) -> str:
        return self.name


class AdministeredObject(models.Model):
    """A ConnectionFactory, XAConnectionFactory, Queue or Topic bound under
    ``lookup_name`` in ``store``; ``attributes`` holds the values set (OpenMQ's defaults
    fill in the rest)."""

    class Type(models.TextChoices):
        QUEUE = "q", "Queue"
        TOPIC = "t", "Topic"
        CONNECTION_FACTORY = "cf", "ConnectionFactory"
        XA_CONNECTION_FACTORY = "xcf", "XAConnectionFactory"

    store = models.ForeignKey(ObjectStore, on_delete=models.PROTECT, related_name="admin_objects")
    lookup_name = models.CharField(max_length=500)
    obj_type = models.CharField(max_length=3, choices=Type.choices)
    read_only = models.BooleanField(default=False)
    attributes = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["store_id", "lookup_name"]
        constraints = [
            models.UniqueConstraint(fields=["store", "lookup_name"], name="objects_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.lookup_name} ({self.get_obj_type_display()})"
