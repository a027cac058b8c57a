"""WebSocket routes of the portal (wired into portal/asgi.py)."""

from django.urls import path

from portal.consumers import OverviewConsumer

websocket_urlpatterns = [
    path("ws/overview/", OverviewConsumer.as_asgi(), name="ws-overview"),
]
