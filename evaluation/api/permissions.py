"""Who may call an operation: a staff user holding the Django model permission each view names.

The API is the staff's door, as the admin and the dashboard are: a user who is not staff (`is_staff`)
is refused every operation, whatever groups or permissions they hold. Among staff, the groups
(viewer, operator) and the permissions given one by one decide.
"""

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

NOT_STAFF = "this operation needs a staff user (is_staff): the API is for staff only, whatever permissions a user holds"


def may(user: Any, permission: str) -> bool:
    """Whether an active staff user holds the permission (superusers hold every permission)."""
    return bool(user and user.is_authenticated and user.is_active and user.is_staff and user.has_perm(permission))


class RequiredPermission(BasePermission):
    """An authenticated staff user holding the view's `required_permission` (e.g. "evaluation.start_run").

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
        if not user.is_staff:
            self.message = NOT_STAFF
            return False
        self.message = f"this operation needs the permission {needed!r}"
        return may(user, needed)
