"""ASGI entry point of the portal (``daphne portal.asgi:application``, or uvicorn).

The UMS gateway's /simple and /xml are answered in front of everything else
(portal/ums/asgi.py: no Django on that path); other HTTP goes to Django; WebSockets
(portal/routing.py) pass the origin check against ALLOWED_HOSTS and get ``scope["user"]``
from the Django session.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

# Set Django up before anything imports models (Channels consumers will).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from portal.routing import websocket_urlpatterns  # noqa: E402
from portal.ums.asgi import UmsApp  # noqa: E402

application = UmsApp(
    ProtocolTypeRouter(
        {
            "http": django_asgi_app,
            "websocket": AllowedHostsOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)
