"""The broker process's side of a cluster: start the cluster service when configured.

A broker is clustered when ``imq.cluster.brokerlist`` (or the file of
``imq.cluster.url``) names other brokers; the service then listens on
``imq.cluster.port`` and is published in the port mapper as ``cluster tcp CLUSTER``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from pathlib import Path
from typing import TYPE_CHECKING

from broker import props
from broker.cluster.config import ClusterConfig
from broker.cluster.service import ClusterService
from broker.protocol.portmapper import ServiceEntry

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("broker.cluster")


async def start_cluster(broker: Broker) -> ClusterService | None:
    """Start the cluster service, or None when this broker is not clustered."""
    pm_port = broker.portmapper_port
    cfg = ClusterConfig.from_config(broker.config, pm_port)
    if not cfg.enabled:
        return None
    server_ssl = client_ssl = None
    if cfg.transport == "ssl":
        server_ssl, client_ssl = ssl_contexts(broker.config)
    service = ClusterService(
        cfg,
        broker.router,
        broker.session_id,
        broker.config.instance_dir,
        server_ssl=server_ssl,
        client_ssl=client_ssl,
    )
    service.peers.reread_config = broker.config.reread
    service.mastership.save_master = lambda text: _save_master(broker, text)
    await service.start()
    if cfg.cluster_host:
        await _resolve(cfg.cluster_host)
    service.spawn(_watch_memory(broker, service))
    return service


def _save_master(broker: Broker, address: str) -> None:
    """imq.cluster.masterbroker changed (broker/cluster/mastership.py): kept in the
    instance's config.properties, as OpenMQ's brokers keep it."""
    broker.config.set(props.CLUSTER_MASTERBROKER.name, address)
    broker.config.save_instance_file()


async def _watch_memory(broker: Broker, service: ClusterService) -> None:
    """Cluster flow control: while memory is RED the other brokers stop sending messages."""
    while True:
        await asyncio.sleep(0.5)
        state = broker.memory.state
        service.set_flow_stopped(state.lower() == "red", f"memory state {state}")


def ssl_contexts(config) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """imq.cluster.transport=ssl: the dialling broker accepts only a peer whose certificate
    this broker's own certificate vouches for (the brokers of a cluster share one key
    pair, made with imqkeytool and copied to each; a stock OpenMQ broker holds the same
    pair as a JKS keystore, docs/reference/security.md).  The accepting side does not ask for
    a client certificate: imqkeytool's certificates are for TLS servers only (extended
    key usage serverAuth), so a dialler cannot present one; it is checked by the link
    handshake's identity rules instead."""
    from broker.security.tls import keystore_paths, server_context

    paths = keystore_paths(config)
    return server_context(config), cluster_client_context(paths.certificate)


def cluster_client_context(certificate: Path) -> ssl.SSLContext:
    """The dialling side's TLS context: only a peer presenting ``certificate`` (or one it
    signed) is accepted, whatever name the certificate carries."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.minimum_version = ssl.TLSVersion.TLSv1_2
    # Peers are named by address in the broker list, not by the certificate's name.
    client.check_hostname = False
    client.verify_mode = ssl.CERT_REQUIRED
    client.load_verify_locations(str(certificate))
    return client


# The cluster service's host name -> its address (the port mapper's hostaddr), resolved
# once at start so no port-mapper answer waits on a name lookup.
_HOST_ADDRS: dict[str, str] = {}


async def _resolve(host: str) -> None:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, None, family=socket.AF_INET, type=socket.SOCK_STREAM
        )
    except OSError as exc:  # it listens there, so this is unlikely; the line goes without
        log.warning("cluster host %s: no address for the port mapper's hostaddr: %s", host, exc)
        return
    if infos:
        _HOST_ADDRS[host] = str(infos[0][4][0])


def cluster_entry(service: ClusterService) -> ServiceEntry:
    """The port mapper's line for the cluster service: with the host it listens on
    (imq.cluster.hostname, else imq.hostname) as hostname and hostaddr, as the stock
    broker writes it: ``cluster tcp CLUSTER 45225 [hostname=H,hostaddr=A]``."""
    host = service.cfg.cluster_host
    extra: dict[str, str] = {}
    if host:
        extra["hostname"] = host
        addr = _HOST_ADDRS.get(host)
        if addr:
            extra["hostaddr"] = addr
    return ServiceEntry("cluster", service.cfg.transport, "CLUSTER", service.port, extra)
