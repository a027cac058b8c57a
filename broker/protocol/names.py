"""The JMQ wire property names, one constant each, as OpenMQ's ``PacketProperties``.

Every module that reads or writes a packet's properties (the engines, the admin service,
the admin client, the Python client) names them through these constants, so a name is
spelled once; tests/test_wire_names.py fails on a ``"JMQ...`` literal anywhere else in broker/,
portal/ and openmq_client/.  Each constant is the wire name in upper snake case
(``JMQTransactionID`` -> ``JMQ_TRANSACTION_ID``).  Import them by name: the hot path reads
a module global, never an attribute of this module.
"""

from __future__ import annotations

# The prefix every JMQ property shares (the STOMP bridge keeps them out of its headers).
JMQ_PREFIX = "JMQ"

# Every reply.
JMQ_STATUS = "JMQStatus"
JMQ_REASON = "JMQReason"

# Connection: HELLO, AUTHENTICATE, GOODBYE, PING and the client's flow.
JMQ_PROTOCOL_LEVEL = "JMQProtocolLevel"
JMQ_VERSION = "JMQVersion"
JMQ_USER_AGENT = "JMQUserAgent"
JMQ_RBUFFER_SIZE = "JMQRBufferSize"
JMQ_RECONNECTABLE = "JMQReconnectable"
JMQ_HA_CLIENT = "JMQHAClient"
JMQ_CONNECTION_ID = "JMQConnectionID"
JMQ_SERVICE = "JMQService"
JMQ_SIZE = "JMQSize"
JMQ_BYTES = "JMQBytes"
JMQ_MAX_MSG_BYTES = "JMQMaxMsgBytes"
JMQ_BROKER_LIST = "JMQBrokerList"
JMQ_BROKER_SESSION_ID = "JMQBrokerSessionID"
JMQ_SEQUENCE = "JMQSequence"
JMQ_AUTH_TYPE = "JMQAuthType"
JMQ_CHALLENGE = "JMQChallenge"
JMQ_CLIENT_ID = "JMQClientID"
JMQ_SHARE = "JMQShare"
JMQ_NAMESPACE = "JMQNamespace"
JMQ_BLOCK = "JMQBlock"
JMQ_GOODBYE_REASON = "JMQGoodbyeReason"
JMQ_GOODBYE_REASON_STRING = "JMQGoodbyeReasonString"
JMQ_EXIT = "JMQExit"
JMQ_LICENSE = "JMQLicense"
JMQ_LICENSE_DESC = "JMQLicenseDesc"
JMQ_HA = "JMQHA"
JMQ_CLUSTER_ID = "JMQClusterID"
JMQ_STORE_SESSION = "JMQStoreSession"
JMQ_STORE_OWNER = "JMQStoreOwner"

# Sessions.
JMQ_SESSION_ID = "JMQSessionID"
JMQ_ACK_MODE = "JMQAckMode"

# Destinations.
JMQ_DESTINATION = "JMQDestination"
JMQ_DEST_TYPE = "JMQDestType"
JMQ_DESTINATION_ID = "JMQDestinationID"
JMQ_CAN_CREATE = "JMQCanCreate"
JMQ_MAX_DELIVERY_COUNT = "JMQMaxDeliveryCount"
JMQ_VALIDATE_XML_SCHEMA = "JMQValidateXMLSchema"
JMQ_XML_SCHEMA_URI_LIST = "JMQXMLSchemaURIList"
JMQ_RELOAD_XML_SCHEMA_ON_FAILURE = "JMQReloadXMLSchemaOnFailure"

# Producers (JMQSize and JMQBytes above are their credit).
JMQ_PRODUCER_ID = "JMQProducerID"

# Consumers and browsers.
JMQ_CONSUMER_ID = "JMQConsumerID"
JMQ_SELECTOR = "JMQSelector"
JMQ_DURABLE_NAME = "JMQDurableName"
JMQ_SHARED_SUBSCRIPTION_NAME = "JMQSharedSubscriptionName"
JMQ_NO_LOCAL = "JMQNoLocal"
JMQ_JMS_SHARE = "JMQJMSShare"
JMQ_RECONNECT = "JMQReconnect"
JMQ_REDELIVER_ALL = "JMQRedeliverAll"
JMQ_LAST_DELIVERED_ID_IN_TRANSACTION = "JMQLastDeliveredIDInTransaction"
JMQ_BODY_TYPE = "JMQBodyType"
JMQ_QUANTITY = "JMQQuantity"
JMQ_METRICS = "JMQMetrics"

# Acknowledgements and redelivery.
JMQ_ACK_TYPE = "JMQAckType"
JMQ_DEAD_REASON = "JMQDeadReason"
JMQ_COMMENT = "JMQComment"
JMQ_SET_REDELIVERED = "JMQSetRedelivered"
JMQ_REMOTE = "JMQRemote"
JMQ_REMOTE_CONSUMER_IDS = "JMQRemoteConsumerIDs"

