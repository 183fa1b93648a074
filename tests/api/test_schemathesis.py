"""Schemathesis against the API's own OpenAPI schema, in process (WSGI): every operation, every check
(`--checks all`), as a staff token; a server error, an undocumented status or content type, a response
off its schema, a schema-valid request refused or a schema-violating one accepted fails the test.

Bounded in time: 8 derandomized examples per operation (about 70 s for all of them here; with 40
random examples each, run by hand, it found nothing more).

Some operations take values whose validity the schema cannot state: they name stored records (an
agent, a topic, a persona) or configured providers (`openai/gpt-4o`, a base URL that must be on an
allow-list), hold a rule across fields, or are a file read by its own format's rules (the transcript
import). schemathesis.toml names them: for these operations only, 400 also counts as accepting valid
data (the refusal names the field, as tests/api show); every other check is as strict there.
"""

import json
from datetime import date
from pathlib import Path

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

pytestmark = pytest.mark.django_db


CONFIG = SchemathesisConfig.from_path(Path(__file__).resolve().parents[2] / "schemathesis.toml")
"""The same configuration as the command line's (`schemathesis run .../api/schema/ --checks all` from the
project's folder): the operations whose values the schema cannot state, where 400 also counts as accepting."""


def api_schema() -> schemathesis.schemas.BaseSchema:
    """What `manage.py spectacular --file` writes, served by the app itself."""
    document = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    loaded = schemathesis.openapi.from_dict(document, config=CONFIG)
    loaded.app = get_wsgi_application()
    return loaded


schema = api_schema()


@schema.hook
def filter_query(ctx, query):
    """One rule across two parameters that the schema cannot state: date_from is not after date_to
    (an inverted range is refused with 400 naming date_to, tests/api/test_runs.py)."""
    start, end = (query or {}).get("date_from"), (query or {}).get("date_to")
    try:
        return not (
            isinstance(start, str) and isinstance(end, str) and date.fromisoformat(start) > date.fromisoformat(end)
        )
    except ValueError:
        return True


@pytest.fixture
def in_test_transaction():
    """Keep the test's database connection open across requests, as Django's test client does: the
    WSGI handler would otherwise close it when each response ends."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_answers_every_generated_request_without_a_server_error(case, token, runs, in_test_transaction):
    case.call_and_validate(headers={"Authorization": f"Token {token.key}"})
