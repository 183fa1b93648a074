"""HTTP half of the session protocol: create a session, read it back, health."""

from django.db import connection
from django.http import JsonResponse


def health_db(request):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})
