"""Message stores: the file store (default) and the database store."""

from __future__ import annotations

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
        return DatabaseStore(
            config.instance,
            sync=True,
            heartbeat_interval=float(config.get(props.PERSIST_JDBC_HEARTBEAT)),
            address=f"{config.get(props.HOSTNAME) or socket.gethostname()}:"
            f"{config.get(props.PORTMAPPER_PORT)}",
        )
    raise ConfigError(f"imq.persist.store: unknown store {kind!r} (file or jdbc)")
