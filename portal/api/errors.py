"""Errors as JSON ``{"detail": "..."}`` with a status that says whose fault it was.

* bad input: 400 (DRF validation errors also carry the per-field ``errors``);
* :class:`~broker.admintools.security_actions.NotFound` 404, ``Conflict`` 409;
* the broker refused (:class:`~broker.admintools.client.AdminError`): its status when it is
  400, 403, 404, 409 or 501, else 502 with the broker's text;
* a request body over DATA_UPLOAD_MAX_MEMORY_SIZE: 413;
* the broker cannot be reached (:class:`~broker.admintools.broker_handle.BrokerUnavailable`): 503.

Every refusal is decided before the action changes anything (actions validate first).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from broker.admintools.actions import ActionError, AdminError, BrokerUnavailable
from broker.admintools.security_actions import Conflict, NotFound

log = logging.getLogger("portal.api")

BROKER_STATUSES = {400, 403, 404, 409, 501}


def _summary(detail, prefix: str = "") -> str:
    """One line out of DRF's nested error detail."""
    if isinstance(detail, dict):
        parts = []
        for key, value in detail.items():
            name = "" if key == "non_field_errors" else f"{prefix}{key}"
            text = _summary(value, f"{name}." if name else "")
            parts.append(f"{name}: {text}" if name and not isinstance(value, dict) else text)
        return "; ".join(p for p in parts if p)
    if isinstance(detail, list):
        return " ".join(_summary(item, prefix) for item in detail)
    return str(detail)


def error_response(code: int, detail: str, **extra) -> Response:
    return Response({"detail": detail, **extra}, status=code)


def exception_handler(exc, context):
    if isinstance(exc, NotFound):
        return error_response(status.HTTP_404_NOT_FOUND, str(exc))
    if isinstance(exc, Conflict):
        return error_response(status.HTTP_409_CONFLICT, str(exc))
    if isinstance(exc, ActionError):
        return error_response(status.HTTP_400_BAD_REQUEST, str(exc))
    if isinstance(exc, AdminError):
        text = exc.text or f"the broker refused the request (status {exc.status})"
        if exc.status in BROKER_STATUSES:
            return error_response(exc.status, text)
        return error_response(
            status.HTTP_502_BAD_GATEWAY, f"the broker answered status {exc.status}: {text}"
        )
    if isinstance(exc, BrokerUnavailable):
        return error_response(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc))
    if isinstance(exc, RequestDataTooBig):
        return error_response(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            f"the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes",
        )
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        summary = _summary(detail) or "invalid input"
        body = {"detail": f"invalid input: {summary}"}
        if isinstance(detail, dict):
            body["errors"] = detail
        return Response(body, status=exc.status_code)
    response = drf_exception_handler(exc, context)
    if response is not None and not (isinstance(response.data, dict) and "detail" in response.data):
        response.data = {"detail": _summary(response.data)}
    return response
