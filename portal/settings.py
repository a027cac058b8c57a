"""Django settings for the portal and the broker, read from the environment.

DATABASE_URL        database (default: SQLite at <BASE_DIR>/var/db.sqlite3)
DJANGO_SECRET_KEY   secret key (a development default is used when unset)
DJANGO_DEBUG        "1"/"true"/"yes"/"on" for debug mode
ALLOWED_HOSTS       comma-separated host names
REDIS_URL           Redis (redis://host:port/db) for Celery and the Channels layer:
                    set, CHANNEL_LAYERS is channels_redis' pub/sub layer on it, so the
                    broker's live events reach the portal's WebSockets; unset, the
                    in-memory layer (one process only: no live events from the broker)
IMQ_VARHOME         broker var home (default: <BASE_DIR>/var)
IMQ_INSTANCE        broker instance name (default: imqbroker)
IMQ_PORT            broker port mapper port (default: 7676)
IMQ_JMS_PORT        jms service port (default: 0, dynamic)
IMQ_ADMIN_PORT      admin service port (default: 0, dynamic)
IMQ_BROKER_HOST     host of the broker the portal administers (default: localhost; its
                    port mapper is IMQ_PORT, default 7676)
IMQ_PORTAL_SECRET_FILE  the password of the portal's own broker account imq.portal, which
                    the portal, the REST API, /metrics and the jobs log in to the broker
                    with (default: <IMQ_VARHOME>/portal.secret, made at first use, 0600;
                    broker/admin/credentials.py)
IMQ_ADMIN_USER      instead, an administrator the operator manages (LDAP, a passwd
IMQ_ADMIN_PASSWORD  file, a broker on another database): its name (default admin) and
IMQ_ADMIN_PASSWORD_FILE  its password, or a file holding it (read again when it changes)
IMQ_ADMIN_SECURE    "true": the portal, REST API, /metrics and the jobs reach the broker
                    over its TLS admin service (ssladmin) instead of admin
IMQ_ADMIN_TRUSTSTORE  with IMQ_ADMIN_SECURE, a PEM file of the certificates to trust
                    (default: the system's CAs and the local instance's keystore.crt)

Behind a TLS-terminating proxy (docs/operators/running.md, "HTTPS"):
CSRF_TRUSTED_ORIGINS  comma-separated origins the browser sees, e.g.
                    https://mq.example.com (Django refuses a login form posted from
                    another origin than its own)
TRUST_X_FORWARDED_PROTO  "true": a request with X-Forwarded-Proto: https counts as
                    HTTPS (SECURE_PROXY_SSL_HEADER); only behind a proxy that sets it
USE_X_FORWARDED_HOST  "true": the host is the proxy's X-Forwarded-Host
SECURE_COOKIES      "true": session and CSRF cookies only over HTTPS (default: true when
                    the portal serves HTTPS itself, PORTAL_HTTPS_CERT, or
                    TRUST_X_FORWARDED_PROTO is on)
PORTAL_LDAP_RECHECK_SECONDS  with the LDAP user repository, how long the portal trusts
                    its last look at a logged-in user's groups (default: 30; 0: ask the
                    directory on every request)

METRICS_ALLOWED_ADDRESSES  addresses / networks that may read /metrics without logging in
                    (comma-separated; default loopback only: 127.0.0.0/8,::1)
METRICS_TOKEN       a bearer token that may read /metrics from anywhere (unset: none)
METRICS_DESTINATIONS_LIMIT  /metrics exports only the N deepest destinations (0: all)
JOBS_BROKERS        brokers (host:port of their port mappers, comma-separated) the expiry
                    job tells to sweep (default: IMQ_BROKER_HOST:IMQ_PORT)
JOBS_STORE_STALE_BEATS  a database-store broker instance whose heartbeat is older than
                    this many of its intervals counts as stopped: the expiry job reclaims
                    its expired rows (default 3)
LOG_DB_RETENTION_DAYS  log records older than this leave the table for archives (default 7)
LOG_ARCHIVE_DIR     where those gzip archives go (default: <IMQ_VARHOME>/log-archives)
METRICS_RAW_URL     the raw metrics store the brokers write and the Spark rollups read
                    (a directory or any Spark/pyarrow URL, e.g. s3a://bucket/raw;
                    default: <IMQ_VARHOME>/metrics-raw)
SPARK_MASTER        where the rollup job runs (default: local[*]; e.g. spark://host:7077)

LOGGING is deliberately not configured: the broker sets up its own (broker/logsetup.py).
"""

