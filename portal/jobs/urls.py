"""URLs of the Jobs page and the log archives (included from portal/urls.py)."""

from django.urls import path

from . import views

urlpatterns = [
    path("jobs/", views.jobs, name="jobs"),
    path("jobs/<str:name>/schedule/", views.schedule_update, name="job_schedule"),
    path("jobs/<str:name>/run/", views.schedule_run, name="job_run"),
    path("log/archives/<str:name>", views.log_archive, name="log_archive"),
]
