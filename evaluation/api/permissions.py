"""Who may call an operation: Django's own model permissions, named by each view."""

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request


class RequiredPermission(BasePermission):
    """An authenticated user holding the view's `required_permission` (e.g. "evaluation.start_run").

    A view that names none is refused to everyone: a new endpoint cannot go out open by mistake.
    """

    message = "you do not have the permission this operation needs"

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_active):
            return False
        needed = getattr(view, "required_permission", None)
        if not needed:
            return False
        self.message = f"this operation needs the permission {needed!r}"
        return bool(user.has_perm(needed))