import os
import sys
from pathlib import Path

import dj_database_url

from broker import props as imq


def _env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

# Development-only default; deployments must set DJANGO_SECRET_KEY.
SECRET_KEY = os.environ.get(
    "DJANGO_SECRET_KEY", "django-insecure-dev-only-openmq-py-portal-change-me"
)
DEBUG = _env_bool("DJANGO_DEBUG")
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

REDIS_URL = os.environ.get("REDIS_URL", "")

IMQ_VARHOME = Path(os.environ.get("IMQ_VARHOME") or VAR_DIR)
IMQ_INSTANCE = os.environ.get("IMQ_INSTANCE") or imq.DEFAULT_INSTANCE
# Ports from the environment; -port and -D on the runbroker command line win over them.
IMQ_PORTS = {
    prop: os.environ[env]
    for env, prop in (
        ("IMQ_PORT", imq.PORTMAPPER_PORT.name),
        ("IMQ_JMS_PORT", imq.service_port("jms", "tcp")),
        ("IMQ_ADMIN_PORT", imq.service_port("admin", "tcp")),
    )
    if os.environ.get(env)
}

# The broker the portal, the REST API and imqcmd administer (through its admin service).
IMQ_BROKER_HOST = os.environ.get("IMQ_BROKER_HOST") or "localhost"
IMQ_BROKER_PORT = int(os.environ.get("IMQ_PORT") or imq.PORTMAPPER_PORT.default or 0)
# Who the portal logs in to that broker as: broker.admin.credentials.broker_credentials().
IMQ_PORTAL_SECRET_FILE = Path(
    os.environ.get("IMQ_PORTAL_SECRET_FILE") or IMQ_VARHOME / "portal.secret"
)
IMQ_ADMIN_USER = os.environ.get("IMQ_ADMIN_USER", "")
IMQ_ADMIN_PASSWORD = os.environ.get("IMQ_ADMIN_PASSWORD", "")
IMQ_ADMIN_PASSWORD_FILE = os.environ.get("IMQ_ADMIN_PASSWORD_FILE", "")
IMQ_ADMIN_SECURE = _env_bool("IMQ_ADMIN_SECURE")
IMQ_ADMIN_TRUSTSTORE = os.environ.get("IMQ_ADMIN_TRUSTSTORE") or None

# HTTPS: served here (broker/security/https.py) or terminated by a proxy in front.
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", [])
if _env_bool("TRUST_X_FORWARDED_PROTO"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
USE_X_FORWARDED_HOST = _env_bool("USE_X_FORWARDED_HOST")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _env_bool(
    "SECURE_COOKIES",
    bool(os.environ.get("PORTAL_HTTPS_CERT")) or _env_bool("TRUST_X_FORWARDED_PROTO"),
)
# portal/auth.py: an LDAP user's administrator rights are re-read at most this often.
PORTAL_LDAP_RECHECK_SECONDS = float(os.environ.get("PORTAL_LDAP_RECHECK_SECONDS") or 30)

# The Prometheus endpoint /metrics (portal/prometheus.py): who may scrape without logging in.
METRICS_ALLOWED_ADDRESSES = _env_list("METRICS_ALLOWED_ADDRESSES", ["127.0.0.0/8", "::1"])
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_DESTINATIONS_LIMIT = int(os.environ.get("METRICS_DESTINATIONS_LIMIT") or 0)

# The metrics pipeline (portal/pipeline/): the brokers' raw samples, and where Spark runs.
METRICS_RAW_URL = os.environ.get("METRICS_RAW_URL") or str(IMQ_VARHOME / "metrics-raw")
SPARK_MASTER = os.environ.get("SPARK_MASTER") or "local[*]"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "broker.apps.BrokerAppConfig",
    "portal.pipeline",
    "django_celery_beat",
    "portal.jobs",
    "portal.objects",
]

