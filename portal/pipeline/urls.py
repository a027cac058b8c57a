"""URLs of the pipeline's pages (included from portal/urls.py)."""

from django.urls import path

from . import views

urlpatterns = [
    path("history/", views.history, name="history"),
    path("history/data/", views.history_data, name="history_data"),
    path("history/broker/<str:broker>/", views.history, name="history_broker"),
    path("pipeline/", views.pipeline, name="pipeline"),
]
