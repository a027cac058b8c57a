"""Administration actions: one function per operation, shared by the portal's views, the
REST API and ``manage.py imqcmd`` (all three stay thin and call these).

One module per subject, as the broker's side has one per request group
(broker/server/admin_service/): :mod:`.broker_info`, :mod:`.services`,
:mod:`.destinations`, :mod:`.consumers`, :mod:`.messages`, :mod:`.connections`,
:mod:`.durables`, :mod:`.transactions`, :mod:`.metrics`, :mod:`.cluster`, :mod:`.ha`;
:mod:`.log` reads the log records (the database); :mod:`.common` holds what they share.

Reads return plain dicts with stable, snake_case keys (what templates, serializers and
imqcmd's tables show).  Changes take the acting user's name as ``actor``, are recorded
in the log with who made them and send one change event to the live pages
(:func:`~.common.record_change`, :mod:`broker.admintools.events`).  They talk to a running
broker only through its admin protocol (a :class:`~broker.admintools.broker_handle.BrokerAdmin`),
never by touching its memory; users, groups and access rules live in the database and
have their actions in :mod:`broker.admintools.security_actions`.

Errors, importable from here: :class:`ActionError` (bad input, said before anything
changed), :class:`~broker.admintools.client.AdminError` (the broker refused: ``status`` is its
JMQStatus) and :class:`~broker.admintools.broker_handle.BrokerUnavailable`.
"""

from ..broker_handle import BrokerUnavailable
from ..client import AdminError
from .common import ActionError, record_change

__all__ = ["ActionError", "AdminError", "BrokerUnavailable", "record_change"]
