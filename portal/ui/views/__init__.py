"""The portal's pages, one module per subject (overview, broker, services, destinations,
messages, connections, durables, transactions, users, rules, log; login), with what they
share in :mod:`.common`.  Thin: every broker operation is one call of an action function
(broker/admintools/actions/; users, groups and rules: broker/admintools/security_actions.py), the
view only turns the request into arguments and the result into a page.

* reads render a template from the action's result; a broker that cannot be reached
  gives a page with a banner saying so (status 503), never a 500;
* changes are POSTs (CSRF-checked) that redirect back with a success message or the
  action's error text; destructive ones go through a confirmation page first (GET asks,
  POST does it), so everything works without JavaScript.
"""
