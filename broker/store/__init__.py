"""Message stores: the file store (default) and the database store."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.config import BrokerConfig

    from .base import Store


def open_store(config: BrokerConfig) -> Store:
    """The store ``imq.persist.store`` names: ``file`` (default) or ``jdbc``."""
    from broker.config import ConfigError

    kind = (config.get("imq.persist.store") or "file").lower()
    sync = config.get_bool("imq.persist.file.sync.enabled", False)
    if kind == "file":
        from pathlib import Path

        from .filestore import FileStore

        where = config.get("imq.persist.file.dirpath")
        directory = Path(where) if where else config.instance_dir / "filestore"
        # Tuning (see FileStore): zero-filled segment space ahead of the records (default
        # with sync), and writing on the event loop while the writer thread is idle.
        return FileStore(
            directory,
            sync=sync,
            preallocate=config.get_bool("imq.persist.file.preallocate", sync),
            inline=config.get_bool("imq.persist.file.sync.inline", True),
        )
    if kind == "jdbc":
        from .dbstore import DatabaseStore

        # As OpenMQ's JDBC store: the reply waits for the database commit, always.
        return DatabaseStore(config.instance, sync=True)
    raise ConfigError(f"imq.persist.store: unknown store {kind!r} (file or jdbc)")
