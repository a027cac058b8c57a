"""Django settings of the portal and of every process but the broker (the REST API,
the UMS gateway, Celery, imqcmd and the other commands), read from the environment.
They extend the broker's (broker/settings.py: the database, DATABASE_URL, REDIS_URL,
IMQ_VARHOME, IMQ_INSTANCE, IMQ_PORT, IMQ_JMS_PORT, IMQ_ADMIN_PORT, METRICS_RAW_URL,
DJANGO_SECRET_KEY, DJANGO_DEBUG, ALLOWED_HOSTS) with these:

IMQ_BROKER_HOST     host of the broker the portal administers (default: localhost; its
                    port mapper is IMQ_PORT, default 7676)
IMQ_PORTAL_SECRET_FILE  the password of the portal's own broker account imq.portal, which
                    the portal, the REST API, /metrics and the jobs log in to the broker
                    with (default: <IMQ_VARHOME>/portal.secret, made at first use, 0600;
                    broker/admintools/credentials.py)
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
SPARK_MASTER        where the rollup job runs (default: local[*]; e.g. spark://host:7077)

LOGGING is deliberately not configured, as in the broker's.
"""

import os
import sys
from pathlib import Path

from broker import props as imq
from broker.settings import (  # noqa: F401 - the broker's settings are the portal's too
    ALLOWED_HOSTS,
    BASE_DIR,
    CHANNEL_LAYERS,
    DATABASES,
    DEBUG,
    DEFAULT_AUTO_FIELD,
    IMQ_INSTANCE,
    IMQ_PORTS,
    IMQ_VARHOME,
    LANGUAGE_CODE,
    METRICS_RAW_URL,
    REDIS_URL,
    SECRET_KEY,
    TIME_ZONE,
    USE_I18N,
    USE_TZ,
    VAR_DIR,
    env_bool,
    env_list,
)
from broker.settings import INSTALLED_APPS as _BROKER_APPS

# The broker the portal, the REST API and imqcmd administer (through its admin service).
IMQ_BROKER_HOST = os.environ.get("IMQ_BROKER_HOST") or "localhost"
IMQ_BROKER_PORT = int(os.environ.get("IMQ_PORT") or imq.PORTMAPPER_PORT.default or 0)
# Who the portal logs in to that broker as: broker.admintools.credentials.broker_credentials().
IMQ_PORTAL_SECRET_FILE = Path(
    os.environ.get("IMQ_PORTAL_SECRET_FILE") or IMQ_VARHOME / "portal.secret"
)
IMQ_ADMIN_USER = os.environ.get("IMQ_ADMIN_USER", "")
IMQ_ADMIN_PASSWORD = os.environ.get("IMQ_ADMIN_PASSWORD", "")
IMQ_ADMIN_PASSWORD_FILE = os.environ.get("IMQ_ADMIN_PASSWORD_FILE", "")
IMQ_ADMIN_SECURE = env_bool("IMQ_ADMIN_SECURE")
IMQ_ADMIN_TRUSTSTORE = os.environ.get("IMQ_ADMIN_TRUSTSTORE") or None

# HTTPS: served here (broker/security/https.py) or terminated by a proxy in front.
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
if env_bool("TRUST_X_FORWARDED_PROTO"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
USE_X_FORWARDED_HOST = env_bool("USE_X_FORWARDED_HOST")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool(
    "SECURE_COOKIES",
    bool(os.environ.get("PORTAL_HTTPS_CERT")) or env_bool("TRUST_X_FORWARDED_PROTO"),
)
# portal/auth.py: an LDAP user's administrator rights are re-read at most this often.
PORTAL_LDAP_RECHECK_SECONDS = float(os.environ.get("PORTAL_LDAP_RECHECK_SECONDS") or 30)

# The Prometheus endpoint /metrics (portal/prometheus.py): who may scrape without logging in.
METRICS_ALLOWED_ADDRESSES = env_list("METRICS_ALLOWED_ADDRESSES", ["127.0.0.0/8", "::1"])
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_DESTINATIONS_LIMIT = int(os.environ.get("METRICS_DESTINATIONS_LIMIT") or 0)

# The metrics pipeline (portal/pipeline/): where Spark runs (the brokers' raw samples:
# METRICS_RAW_URL, the broker's settings).
SPARK_MASTER = os.environ.get("SPARK_MASTER") or "local[*]"

INSTALLED_APPS = [
    *_BROKER_APPS,
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
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
JOBS_BROKERS = env_list("JOBS_BROKERS", [f"{IMQ_BROKER_HOST}:{IMQ_BROKER_PORT}"])
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
