"""System checks (`manage.py check`, `check --deploy`): configurations that cannot work are named before they fail."""

from evaluation.checks import database, deployment  # noqa: F401  (each registers its checks)
