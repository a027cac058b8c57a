"""imqcmd, OpenMQ's broker administration command (``manage.py imqcmd``, a thin Django
command over this package).

* :mod:`.dispatch` -- the subcommand table, (verb, noun) -> handler and the options it
  needs, gathered from one module per subject: :mod:`.broker` (bkr, cls, acl),
  :mod:`.services`, :mod:`.connections`, :mod:`.destinations` (dst, cns),
  :mod:`.durables`, :mod:`.transactions`, :mod:`.metrics`;
* :mod:`.grammar` -- the usage text, the options and their checks;
* :mod:`.session` -- :class:`~.session.Run`, what a handler is given (options, broker,
  output), and :func:`~.session.change`, the shape most changes share (header, "Are you
  sure ...?", the action, the success line);
* :mod:`.output` -- OpenMQ's tables and value formats.

Every handler is one call of an action in :mod:`broker.admintools.actions` (the functions
the portal and the REST API call too), made over a
:class:`~broker.admintools.broker_handle.BrokerAdmin` connection to the broker's admin service as
the ``-u`` user.
"""
