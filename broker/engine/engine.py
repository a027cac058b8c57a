"""The connection engine: the rule sets assembled, and the packet-type -> handler table.

:class:`ConnectionEngine` is assembled from rule sets, one module per subject
(handshake, resources, messages, transactions) on the shared part in ``base.py``
(state, dispatch, output, close, and the router's ``Link``).
"""

from __future__ import annotations

from broker.protocol.types import PacketType

from .base import HANDLERS, EngineBase
from .handshake import HandshakeRules
from .messages import MessageRules
from .resources import ResourceRules
from .transaction_requests import TransactionRules


class ConnectionEngine(HandshakeRules, ResourceRules, MessageRules, TransactionRules, EngineBase):
    """The broker's side of one client connection, without I/O (implements ``Link``)."""


HANDLERS.update(
    {
        PacketType.HELLO: ConnectionEngine.on_hello,
        PacketType.AUTHENTICATE: ConnectionEngine.on_authenticate,
        PacketType.GOODBYE: ConnectionEngine.on_goodbye,
        PacketType.PING: ConnectionEngine.on_ping,
        PacketType.PING_REPLY: ConnectionEngine.on_ping_reply,
        PacketType.CREATE_SESSION: ConnectionEngine.on_create_session,
        PacketType.DESTROY_SESSION: ConnectionEngine.on_destroy_session,
        PacketType.START: ConnectionEngine.on_start,
        PacketType.STOP: ConnectionEngine.on_stop,
        PacketType.SET_CLIENTID: ConnectionEngine.on_set_clientid,
        PacketType.CREATE_DESTINATION: ConnectionEngine.on_create_destination,
        PacketType.DESTROY_DESTINATION: ConnectionEngine.on_destroy_destination,
        PacketType.VERIFY_DESTINATION: ConnectionEngine.on_verify_destination,
        PacketType.ADD_PRODUCER: ConnectionEngine.on_add_producer,
        PacketType.DELETE_PRODUCER: ConnectionEngine.on_delete_producer,
        PacketType.ADD_CONSUMER: ConnectionEngine.on_add_consumer,
        PacketType.DELETE_CONSUMER: ConnectionEngine.on_delete_consumer,
        PacketType.RESUME_FLOW: ConnectionEngine.on_resume_flow,
        PacketType.FLOW_PAUSED: ConnectionEngine.on_flow_paused,
        PacketType.ACKNOWLEDGE: ConnectionEngine.on_acknowledge,
        PacketType.REDELIVER: ConnectionEngine.on_redeliver,
        PacketType.BROWSE: ConnectionEngine.on_browse,
        PacketType.DELIVER: ConnectionEngine.on_deliver,
        PacketType.GENERATE_UID: ConnectionEngine.on_generate_uid,
        PacketType.GET_LICENSE: ConnectionEngine.on_get_license,
        PacketType.INFO_REQUEST: ConnectionEngine.on_info_request,
        PacketType.START_TRANSACTION: ConnectionEngine.on_start_transaction,
        PacketType.COMMIT_TRANSACTION: ConnectionEngine.on_commit_transaction,
        PacketType.ROLLBACK_TRANSACTION: ConnectionEngine.on_rollback_transaction,
        PacketType.END_TRANSACTION: ConnectionEngine.on_end_transaction,
        PacketType.PREPARE_TRANSACTION: ConnectionEngine.on_prepare_transaction,
        PacketType.RECOVER_TRANSACTION: ConnectionEngine.on_recover_transaction,
        PacketType.VERIFY_TRANSACTION: ConnectionEngine.on_verify_transaction,
    }
)
