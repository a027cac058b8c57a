"""The broker's admin service: it answers admin tools' requests to queue ``__JMQAdmin``.

Not to be confused with :mod:`broker.admin`, the tools' side (imqcmd, the portal's
actions) that sends those requests; the broker never imports that package.

* :mod:`.handler` -- the request dispatcher and most commands (admin.md);
* :mod:`.metrics` -- GET_METRICS and RESET_BROKER and their Java reply shapes;
* :mod:`.expiry` -- RECLAIM_EXPIRED, our extension.
"""
