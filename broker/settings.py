"""Django settings of the broker process (``manage.py runbroker``, ``imqbrokerd``), read
from the environment; the portal's (portal/settings.py) extend them for every other
process.  Only what the broker uses: its data model and the database, its instance and
ports, the Channels layer its live events go out on, the raw metrics it writes.  No REST
API, OpenAPI schema, Celery schedules or portal apps are loaded in the broker
(tests/test_layering.py checks it).

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
METRICS_RAW_URL     the raw metrics store the brokers write and the Spark rollups read
                    (a directory or any Spark/pyarrow URL, e.g. s3a://bucket/raw;
                    default: <IMQ_VARHOME>/metrics-raw)

The broker migrates its own tables when it starts (runbroker); the portal's are made by
``manage.py migrate``, under the portal's settings.  LOGGING is deliberately not
configured: the broker sets up its own (broker/logsetup.py).
"""

import os
from pathlib import Path

import dj_database_url

from broker import props as imq


def env_bool(name: str, default: bool = False) -> bool:
    """An environment variable as a flag ("1", "true", "yes", "on")."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    """An environment variable as a comma-separated list."""
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
DEBUG = env_bool("DJANGO_DEBUG")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

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

# The metrics pipeline's raw samples (broker/server/events.py writes them).
METRICS_RAW_URL = os.environ.get("METRICS_RAW_URL") or str(IMQ_VARHOME / "metrics-raw")

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "broker.apps.BrokerAppConfig",
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

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
