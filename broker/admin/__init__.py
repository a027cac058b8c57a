"""Admin tools' side of the admin protocol (admin.md): :class:`~broker.admin.client.AdminClient`."""

from .client import AdminClient, AdminError

__all__ = ["AdminClient", "AdminError"]
