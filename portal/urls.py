"""Portal URL configuration: the REST API under /api/, the pages under /."""

from django.http import HttpRequest, HttpResponse
from django.urls import include, path

from portal.prometheus import metrics_view
from portal.ums.config import ums_config


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness probe: the portal process answers."""
    return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/", include("portal.api.urls")),
    path(f"{ums_config().context_root}/", include("portal.ums.urls")),
    path("", include("portal.pipeline.urls")),
    path("", include("portal.jobs.urls")),
    path("", include("portal.objects.urls")),
    path("", include("portal.ui.urls")),
]
