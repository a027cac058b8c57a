"""Message stores: the file store (default) and the database store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker import props

if TYPE_CHECKING:
    from broker.config import BrokerConfig

    from .base import Store


def open_store(config: BrokerConfig) -> Store:
    """The store ``imq.persist.store`` names: ``file`` (default) or ``jdbc``."""
    from broker.config import ConfigError

    kind = config.get(props.PERSIST_STORE).lower()
    sync = config.get(props.PERSIST_FILE_SYNC)
    if kind == "file":
        from pathlib import Path

        from .filestore import FileStore

        where = config.get(props.PERSIST_FILE_DIRPATH)
        directory = Path(where) if where else config.instance_dir / "filestore"
        # Tuning (see FileStore): zero-filled segment space ahead of the records (default
        # with sync), and writing on the event loop while the writer thread is idle.
        return FileStore(
            directory,
            sync=sync,
            preallocate=config.get(props.PERSIST_FILE_PREALLOCATE),
            inline=config.get(props.PERSIST_FILE_SYNC_INLINE),
        )
    if kind == "jdbc":
        import socket

        from .dbstore import DatabaseStore

        # As OpenMQ's JDBC store: the reply waits for the database commit, always.  The
        # heartbeat tells the expiry job this instance's rows are in use (ownership.py);
        # the address is the broker's name in DMQ copies (RouterSettings.broker_name).
        address = (
            f"{config.get(props.HOSTNAME) or socket.gethostname()}:"
            f"{config.get(props.PORTMAPPER_PORT)}"
        )
        create = config.get(props.PERSIST_STORE_CREATE_ALL)
        ha = ha_settings(config)
        if ha is not None:
            # An HA cluster member: its rows are its broker id's, it beats at the
            # cluster's monitor interval, and a live broker with its id keeps it out.
            return DatabaseStore(
                ha.broker_id,
                sync=True,
                heartbeat_interval=ha.interval,
                address=address,
                ha=True,
                cluster_id=ha.cluster_id,
                stale_beats=ha.threshold,
                claim_wait=ha.interval * ha.threshold * 2,
                create_tables=create,
            )
        return DatabaseStore(
            config.instance,
            sync=True,
            heartbeat_interval=config.get(props.PERSIST_JDBC_HEARTBEAT),
            address=address,
            create_tables=create,
        )
    raise ConfigError(f"imq.persist.store: unknown store {kind!r} (file or jdbc)")


@dataclass
class HASettings:
    """An HA cluster member's identity and monitor timing (imq.cluster.ha=true)."""

    broker_id: str
    cluster_id: str
    interval: float  # imq.cluster.monitor.interval: heartbeat and monitor pass
    threshold: float  # imq.cluster.monitor.threshold: missed beats before takeover


def ha_settings(config: BrokerConfig) -> HASettings | None:
    """The HA settings, or None when imq.cluster.ha is not true; ConfigError when the
    HA cluster is misconfigured (it needs the database store on PostgreSQL, a broker id
    and a cluster id)."""
    from broker.config import ConfigError

    if config.get(props.CLUSTER_HA).strip().lower() != "true":
        return None
    if config.get(props.PERSIST_STORE).lower() != "jdbc":
        raise ConfigError(
            "imq.cluster.ha=true needs the shared database store (imq.persist.store=jdbc)"
        )
    broker_id = config.get(props.BROKER_ID) or config.get(props.JDBC_BROKER_ID)
    if not broker_id:
        raise ConfigError("imq.cluster.ha=true needs imq.brokerid (unique in the cluster)")
    cluster_id = config.get(props.CLUSTER_ID)
    if not cluster_id:
        raise ConfigError("imq.cluster.ha=true needs imq.cluster.clusterid")
    from django.db import connections

    if connections["default"].vendor != "postgresql":
        raise ConfigError(
            "imq.cluster.ha=true needs a PostgreSQL database (DATABASE_URL) its brokers share"
        )
    try:
        interval = float(config.get(props.CLUSTER_MONITOR_INTERVAL) or 30)
        threshold = float(config.get(props.CLUSTER_MONITOR_THRESHOLD) or 3)
    except ValueError as exc:
        raise ConfigError(f"imq.cluster.monitor.interval/threshold: {exc}") from None
    if interval <= 0 or threshold < 1:
        raise ConfigError("imq.cluster.monitor.interval must be > 0 and threshold >= 1")
    return HASettings(broker_id, cluster_id, interval, threshold)
