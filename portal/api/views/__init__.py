"""REST API views, one module per subject as the portal's pages (portal/ui/views/):
:mod:`.root` (the root and tokens), :mod:`.broker`, :mod:`.cluster`, :mod:`.services`,
:mod:`.destinations`, :mod:`.messages`, :mod:`.connections`, :mod:`.durables`,
:mod:`.transactions`, :mod:`.users`, :mod:`.rules`, :mod:`.log`; what they share in
:mod:`.common` and ``portal/api/base.py``.

Thin: each validates its input with a serializer, calls ONE action
(:mod:`broker.admintools.actions` for the running broker, :mod:`broker.admintools.security_actions`
for users, groups and access rules) with ``actor`` = the requesting administrator, and
answers the action's dict.  Errors become JSON ``{"detail": ...}`` (portal/api/errors.py).
Operations that change something answer ``{"detail": "<what was done>"}`` (200), or the
object as it now is (create 201, update 200); deletes answer 204.

The names below are what portal/api/urls.py routes to.
"""

from .broker import (
    BrokerCompactView,
    BrokerMetricsView,
    BrokerPauseView,
    BrokerPropertiesView,
    BrokerQuiesceView,
    BrokerReloadAclView,
    BrokerResetMetricsView,
    BrokerRestartView,
    BrokerResumeView,
    BrokerShutdownView,
    BrokerUnquiesceView,
    BrokerView,
)
from .cluster import ClusterBrokerListView, ClusterReloadView, HABrokerListView
from .connections import ConnectionListView, ConnectionView
from .destinations import (
    DestinationCompactView,
    DestinationConsumersView,
    DestinationListView,
    DestinationMetricsView,
    DestinationPauseView,
    DestinationProducersView,
    DestinationPurgeView,
    DestinationResumeView,
    DestinationView,
)
from .durables import DurableListView, DurablePurgeView, DurableView
from .log import LogListView
from .messages import DestinationMessagesView, MessageView
from .root import ApiRootView, TokenView
from .rules import AclFileView, RuleListView, RuleView
from .services import (
    ServiceListView,
    ServiceMetricsView,
    ServicePauseView,
    ServiceResumeView,
    ServiceView,
)
from .transactions import (
    TransactionCommitView,
    TransactionListView,
    TransactionRollbackView,
    TransactionView,
)
from .users import GroupListView, GroupView, UserListView, UserView

__all__ = [
    "AclFileView",
    "ApiRootView",
    "BrokerCompactView",
    "BrokerMetricsView",
    "BrokerPauseView",
    "BrokerPropertiesView",
    "BrokerQuiesceView",
    "BrokerReloadAclView",
    "BrokerResetMetricsView",
    "BrokerRestartView",
    "BrokerResumeView",
    "BrokerShutdownView",
    "BrokerUnquiesceView",
    "BrokerView",
    "ClusterBrokerListView",
    "ClusterReloadView",
    "ConnectionListView",
    "ConnectionView",
    "DestinationCompactView",
    "DestinationConsumersView",
    "DestinationListView",
    "DestinationMessagesView",
    "DestinationMetricsView",
    "DestinationPauseView",
    "DestinationProducersView",
    "DestinationPurgeView",
    "DestinationResumeView",
    "DestinationView",
    "DurableListView",
    "DurablePurgeView",
    "DurableView",
    "GroupListView",
    "GroupView",
    "HABrokerListView",
    "LogListView",
    "MessageView",
    "RuleListView",
    "RuleView",
    "ServiceListView",
    "ServiceMetricsView",
    "ServicePauseView",
    "ServiceResumeView",
    "ServiceView",
    "TokenView",
    "TransactionCommitView",
    "TransactionListView",
    "TransactionRollbackView",
    "TransactionView",
    "UserListView",
    "UserView",
]
