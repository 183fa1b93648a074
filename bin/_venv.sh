# Sourced by bin/*: make sure .venv holds the packages pinned in uv.lock.
# The caller sets VENV_EXTRAS to the optional groups it needs ("" for the app alone, "dev redis" for the
# tests); uv installs exactly the locked versions, with a progress display when on a terminal.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
UV_VERSION="0.13.9"
extras="${VENV_EXTRAS:-}"
stamp="$ROOT/.venv/.installed-$(echo "${extras:-runtime}" | tr ' ' '-')"
if [ ! -x "$PY" ] || [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ uv.lock -nt "$stamp" ]; then
  echo "Setting up .venv (packages pinned in uv.lock${extras:+, extras: $extras})..." >&2
  [ -x "$PY" ] || python3 -m venv .venv
  if [ "$("$ROOT/.venv/bin/uv" --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
    "$PY" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  fi
  args=()
  for extra in $extras; do args+=(--extra "$extra"); done
  # --inexact: keep what another command installed (the test tools, uv itself); --locked: uv.lock must match
  # pyproject.toml; never download a Python, use the one this venv was made with. --compile-bytecode:
  # where PYTHONDONTWRITEBYTECODE is set (as in many container images) every process would otherwise
  # compile Django and the rest from source at each start (12 s of CPU for django.setup here, not 2).
  UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT="$ROOT/.venv" \
    "$ROOT/.venv/bin/uv" sync --locked --inexact --compile-bytecode --python "$PY" "${args[@]}" \
    || { echo "error: installing the Python packages failed (see above)" >&2; exit 1; }
  "$PY" -c "import django, channels, daphne, uvicorn, django_q, rest_framework, openai, anthropic, rich" \
    || { echo "error: installing the Python packages failed (see above)" >&2; exit 1; }
  touch "$stamp"
fi
