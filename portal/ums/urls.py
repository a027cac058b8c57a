"""UMS routes, included under the configured context root (``UMS_CONTEXT_ROOT``, /ums)."""

from django.urls import path

from . import views

urlpatterns = [
    path("simple", views.simple, name="ums-simple"),
    path("simple/", views.simple),
    path("xml", views.xml, name="ums-xml"),
    path("demo/", views.demo, name="ums-demo"),
]
