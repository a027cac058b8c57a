"""Page-number pagination for every REST list: ``?page=N&page_size=M`` (50 by default,
at most 1000), answered as ``{"count", "next", "previous", "results"}``.  The same class
pages querysets (users, logs, rules) and the plain lists the broker's actions return."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 1000
