"""Suites under test live in a test's own tmp_path and in this folder: both are suite folders here."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def suite_folders(fast_llm_settings, tmp_path):
    """The shipped suite folders plus tmp_path and tests/suites; `tests.suites` may be imported."""
    evaluation = fast_llm_settings.EVALUATION
    fast_llm_settings.EVALUATION = {
        **evaluation,
        "SUITE_DIRS": [*evaluation["SUITE_DIRS"], tmp_path, HERE],
        "SUITE_TOOL_PACKAGES": [*evaluation.get("SUITE_TOOL_PACKAGES", []), "tests.suites"],
    }
    return fast_llm_settings.EVALUATION
