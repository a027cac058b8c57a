"""The OpenAPI schema generator's view of our views (drf-spectacular)."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as BaseAutoSchema
from drf_spectacular.utils import OpenApiResponse


class AutoSchema(BaseAutoSchema):
    """Tells a list operation by its documented success answer (``Serializer(many=True)``)
    even when the responses are given per status code, so lists get ``*_list`` operation
    IDs, their page/page_size parameters and their filters' parameters."""

    def _is_list_view(self, serializer=None) -> bool:
        if serializer is None:
            responses = self.get_response_serializers()
            if isinstance(responses, dict):
                for code in sorted(responses, key=str):
                    if str(code).startswith("2"):
                        ok = responses[code]
                        if isinstance(ok, OpenApiResponse):
                            ok = ok.response
                        return super()._is_list_view(ok) if ok is not None else False
        return super()._is_list_view(serializer)

    def get_description(self) -> str:
        """The operation's own description, else its view's docstring when that view
        class has one of its own (never a base class's)."""
        method = getattr(self.view, getattr(self.view, "action", self.method.lower()), None)
        doc = (getattr(method, "__doc__", None) or "").strip()
        if not doc:
            doc = (self.view.__class__.__dict__.get("__doc__") or "").strip()
        from drf_spectacular.plumbing import get_doc

        return get_doc(type("_", (), {"__doc__": doc})) if doc else ""
