"""Settings, read from the environment so one codebase serves a laptop and a cluster.

Embedded default (nothing set): SQLite in ./data, django-q2's ORM broker, the in-memory channel
layer and the offline LLM provider, DEBUG off, answering on loopback only. Scale-out: DATABASE_URL,
REDIS_URL and provider keys. Production (docs/deployment.md): DJANGO_SECRET_KEY,
DJANGO_ALLOWED_HOSTS and DJANGO_SECURE=1.
"""

import hashlib
import hmac
import os
import secrets
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("EVAL_DATA_DIR", BASE_DIR / "data"))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _local_secret_key(path: Path) -> str:
    """A random key made once and kept in the data folder: a laptop needs no configuration, and no
    install shares a published key. Every process of the install (web, workers) reads the same file."""
    if not path.exists():
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
        try:
            os.link(draft, path)  # atomic: when processes start together, the first key wins
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


# Off unless asked for: the debug pages list every URL and show settings and tracebacks to anyone.
DEBUG = _env_bool("DJANGO_DEBUG", False)
# Production over HTTPS: turns on the HTTPS group below, and makes DJANGO_SECRET_KEY required.
_SECURE = _env_bool("DJANGO_SECURE", False)
# This machine's names, and the one Django's test client sends (the bench scripts use it).
_LOOPBACK_HOSTS = ["localhost", "127.0.0.1", "[::1]", "testserver"]
ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS") or _LOOPBACK_HOSTS
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# A generated key is fine while only this machine can reach the app; anything served to other host
# names, or over HTTPS, is production and must bring its own key (shared by all its processes).
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if _SECURE or not set(ALLOWED_HOSTS) <= set(_LOOPBACK_HOSTS):
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set when DJANGO_SECURE is on or DJANGO_ALLOWED_HOSTS names another host "
            f"than {', '.join(_LOOPBACK_HOSTS)} (see docs/deployment.md)"
        )
    SECRET_KEY = _local_secret_key(DATA_DIR / "secret_key")

# Debug pages and error e-mails mask credentials in URLs (REDIS_URL, DATABASE_URL) as well as secret names.
DEFAULT_EXCEPTION_REPORTER = "evalproject.error_reports.CredentialHidingReporter"
DEFAULT_EXCEPTION_REPORTER_FILTER = "evalproject.error_reports.CredentialHidingFilter"

INSTALLED_APPS = [
    "daphne",
    "evaluation.adminsite.EvaluationAdminConfig",  # django.contrib.admin, its index grouped by task
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_q",
    "axes",
    "csp",
    "evaluation",
]

