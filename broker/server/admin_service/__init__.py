"""The broker's admin service: it answers admin tools' requests to queue ``__JMQAdmin``.

Not to be confused with :mod:`broker.admintools`, the tools' side (imqcmd, the portal's
actions) that sends those requests; the broker never imports that package.

* :mod:`.handler` -- the request dispatcher: the JMQMessageType table and the reply;
* one module per request group (as OpenMQ has one handler per group): :mod:`.broker_info`,
  :mod:`.connections`, :mod:`.services`, :mod:`.destinations`, :mod:`.consumers`,
  :mod:`.durables`, :mod:`.transactions`, :mod:`.messages`;
* :mod:`.metrics` -- GET_METRICS and RESET_BROKER and their Java reply shapes;
* :mod:`.expiry` -- RECLAIM_EXPIRED, our extension; :mod:`.cluster`, :mod:`.ha` -- the
  cluster's requests;
* :mod:`.common` -- what the commands share (request parsing, :class:`.common.AdminError`).

None of them reads the router's tables: they ask core's named queries
(:mod:`broker.core.queries`) and call the router's commands.
"""
