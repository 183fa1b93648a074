"""The Django admin: where staff define personas, topics, agents and read results."""

from evaluation.admin import catalog, drift, judging, llm, runs, suites  # noqa: F401
