"""WSGI entry point (HTTP only; WebSockets need the ASGI app under uvicorn)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalproject.settings")
application = get_wsgi_application()
