"""What every REST view shares: the administrator check, the broker connection, query
parameter parsing, the Python-side filtering and paging of broker lists, and the schema
annotations (each operation documents its errors)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

from broker.admintools.broker_handle import BrokerAdmin
from broker.admintools.credentials import default_admin

from .pagination import Pagination
from .permissions import IsAdministrator
from .serializers import DEST_TYPES, ErrorSerializer

ERRORS: dict[int, str] = {
    400: "Bad input (nothing was changed).",
    401: "Not authenticated.",
    403: "Not an administrator, or the broker forbids it.",
    404: "No such object.",
    409: "Refused in the current state (nothing was changed).",
    413: "The request body is too large.",
    501: "The broker does not support this operation.",
    502: "The broker refused the request.",
    503: "The broker cannot be reached.",
}
DB_ERRORS = (400, 401, 403, 404, 409)
BROKER_INDEX_MAX = 2**31 - 1  # list positions travel as Java ints


def doc(
    summary: str,
    ok: Any = None,
    *,
    code: int = 200,
    request: Any = None,
    params: Iterable[Any] = (),
    description: str = "",
    errors: Iterable[int] = tuple(ERRORS),
    ok_description: str = "",
    operation_id: str | None = None,
) -> Callable:
    """extend_schema for one operation: its answer ``ok`` (None: an empty 204) and its
    error answers, all ``{"detail": ...}`` (:class:`ErrorSerializer`)."""
    responses: dict[int, Any] = {
        code: OpenApiResponse(ok, description=ok_description) if ok is not None else None
    }
    codes = [c for c in errors if c != 413]
    if request is not None:
        codes.append(413)
    for status in sorted(codes):
        responses[status] = OpenApiResponse(ErrorSerializer, description=ERRORS[status])
    return extend_schema(
        summary=summary,
        description=description or None,
        request=request,
        responses=responses,
        parameters=list(params) or None,
        operation_id=operation_id,
    )


def path_param(
    name: str, description: str, type_: Any = OpenApiTypes.STR, **kw
) -> OpenApiParameter:
    return OpenApiParameter(name, type_, OpenApiParameter.PATH, description=description, **kw)


DEST_TYPE_PARAM = path_param("type", "queue or topic", enum=list(DEST_TYPES))
DEST_NAME_PARAM = path_param("name", "The destination's name.")


def dest_type(value: str) -> str:
    if value not in DEST_TYPES:
        raise exceptions.NotFound(f"unknown destination type {value!r}: queue or topic")
    return value


class AdminView(APIView):
    """An administrator's view of the broker or its user repository."""

    permission_classes = [IsAdministrator]

    @property
    def admin(self) -> BrokerAdmin:
        return default_admin()

    @property
    def actor(self) -> str:
        return self.request.user.get_username()

    def query(self, serializer_class) -> dict[str, Any]:
        """The request's query parameters, validated by ``serializer_class`` (400)."""
        s = serializer_class(data=self.request.query_params.dict())
        s.is_valid(raise_exception=True)
        return dict(s.validated_data)

    def body(self, serializer_class, **kw) -> dict[str, Any]:
        """The request's body, validated by ``serializer_class`` (400)."""
        data = self.request.data
        if not isinstance(data, Mapping):
            raise exceptions.ValidationError({"non_field_errors": ["a JSON object is expected"]})
        s = serializer_class(data=data, **kw)
        s.is_valid(raise_exception=True)
        return dict(s.validated_data)


class RowListView(AdminView):
    """A list of broker rows (plain dicts from one action), filtered, ordered and paged
    here in Python: ``search`` over :attr:`search_fields`, exact matches, ``ordering``,
    then ``page``/``page_size``."""

    pagination_class = Pagination
    search_fields: tuple[str, ...] = ()

    def page(
        self,
        rows: list[dict[str, Any]],
        serializer_class,
        params: Mapping[str, Any] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
    ):
        params = params or {}
        needle = (params.get("search") or "").lower()
        if needle and self.search_fields:
            rows = [
                r
                for r in rows
                if any(needle in str(r.get(f, "")).lower() for f in self.search_fields)
            ]
        for key, value in (where or {}).items():
            if value is not None:
                rows = [r for r in rows if r.get(key) == value]
        ordering = params.get("ordering")
        if ordering:
            field = ordering.lstrip("-")
            rows = sorted(
                rows,
                key=lambda r: (r.get(field) is None, r.get(field)),
                reverse=ordering.startswith("-"),
            )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(page, many=True).data)

    def broker_page(self, fetch: Callable[[int, int], tuple[list, int]], serializer_class):
        """A page of a list the broker pages itself: ``fetch(start, limit)`` -- one action
        -- returns (that window's rows, how many there are in all).  The same
        ``page``/``page_size`` parameters and answer as :meth:`page`."""
        paginator = self.pagination_class()
        request = self.request
        size = paginator.get_page_size(request) or Pagination.page_size
        raw = request.query_params.get(paginator.page_query_param) or "1"
        try:
            number = int(raw)
        except ValueError:
            number = 0
        if number < 1 or (number - 1) * size > BROKER_INDEX_MAX:
            raise exceptions.NotFound("Invalid page.")
        rows, total = fetch((number - 1) * size, size)
        if number > 1 and (number - 1) * size >= total:
            raise exceptions.NotFound("Invalid page.")
        url = request.build_absolute_uri()
        param = paginator.page_query_param
        following = replace_query_param(url, param, number + 1) if number * size < total else None
        if number <= 1:
            previous = None
        elif number == 2:
            previous = remove_query_param(url, param)
        else:
            previous = replace_query_param(url, param, number - 1)
        return Response(
            {
                "count": total,
                "next": following,
                "previous": previous,
                "results": serializer_class(rows, many=True).data,
            }
        )


class QuerysetListView(GenericAPIView):
    """A database list: the action's queryset, its django-filter FilterSet, paged; each
    row rendered by :attr:`render` (the action's ``*_dict``)."""

    permission_classes = [IsAdministrator]
    pagination_class = Pagination
    render: Callable[[Any], Any] | None = None
    row_serializer: Any = None

    @property
    def actor(self) -> str:
        return self.request.user.get_username()

    def list_response(self):
        qs = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(qs)
        render = type(self).render
        rows = [render(obj) for obj in page] if render is not None else page
        return self.get_paginated_response(self.row_serializer(rows, many=True).data)

    def body(self, serializer_class) -> dict[str, Any]:
        data = self.request.data
        if not isinstance(data, Mapping):
            raise exceptions.ValidationError({"non_field_errors": ["a JSON object is expected"]})
        s = serializer_class(data=data)
        s.is_valid(raise_exception=True)
        return dict(s.validated_data)
