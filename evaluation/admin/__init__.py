"""The Django admin: where staff define personas, topics, agents and read results."""

from django.contrib import admin as _admin

from evaluation.admin import batches, catalog, drift, judging, llm, queues, ratelimits, runs, suites  # noqa: F401
from evaluation.admin.fields import check_json_fields

check_json_fields(_admin.site)