MIDDLEWARE = [
    "evaluation.web.middleware.NulInUrlMiddleware",  # first: nothing looks a NUL up in PostgreSQL
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "evaluation.web.middleware.DatabaseBusyMiddleware",  # pages: 503 + Retry-After when the pool is exhausted
    # Last, as django-axes asks: it turns a locked-out login into the lockout response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "evalproject.urls"
WSGI_APPLICATION = "evalproject.wsgi.application"
ASGI_APPLICATION = "evalproject.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# No persistent connections (CONN_MAX_AGE=0): under ASGI every request runs in a thread of its own, and a
# connection kept by a thread that has finished is closed only when the garbage collector finds it, so
# idle processes held dozens. Each request and each of our helper threads gives its connection back.
DATABASES = {"default": dj_database_url.parse(os.environ.get("DATABASE_URL", f"sqlite:///{DATA_DIR / 'db.sqlite3'}"))}
DATABASES["default"]["CONN_MAX_AGE"] = 0
# What the deployment runs, for the connection budget that `manage.py check` adds up (docs/scaling.md):
# EVAL_WEB_PROCESSES web processes x EVAL_DB_POOL_MAX + EVAL_QCLUSTERS x (EVAL_Q_WORKERS + the
# cluster's own database-using processes) x EVAL_DB_WORKER_POOL_MAX + EVAL_DB_RESERVE for psql and
# management commands must fit in PostgreSQL's max_connections - superuser_reserved_connections.
_QCLUSTER_PROCESS = sys.argv[1:2] == ["qcluster"]
DATABASE_CONNECTION_BUDGET = {
    "web_processes": int(os.environ.get("EVAL_WEB_PROCESSES", "1")),
    "web_pool": int(os.environ.get("EVAL_DB_POOL_MAX", "8")),
    "qclusters": int(os.environ.get("EVAL_QCLUSTERS", "1")),
    "workers": int(os.environ.get("EVAL_Q_WORKERS", "2")),
    # Besides its workers, a qcluster's sentinel (the scheduler) and monitor (task results) use the
    # database; its pusher and the command's own process do not (measured: bench/connections.py).
    "cluster_processes": 2,
    "worker_pool": int(os.environ.get("EVAL_DB_WORKER_POOL_MAX", "3")),
    "reserve": int(os.environ.get("EVAL_DB_RESERVE", "5")),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Workers and the web process share one file: wait for locks instead of failing at once,
    # take the write lock when a transaction begins (no lock-upgrade deadlocks between processes),
    # and let readers work while one writer writes (WAL).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": float(os.environ.get("EVAL_SQLITE_TIMEOUT", "30")),
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # A file, not memory, so that the test suite's tutor server and worker processes share it.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test_db.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's psycopg pool, one per process, sized for the process's role (docs/scaling.md, "Database
    # connections"). A web process serves many requests at once: up to EVAL_DB_POOL_MAX connections. A
    # `manage.py qcluster` and every process it forks (sentinel, pusher, monitor, workers) runs one task
    # at a time, which uses at most three at once (the run, its heartbeat, its message store): up to
    # EVAL_DB_WORKER_POOL_MAX, none kept while idle, so that forty idle workers do not hold eighty. A
    # request that finds every connection busy waits up to EVAL_DB_POOL_TIMEOUT seconds (2: a person or a
    # client is waiting), then gets a 503 with Retry-After; a worker waits EVAL_DB_WORKER_POOL_TIMEOUT (10)
    # and its writes retry through an outage (runs/outage.py). Either pool gives up reconnecting after its
    # own timeout (psycopg_pool's reconnect_timeout, 300 s by default, whose backoff grew to minutes between
    # attempts): the next request then connects at once, so a returning database serves it at once.
    # `manage.py check` adds the pools up against max_connections (evaluation/checks/database.py).
    if _QCLUSTER_PROCESS:
        _pool_size = {
            "min_size": int(os.environ.get("EVAL_DB_WORKER_POOL_MIN", "0")),
            "max_size": DATABASE_CONNECTION_BUDGET["worker_pool"],
            # Connections above min_size unused this long are closed, one per period.
            "max_idle": float(os.environ.get("EVAL_DB_WORKER_POOL_MAX_IDLE", "60")),
            "timeout": float(os.environ.get("EVAL_DB_WORKER_POOL_TIMEOUT", "10")),
        }
    else:
        _pool_size = {
            "min_size": int(os.environ.get("EVAL_DB_POOL_MIN", "1")),
            "max_size": DATABASE_CONNECTION_BUDGET["web_pool"],
            "max_idle": float(os.environ.get("EVAL_DB_POOL_MAX_IDLE", "300")),
            "timeout": float(os.environ.get("EVAL_DB_POOL_TIMEOUT", "2")),
        }
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        **_pool_size,
        "reconnect_timeout": _pool_size["timeout"],
    }
    # Checked before it is handed out (Django gives the pool ConnectionPool.check_connection, a SELECT 1
    # on a connection idle since its last use): after PostgreSQL restarts, the pool replaces its dead
    # connections instead of handing them out. Django passes the check itself, so it is not a pool option.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Prepared statements: a pooled connection that runs one statement EVAL_DB_PREPARE_THRESHOLD
    # times prepares it, and PostgreSQL stops parsing it anew (and, once a generic plan serves,
    # planning it): a conversation repeats a few statements every turn, and preparing them took a
    # fifth off PostgreSQL's CPU (bench/README.md). psycopg prepares only queries whose parameters
    # go separately, so Django's server-side binding goes with it. "off" behind a pooler that cannot
    # keep prepared statements (PgBouncer in transaction mode before 1.22, or without
    # max_prepared_statements). A statement a migration made stale: evaluation/models/prepared.py.
    _prepare = os.environ.get("EVAL_DB_PREPARE_THRESHOLD", "5").strip().lower()
    if _prepare not in ("", "none", "off"):
        if not _prepare.isdigit():
            raise ImproperlyConfigured(
                f"EVAL_DB_PREPARE_THRESHOLD: expected a number of executions (0 or more) or 'off', got {_prepare!r}"
            )
        _threshold = int(_prepare)
        DATABASES["default"]["OPTIONS"].update({"server_side_binding": True, "prepare_threshold": _threshold})

    _INHERITED_POOLS: list = []

    def _forget_inherited_pools() -> None:
        """A forked process (django-q2 forks its workers) must not use its parent's pool: the idle
        connections in it are the parent's sockets, and the pool's threads did not survive the fork.
        Django makes a new pool on first use; the old one is kept, never closed or collected, because
        closing its connections would end the parent's sessions."""
        base = sys.modules.get("django.db.backends.postgresql.base")
        if base is not None:
            _INHERITED_POOLS.extend(base.DatabaseWrapper._connection_pools.values())
            base.DatabaseWrapper._connection_pools.clear()

    os.register_at_fork(after_in_child=_forget_inherited_pools)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Login throttling (django-axes): after LIMIT wrong passwords for one user from one address, that pair
# is refused for the cool-off; a success before then clears the count. The admin lists the attempts.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first, so a locked-out pair never reaches the password check
    "django.contrib.auth.backends.ModelBackend",
]
_LOGIN_COOLOFF_MINUTES = int(os.environ.get("DJANGO_LOGIN_COOLOFF_MINUTES", "15"))
AXES_FAILURE_LIMIT = int(os.environ.get("DJANGO_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# The cool-off runs from the lockout: retrying meanwhile does not push it back.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_COOLOFF_MESSAGE = (
    "Too many failed logins for this account from your address. "
    f"Try again in {_LOGIN_COOLOFF_MINUTES} minute{'s' if _LOGIN_COOLOFF_MINUTES != 1 else ''}."
)

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
LOGIN_URL = "/admin/login/"

# HTTPS: DJANGO_SECURE=1 turns on the group, and each part can be set on its own.
SECURE_SSL_REDIRECT = _env_bool("DJANGO_SSL_REDIRECT", _SECURE)
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", 365 * 24 * 3600 if _SECURE else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", _SECURE)
SECURE_HSTS_PRELOAD = _env_bool("DJANGO_HSTS_PRELOAD", _SECURE)
SESSION_COOKIE_SECURE = _env_bool("DJANGO_SECURE_COOKIES", _SECURE)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Only behind a proxy that sets X-Forwarded-Proto itself: a client could send the header otherwise.
if _env_bool("DJANGO_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# The browser may run, style, load and connect to the app itself only (django-csp). Nothing inline
# runs: scripts are static files, and transcripts show remote images as links (evaluation.web.markdown).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        # Score bars carry their server-computed width in a style attribute. An attribute cannot load
        # anything (img-src is 'self'), user text never carries one (nh3 removes them), and <style>
        # elements stay blocked by style-src.
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF],
        # 'self' matches ws: and wss: on the same host too (CSP Level 3): the live progress socket.
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    # channels-redis waits for messages with a blocking read of up to 5 s (BZPOPMIN), and redis-py 8
    # gives every socket read a 5 s timeout by default: the two race, the read times out, and the
    # consumer dies (a live WebSocket closes with 1011 after a few quiet seconds). The read timeout
    # must outlast the blocking read; keepalive and a health check find dead connections instead.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": float(os.environ.get("EVAL_REDIS_SOCKET_TIMEOUT", "30")),
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        "health_check_interval": 30,
                    }
                ]
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

