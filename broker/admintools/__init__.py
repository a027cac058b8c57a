"""The administration tools' side (the broker's own side is broker/server/admin_service/,
and the broker never imports this package).

* :mod:`.client` -- :class:`AdminClient`, the admin protocol (admin.md) over the client;
* :mod:`.broker_handle` -- :class:`~broker.admintools.broker_handle.BrokerAdmin`, its blocking, typed form;
* :mod:`.actions`, :mod:`.security_actions` -- one function per change an administrator
  can make, whatever the entry point (portal, REST API, imqcmd, imqusermgr, imqacl);
  :mod:`.actions` has one module per subject, as the admin service has;
* :mod:`.imqcmd` -- imqcmd's (verb, noun) table over its subcommands' handlers;
* :mod:`.events` -- the change event each of them sends to the live pages.
"""

from .client import AdminClient, AdminError

__all__ = ["AdminClient", "AdminError"]
