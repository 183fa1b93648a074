"""Pages of a list: ?limit=&offset=, checked like any other input (a bad value is a 400 naming it)."""

from collections.abc import Callable
from typing import Any

from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from evaluation.api.serializers import QueryInput


class PageInput(QueryInput):
    limit = serializers.IntegerField(min_value=1, required=False)
    offset = serializers.IntegerField(min_value=0, required=False)


class Pagination(LimitOffsetPagination):
    """DRF's limit/offset pages ({count, next, previous, results}), but `?limit=abc` is refused, not ignored.

    A limit above max_limit is lowered to it, as DRF does.
    """

    default_limit = 100
    max_limit = 500

    def _page(self, request: Request) -> dict[str, Any]:
        page = PageInput(data=request.query_params)
        page.is_valid(raise_exception=True)
        return page.validated_data

    def get_limit(self, request: Request) -> int:
        limit = self._page(request).get("limit", self.default_limit)
        return min(limit, self.max_limit)

    def get_offset(self, request: Request) -> int:
        return self._page(request).get("offset", 0)


def paginated(view: Any, request: Request, items: Any, serializer_class: type[serializers.Serializer]) -> Any:
    """One page of `items` (a queryset), serialized, as the paginated response."""
    paginator = view.pagination_class()
    page = paginator.paginate_queryset(items, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)


def paginated_rows(view: Any, request: Request, items: Any, page_data: Callable[[list[Any]], list[Any]]) -> Any:
    """One page of `items` (a queryset), turned into the response's results by `page_data`, as the
    paginated response: for a list whose page is cheaper to build in one go than row by row."""
    paginator = view.pagination_class()
    page = paginator.paginate_queryset(items, request, view=view)
    return paginator.get_paginated_response(page_data(page))
