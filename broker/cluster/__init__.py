"""Conventional multi-broker clusters (OpenMQ's cluster protocol, docs/developers/protocol.md).

The public names, stable for the other parts of the broker:

* :class:`broker.cluster.config.ClusterConfig` -- ``ClusterConfig.from_config(config,
  portmapper_port)``: ``me`` (a :class:`~broker.protocol.gpacket.BrokerAddress`),
  ``peers`` [(host, port-mapper port)], ``cluster_port``, ``transport``, ``master``,
  ``ping_interval``, ``match``; ``enabled`` is False without a broker list.
* :class:`broker.cluster.service.ClusterService` -- ``ClusterService(cfg, router,
  session_id)``; ``await start()`` / ``await stop()`` (GOODBYE to every peer);
  ``port`` (the bound cluster port, for the port mapper's ``cluster tcp CLUSTER``
  line); ``links`` {BrokerAddress: BrokerLink} of the links that are up;
  ``brokers()`` [{address, instance, state, self}] for administration;
  ``broker_list()`` for HELLO_REPLY's JMQBrokerList; ``reload(propagate=...)``;
  ``locks`` and ``positions`` (below); ``spawn(coro)`` a task that stops with it;
  ``on_packet(link, gpacket)`` the table every up link feeds.  Its parts, each owning
  its state and registering its packets (handlers.py): ``peers`` (peers.py),
  ``interests`` (interests.py), ``delivery`` (delivery.py), ``changes`` (changes.py),
  ``txns`` (remote_transactions.py).
* :class:`broker.cluster.link_driver.BrokerLink` -- one link (asyncio protocol): ``send(gp)``,
  ``drop(reason)``, ``address``, ``up``, ``goodbye`` (peer left cleanly).
* :class:`broker.cluster.locks.ClusterLocks` -- ``await acquire(resource, shared)`` ->
  LOCK_SUCCESS / LOCK_FAILURE / LOCK_BACKOFF; ``acquire_blocking(resource)`` and
  ``acquire_client_id_blocking(cid, shared, namespace)`` from a worker thread; ``holders``
  (callables ``(resource, shared) -> bool`` saying this broker holds it so that such a
  request is refused).
* :mod:`broker.cluster.remote_delivery` -- ``RemoteConsumer`` (a DeliveryTarget on the home
  broker) and ``InboundOrigin`` (owner of entries received for a local consumer).
* :mod:`broker.cluster.changerecord` -- the master broker's change record
  (``ChangeRecord(instance_dir)``, ``backup(instance_dir, file)``, ``restore(...)``);
  ``ClusterService.changes.record`` is set on the master.
* ``ClusterService.set_flow_stopped(stopped, why)`` -- cluster flow control
  (broker/server/clustering.py calls it from the memory state).
* The router's observers the service registers (broker/core/observers.py): consumer
  observers, router event observers (destination, durable and connection events), a
  transaction observer, and itself as the router's ``ClusterRules`` (the master's
  change guard, queue consumer positions); the engine's ``ClusterPort``
  (broker/engine/ports.py): the broker list, client-ID locks, positions, remote
  prepares.

Bytes: broker/protocol/gpacket.py (sans-IO).  Wiring: broker/server/broker.py starts the
service when ``imq.cluster.brokerlist`` (or ``imq.cluster.url``) names other brokers.
"""