# Transactions, local and XA.
JMQ_TRANSACTION_ID = "JMQTransactionID"
JMQ_XA_FLAGS = "JMQXAFlags"
JMQ_XA_ONE_PHASE = "JMQXAOnePhase"
JMQ_AUTO_ROLLBACK = "JMQAutoRollback"
JMQ_LIFETIME = "JMQLifetime"
JMQ_SESSION_LESS = "JMQSessionLess"
JMQ_REDELIVER = "JMQRedeliver"
JMQ_START_NEXT_TRANSACTION = "JMQStartNextTransaction"
JMQ_NEXT_TRANSACTION_ID = "JMQNextTransactionID"
JMQ_NO_OP = "JMQNoOp"
JMQ_CREATE_TIME = "JMQCreateTime"
JMQ_PREPARE_STATE_FAILED = "JMQPrepareStateFAILED"
JMQ_XID = "JMQXid"

# INFO_REQUEST and the broker's info.
JMQ_REQUEST_TYPE = "JMQRequestType"
JMQ_BROKER_NAME = "JMQBrokerName"
JMQ_CONNECTION_COUNT = "JMQConnectionCount"
JMQ_MESSAGE_COUNT = "JMQMessageCount"
JMQ_MESSAGE_BYTES = "JMQMessageBytes"
JMQ_MEMORY_STATE = "JMQMemoryState"

# Admin messages (imqcmd's protocol on __JMQAdmin).
JMQ_MESSAGE_TYPE = "JMQMessageType"
JMQ_ERROR_STRING = "JMQErrorString"
JMQ_SERVICE_NAME = "JMQServiceName"
JMQ_INSTANCE_NAME = "JMQInstanceName"
JMQ_BROKER_STATE = "JMQBrokerState"
JMQ_BROKER_ID = "JMQBrokerID"
JMQ_COMMAND = "JMQCommand"
JMQ_TARGET = "JMQTarget"
JMQ_TIME = "JMQTime"
JMQ_RESTART = "JMQRestart"
JMQ_NO_FAILOVER = "JMQNoFailover"
JMQ_DEST_STATE = "JMQDestState"
JMQ_PAUSE_TARGET = "JMQPauseTarget"
JMQ_SHOW_TEMPORARY = "JMQShowTemporary"
JMQ_HIDE_ADMIN_TEMPORARY = "JMQHideAdminTemporary"
JMQ_MAX_COUNT = "JMQMaxCount"
JMQ_START_INDEX = "JMQStartIndex"
JMQ_ORDER_BY = "JMQOrderBy"
JMQ_FILTER_NAME = "JMQFilterName"
JMQ_FILTER_STATE = "JMQFilterState"
JMQ_FILTER_TYPE = "JMQFilterType"
JMQ_GET_MESSAGE_BODY = "JMQGetMessageBody"
JMQ_MAX_NUM_MSGS_RETRIEVED = "JMQMaxNumMsgsRetrieved"
JMQ_START_MESSAGE_INDEX = "JMQStartMessageIndex"
JMQ_MESSAGE_ID = "JMQMessageID"
JMQ_PRODUCERS = "JMQProducers"
JMQ_RESET_TYPE = "JMQResetType"
JMQ_BROKERS_ADDED = "JMQBrokersAdded"
JMQ_BROKERS_REMOVED = "JMQBrokersRemoved"
# CHANGE_CLUSTER_MASTER_BROKER: host:port of the new and (optional) current master broker.
JMQ_CLUSTER_NEW_MASTER_BROKER = "JMQClusterNewMasterBroker"
JMQ_CLUSTER_OLD_MASTER_BROKER = "JMQClusterOldMasterBroker"

# The bridge admin protocol (imqbridgemgr's, on __JMQBridgeAdmin: AdminMessageType.PropName).
JMQ_BRIDGE_NAME = "JMQBridgeName"
JMQ_BRIDGE_TYPE = "JMQBridgeType"
JMQ_LINK_NAME = "JMQLinkName"
JMQ_COMMAND_ARG = "JMQCommandArg"
JMQ_DEBUG = "JMQDebug"
JMQ_ASYNC_STARTED = "JMQAsyncStarted"
JMQ_LOCALE_LANGUAGE = "JMQLocaleLanguage"
JMQ_LOCALE_COUNTRY = "JMQLocaleCountry"
JMQ_LOCALE_VARIANT = "JMQLocaleVariant"

# Metrics replies: this broker's own counters beside the stock ones (not in OpenMQ).
JMQ_BODIES_IN_MEMORY = "JMQBodiesInMemory"
JMQ_PAGED_MESSAGES = "JMQPagedMessages"
JMQ_PAGED_MESSAGE_BYTES = "JMQPagedMessageBytes"
JMQ_PAGED_OUT = "JMQPagedOut"
JMQ_READ_BACK = "JMQReadBack"
JMQ_LOOP_LAG_MAX = "JMQLoopLagMax"
JMQ_LOOP_LAG_P99 = "JMQLoopLagP99"
JMQ_GC_PAUSE_MAX = "JMQGCPauseMax"
