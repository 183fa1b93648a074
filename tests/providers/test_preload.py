"""What a worker imports before its first run: after preload(), making and using the vendors'
clients imports nothing more (the SDKs import their HTTP transports when the first client is made)."""

import json
import os
import subprocess
import sys

from tests.servers import ROOT

PROBE = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalproject.settings")
import django
django.setup()
from evaluation.providers.registry import ProviderSpec, _stored_credential, build, preload
preload()
_stored_credential("http://127.0.0.1:9/v1")  # the database's first use (driver, compiler) is not the vendors'
before = set(sys.modules)
os.environ["OPENAI_API_KEY"] = os.environ["ANTHROPIC_API_KEY"] = "sk-probe"
for spec in (
    ProviderSpec("openai", "gpt-probe", "http://127.0.0.1:9/v1", {}),
    ProviderSpec("openai", "gpt-probe", "", {}),
    ProviderSpec("anthropic", "claude-probe", "", {}),
):
    build(spec)
# Django's own lazy imports (the credential lookup's SQL compiler) are not the vendors'.
print(json.dumps(sorted(m for m in set(sys.modules) - before if not m.startswith("django."))))
"""


def test_after_preload_a_workers_first_providers_import_nothing_more(tmp_path):
    # An empty SQLite file of its own: the probe's credential lookups touch no test database.
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"} | {"EVAL_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert imported == [], f"imported on first use: {imported}"
