# Sourced by bin/*: make sure .venv exists with the project and its test tools installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
stamp="$ROOT/.venv/.installed"
if [ ! -x "$PY" ] || [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "Setting up .venv (Python packages from pyproject.toml)..." >&2
  python3 -m venv .venv
  "$PY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  "$PY" -m pip install -q --disable-pip-version-check -e '.[dev,redis]' 2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$PY" -c "import django, channels, daphne, django_q, rest_framework, openai, anthropic, pytest_django" \
    || { echo "error: installing the Python packages failed (see above)" >&2; exit 1; }
  touch "$stamp"
fi