Q_CLUSTER = {
    "name": "evaluation",
    "workers": int(os.environ.get("EVAL_Q_WORKERS", "2")),
    # Tasks a cluster takes from the broker ahead of its workers (django-q2's default is workers
    # squared): near the worker count, so with several clusters no task waits in one while another's
    # worker is idle (docs/scaling.md).
    "queue_limit": int(os.environ.get("EVAL_Q_QUEUE_LIMIT") or os.environ.get("EVAL_Q_WORKERS", "2")),
    "timeout": int(os.environ.get("EVAL_TASK_TIMEOUT", "3600")),
    "retry": int(os.environ.get("EVAL_TASK_TIMEOUT", "3600")) + 60,
    "max_attempts": 1,
    "catch_up": False,
    "label": "Background tasks",
    # Tests and one-shot CLI runs set EVAL_Q_SYNC=1 so a task runs in the calling process.
    "sync": _env_bool("EVAL_Q_SYNC", False),
}
if REDIS_URL:
    # django-q2's broker blocks for at most 1 s (BLPOP with a 1 s timeout), well inside redis-py's
    # default 5 s read timeout, so its connection needs none of the channel layer's settings.
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"

REST_FRAMEWORK = {
    # Token first: an anonymous request is then answered 401 with `WWW-Authenticate: Token`
    # (DRF takes the header from the first class); the session serves staff in the browser.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["evaluation.api.permissions.RequiredPermission"],
    # JSON bodies only; beyond DATA_UPLOAD_MAX_MEMORY_SIZE they are refused with 413.
    "DEFAULT_PARSER_CLASSES": ["evaluation.api.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "evaluation.api.schema.AutoSchema",  # says which text a request may send
    "EXCEPTION_HANDLER": "evaluation.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Agent evaluation API",
    "DESCRIPTION": "Start and follow evaluations of conversational agents: tutor runs (simulated students talk "
    "to a tutor, a judge scores it), persona drift of character agents, and EVAL.md suites. Authenticate with "
    "`Authorization: Token <key>` (docs/api.md says how to get one); `GET /api/` lists every operation. "
    'Every error is `{"error": str, "fields": {field: [reasons]}}`.',
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "TAGS": [
        {"name": "runs", "description": "Runs of every kind: list, export, status, cancel, retry."},
        {"name": "tutoring", "description": "Tutor runs: simulated students talk to a tutor; a judge scores it."},
        {"name": "drift", "description": "Persona drift: agents' messages checked against their persona; corrections."},
        {"name": "suites", "description": "EVAL.md suites: a suite's cases run against an agent and checked."},
        {"name": "catalogue", "description": "Topics, personas and agents: the ids a start request names."},
        {"name": "judging", "description": "Judge validity: import labelled conversations; the judge's agreement."},
    ],
    # Fields named `status` and `stage` (a stage, a lifecycle status, or `idle`) and `kind` need their own names.
    "ENUM_NAME_OVERRIDES": {
        "RunKindEnum": "evaluation.models.runs.RunKind",
        "RunStatusEnum": "evaluation.models.runs.RunStatus",
        "RunStageEnum": "evaluation.models.runs.RunStage",
        "RunSourceEnum": "evaluation.models.runs.RunSource",
        "AgentKindEnum": "evaluation.models.agents.Agent.Kind",
        "CurrentStageEnum": "evaluation.api.serializers.CURRENT_STAGES",
    },
    # Swagger UI and Redoc from drf-spectacular-sidecar's static files, not a CDN: no internet needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# The app's own settings, read through evaluation.conf.setting().
EVALUATION = {
    "RUNS_DIR": Path(os.environ.get("EVAL_RUNS_DIR", DATA_DIR / "runs")),
    "PERSONAS_DIR": BASE_DIR / "personas",
    "TOPICS_DIR": BASE_DIR / "topics",
    "PROPOSITIONS_DIR": BASE_DIR / "propositions",
    "CAST_DIR": BASE_DIR / "cast",
    "BASELINES_DIR": BASE_DIR / "baselines",
    "DRIFT_BATCH_SIZE": int(os.environ.get("EVAL_DRIFT_BATCH_SIZE", "20")),
    "GATE_TIMEOUT_SECONDS": float(os.environ.get("EVAL_GATE_TIMEOUT", "5")),
    # Folders a suite file, and every skill, agent and tool file it names, must lie in (symlinks
    # resolved); comma-separated, relative to the project. docs/limits.md.
    "SUITE_DIRS": [
        BASE_DIR / p.strip() for p in os.environ.get("EVAL_SUITE_DIRS", "skills,agents").split(",") if p.strip()
    ],
    # Packages whose modules a suite's `tools:`, `skills:` and `module:` keys may import by dotted
    # name (a .py file inside a suite folder needs none); comma-separated, none by default.
    "SUITE_TOOL_PACKAGES": [p.strip() for p in os.environ.get("EVAL_SUITE_TOOL_PACKAGES", "").split(",") if p.strip()],
    "RECORDINGS_DIR": Path(os.environ.get("EVAL_RECORDINGS_DIR", DATA_DIR / "recordings")),
    # Runs handed to workers at once; more wait `queued` and start, oldest first, as these end.
    "MAX_ACTIVE_RUNS": int(os.environ.get("EVAL_MAX_ACTIVE_RUNS", "32")),
    # Runs that may wait beyond those; a start that would exceed it is refused with 409.
    "MAX_QUEUED_RUNS": int(os.environ.get("EVAL_MAX_QUEUED_RUNS", "1000")),
    # Rows one export (CSV or JSON) may hold; a bigger export is refused with the limit in the message.
    "EXPORT_MAX_ROWS": int(os.environ.get("EVAL_EXPORT_MAX_ROWS", "10000")),
    # The alternative annotator test's epsilon (docs/judging.md): 0.2 against expert annotators, 0.15 skilled,
    # 0.1 crowd workers (Calderon, Reichart and Dror, 2025).
    "ALT_TEST_EPSILON": float(os.environ.get("EVAL_ALT_TEST_EPSILON", "0.2")),
    # Environment variables whose value may be sent somewhere other than their vendor's own endpoint:
    # as the key of a custom base URL (options {"key_env": NAME}) or as an agent's Authorization header.
    "ALLOWED_KEY_VARS": [v.strip() for v in os.environ.get("EVAL_ALLOWED_KEY_VARS", "").split(",") if v.strip()],
    # Hosts a custom base URL may name (empty: any host; it gets no key unless one is configured for it).
    "ALLOWED_BASE_URL_HOSTS": [
        h.strip() for h in os.environ.get("EVAL_ALLOWED_BASE_URL_HOSTS", "").split(",") if h.strip()
    ],
    # A running run whose worker has not beaten its heartbeat for this long is marked interrupted.
    "RUN_STALE_AFTER": float(os.environ.get("EVAL_RUN_STALE_AFTER", "120")),
    # A tutor run judged on less than this share of its planned turns (the tutor stopped answering or became
    # unreachable) is shown with its coverage and left out of comparisons and regression gates, which say so.
    "MIN_COVERAGE": float(os.environ.get("EVAL_MIN_COVERAGE", "0.8")),
    "LLM_MAX_ATTEMPTS": int(os.environ.get("EVAL_LLM_MAX_ATTEMPTS", "3")),
    "LLM_BACKOFF_SECONDS": [5.0, 10.0, 15.0],
    "LLM_TIMEOUT_SECONDS": float(os.environ.get("EVAL_LLM_TIMEOUT", "120")),
    "LLM_CONCURRENCY": int(os.environ.get("EVAL_LLM_CONCURRENCY", "8")),
    # Seconds between two polls of a vendor's batch (docs/batches.md).
    "BATCH_POLL_SECONDS": float(os.environ.get("EVAL_BATCH_POLL_SECONDS", "30")),
    "SERVER_URL": os.environ.get("EVAL_SERVER_URL", "http://127.0.0.1:8000"),
    "SERVE_STATIC": _env_bool("EVAL_SERVE_STATIC", True),
    # HTTP requests a web process works on at once (until their response starts); the others wait in
    # its event loop (0: no limit). Measured best at 2 on two cores (docs/scaling.md).
    "WEB_CONCURRENCY": int(os.environ.get("EVAL_WEB_CONCURRENCY", "2")),
    # Threads a web process answers tutor turns on: one per session answering at once (each waits on an LLM).
    "TUTOR_TURN_THREADS": int(os.environ.get("EVAL_TUTOR_TURN_THREADS", "64")),
    # Problems per reference-tutor session: the session completes when they are done.
    "TUTOR_PROBLEMS": int(os.environ.get("EVAL_TUTOR_PROBLEMS", "8")),
    # Bounds on untrusted input (docs/limits.md): over one, a door answers 413 or 400 naming it.
    "JSON_MAX_DEPTH": int(os.environ.get("EVAL_JSON_MAX_DEPTH", "64")),
    # The longest student or tutor message the session protocol takes (docs/limits.md)
    "MESSAGE_MAX_CHARS": int(os.environ.get("EVAL_MESSAGE_MAX_CHARS", "20000")),
    "CATALOG_MAX_FILE_BYTES": int(os.environ.get("EVAL_CATALOG_MAX_FILE_BYTES", "1000000")),
    "CATALOG_MAX_TEXT_CHARS": int(os.environ.get("EVAL_CATALOG_MAX_TEXT_CHARS", "20000")),
    "CATALOG_MAX_LIST_ITEMS": int(os.environ.get("EVAL_CATALOG_MAX_LIST_ITEMS", "1000")),
    "SUITE_MAX_FILE_BYTES": int(os.environ.get("EVAL_SUITE_MAX_FILE_BYTES", "1000000")),
    "SUITE_MAX_CASES": int(os.environ.get("EVAL_SUITE_MAX_CASES", "500")),
    "INGEST_MAX_RECORDS": int(os.environ.get("EVAL_INGEST_MAX_RECORDS", "5000")),
    "IMPORT_MAX_FILE_BYTES": int(os.environ.get("EVAL_IMPORT_MAX_FILE_BYTES", "20000000")),
    "IMPORT_MAX_RECORDS": int(os.environ.get("EVAL_IMPORT_MAX_RECORDS", "10000")),
    # Creates sessions on the session protocol (docs/session-protocol.md). Unset, it is derived from
    # SECRET_KEY, so the web tier and the workers of one install agree with nothing to configure.
    "PROTOCOL_KEY": os.environ.get("EVAL_PROTOCOL_KEY")
    or hmac.new(SECRET_KEY.encode(), b"evaluation.protocol.key", hashlib.sha256).hexdigest(),
    # Prices live in the price table only (prices/vendors.yaml, the admin's model prices: docs/costs.md).
    # How long a process keeps the price table it read (another process's admin edit shows within this).
    "PRICE_CACHE_SECONDS": float(os.environ.get("EVAL_PRICE_CACHE_SECONDS", "60")),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Credentials inside URLs (a custom base URL's user:password) are masked in every log line.
    "filters": {"redact": {"()": "evaluation.redact.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("EVAL_LOG_LEVEL", "WARNING")},
    # A qcluster's one line per run begun and ended (it otherwise prints nothing while it works); the
    # CLI has its own progress display, so elsewhere only when asked.
    "loggers": {
        "evaluation.runs.lifecycle": {
            "level": os.environ.get("EVAL_RUN_LOG_LEVEL", "INFO" if _QCLUSTER_PROCESS else "WARNING")
        },
        # django-q2's own lines at start and stop ("Q Cluster <name> starting.", "... ready for work",
        # "... stopping."): under the root's WARNING a qcluster said nothing until its first run, which under
        # load was 12 s after it was started.
        "django-q": {"level": os.environ.get("EVAL_Q_LOG_LEVEL", "INFO" if _QCLUSTER_PROCESS else "WARNING")},
    },
}