# daphne's runserver serves ASGI (WebSockets) like production's daphne, so it goes first
# for that command; every other manage.py process (the broker, imqcmd, the workers) would
# spend half a second importing twisted for nothing.
if sys.argv[1:2] == ["runserver"]:
    INSTALLED_APPS.insert(0, "daphne")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
ASGI_APPLICATION = "portal.asgi.application"

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

_database_url = os.environ.get("DATABASE_URL")
if not _database_url:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    _database_url = f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(_database_url)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The broker's writer threads, the portal and tests write concurrently:
    # wait for the lock instead of failing with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("timeout", 20)
    # Writers take the lock when they begin, so concurrent writers wait instead of
    # failing with "database is locked" half way through a transaction.
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
    # Write-ahead log: a commit is one append and one fsync of the log (synchronous
    # stays FULL) instead of a rollback journal written, synced and deleted; readers
    # (the portal) no longer wait for the broker's writers.
    DATABASES["default"]["OPTIONS"].setdefault("init_command", "PRAGMA journal_mode=WAL")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Channels: the broker publishes live events (broker/server/events.py) that the portal's
# WebSocket consumers (portal/consumers.py) forward.  Across processes that takes Redis:
# channels_redis' pub/sub layer, where a group_send is one PUBLISH and nothing is queued
# for absent listeners (right for once-a-second samples).  Without REDIS_URL the
# in-memory layer, which only reaches consumers in the same process.
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Portal users are the broker's users (database, passwd file or LDAP: portal/auth.py).
AUTHENTICATION_BACKENDS = ["portal.auth.BrokerUserBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Celery (portal/celery.py): Redis is its broker; no result backend (runs are recorded
# in the jobs' own tables); schedules in django-celery-beat's tables, edited on the
# portal's Jobs page.
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The brokers the expiry job tells to sweep (host:port of their port mappers).
JOBS_BROKERS = _env_list("JOBS_BROKERS", [f"{IMQ_BROKER_HOST}:{IMQ_BROKER_PORT}"])
# The job also reclaims database-store rows of instances whose heartbeat is older than
# this many of their heartbeat intervals (imq.persist.jdbc.heartbeat.interval).
JOBS_STORE_STALE_BEATS = float(os.environ.get("JOBS_STORE_STALE_BEATS") or 3)
# The log table's rollover: records older than this go to gzip archives in this directory.
LOG_DB_RETENTION_DAYS = float(os.environ.get("LOG_DB_RETENTION_DAYS") or 7)
LOG_ARCHIVE_DIR = Path(os.environ.get("LOG_ARCHIVE_DIR") or IMQ_VARHOME / "log-archives")

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

# The REST API (portal/api): token or session authentication, administrators only,
# JSON in and out, every list paginated, errors as {"detail": ...}.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First: an anonymous request then gets 401 with "WWW-Authenticate: Token".
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["portal.api.permissions.IsAdministrator"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "portal.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

# The OpenAPI schema (/api/schema/) and its docs (/api/docs/: Swagger UI, /api/redoc/),
# served from drf-spectacular-sidecar's static files: no CDN needed.
SPECTACULAR_SETTINGS = {
    "TITLE": "OpenMQ-py broker administration API",
    "DESCRIPTION": (
        "Administer the broker (services, destinations, messages, connections, durable "
        "subscriptions, transactions), its users, groups and access control rules, and read "
        "its log.  Authenticate with a token from POST /api/token/ (header "
        '"Authorization: Token <key>") or a portal session; only administrators (members '
        "of the broker's admin group) may use it.  Every change is recorded in the log with "
        'who made it.  Errors are JSON {"detail": "..."}; a refused request changes '
        "nothing.  Lists are paged with page and page_size (at most 1000); the broker pages "
        "its destinations itself, so a page costs the same with 10 or 10,000 of them."
    ),
    "VERSION": "1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SCHEMA_PATH_PREFIX": "/api/",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "DestinationTypeEnum": ["queue", "topic"],
        "ServiceTypeEnum": ["NORMAL", "ADMIN"],
        "AdministeredObjectTypeEnum": ["q", "t", "cf", "xcf"],
    },
}
