"""The Jobs page (schedules, expiry runs, log rollover runs) and the log archives'
download, for administrators only; the work is in :mod:`portal.jobs.actions`."""

from __future__ import annotations

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.ui.access import admin_required

from . import actions


@admin_required
def jobs(request: HttpRequest) -> HttpResponse:
    context = {
        "nav": "jobs",
        "schedules": actions.schedules(),
        "expiry_runs": actions.expiry_runs(),
        "rollover_runs": actions.rollover_runs(),
        "archives": actions.log_archives(),
    }
    return render(request, "portal/jobs.html", context)


@admin_required
@require_POST
def schedule_update(request: HttpRequest, name: str) -> HttpResponse:
    try:
        every = int(request.POST.get("every", ""))
    except ValueError:
        messages.error(request, "The interval must be a whole number of seconds.")
        return redirect("jobs")
    enabled = request.POST.get("enabled") == "on"
    try:
        actions.update_schedule(name, every, enabled, user=request.user.get_username())
    except actions.ScheduleError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Schedule {name}: every {every} s, {'on' if enabled else 'off'}."
        )
    return redirect("jobs")


@admin_required
@require_POST
def schedule_run(request: HttpRequest, name: str) -> HttpResponse:
    try:
        actions.run_now(name, user=request.user.get_username())
    except actions.ScheduleError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{name} queued; its run appears below when done.")
    return redirect("jobs")


@admin_required
def log_archive(request: HttpRequest, name: str) -> FileResponse:
    path = actions.log_archive(name)
    if path is None:
        raise Http404("no such log archive")
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)
