"""The broker process's side of a cluster: start the cluster service when configured.

A broker is clustered when ``imq.cluster.brokerlist`` (or the file of
``imq.cluster.url``) names other brokers; the service then listens on
``imq.cluster.port`` and is published in the port mapper as ``cluster tcp CLUSTER``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.cluster.config import ClusterConfig
from broker.cluster.service import ClusterService
from broker.protocol.portmapper import ServiceEntry

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("broker.cluster")


async def start_cluster(broker: Broker) -> ClusterService | None:
    """Start the cluster service, or None when this broker is not clustered."""
    pm_port = broker.portmapper_table().services[0].port
    cfg = ClusterConfig.from_config(broker.config, pm_port)
    if not cfg.enabled:
        return None
    if cfg.transport != "tcp":
        log.warning("imq.cluster.transport %s is not available yet; using tcp", cfg.transport)
    service = ClusterService(cfg, broker.router, broker.session_id, broker.config.instance_dir)
    await service.start()
    service._tasks.append(asyncio.create_task(_watch_memory(broker, service)))
    return service


async def _watch_memory(broker: Broker, service: ClusterService) -> None:
    """Cluster flow control: while memory is RED the other brokers stop sending messages."""
    while True:
        await asyncio.sleep(0.5)
        state = broker.memory.state
        service.set_flow_stopped(state.lower() == "red", f"memory state {state}")


def cluster_entry(service: ClusterService) -> ServiceEntry:
    """The port mapper's line for the cluster service."""
    extra = {"hostname": service.cfg.cluster_host} if service.cfg.cluster_host else {}
    return ServiceEntry("cluster", "tcp", "CLUSTER", service.port, extra)
