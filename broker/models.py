"""The shared data model of the broker and the portal (no broker runtime logic here)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from broker.loglevels import RECORD_LEVELS
from broker.protocol.names import JMQ_TRANSACTION_ID
from broker.security.digest import constant_time_equals, password_digest

# Characters imqusermgr refuses in user names: they would break the passwd file
# (':'), the access control lists (',', '*') or the line format.
FORBIDDEN_USERNAME_CHARS = frozenset(":*,\r\n")


def validate_broker_username(value: str) -> None:
    """Reject user names OpenMQ cannot store or match (imqusermgr's rules)."""
    if not value:
        raise ValidationError("User name must not be empty.")
    bad = sorted(FORBIDDEN_USERNAME_CHARS.intersection(value))
    if bad:
        raise ValidationError(f"User name must not contain {', '.join(map(repr, bad))}.")


class BrokerGroup(models.Model):
    """A group of the broker's user repository (``admin``, ``user``, ``anonymous``...)."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class BrokerUser(models.Model):
    """A user of the broker's user repository (not a Django auth user).

    Only the OpenMQ credential ``MD5STR(username + ":" + password)`` is stored: it is
    what basic authentication compares and what digest authentication needs.
    """

    username = models.CharField(max_length=150, unique=True, validators=[validate_broker_username])
    password_digest = models.CharField(
        max_length=64, help_text='OpenMQ MD5STR(username + ":" + password), signed hex.'
    )
    active = models.BooleanField(default=True)
    groups = models.ManyToManyField(BrokerGroup, blank=True, related_name="users")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["username"]

    def __str__(self) -> str:
        return self.username

    def set_password(self, raw: str) -> None:
        """Recompute the stored credential (the caller saves)."""
        self.password_digest = password_digest(self.username, raw)

    def check_password(self, raw: str) -> bool:
        """Whether ``raw`` is this user's password (basic authentication check)."""
        return constant_time_equals(self.password_digest, password_digest(self.username, raw))


class LogRecord(models.Model):
    """A broker log record kept in the database (WARNING and above by default)."""

    # OpenMQ's levels (broker/loglevels.py), most severe first.
    Level = models.TextChoices("Level", [(n, (n, n)) for n in reversed(RECORD_LEVELS)])

    timestamp = models.DateTimeField(db_index=True)
    level = models.CharField(max_length=10, choices=Level.choices, db_index=True)
    logger = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField()
    broker_instance = models.CharField(max_length=255, default="imqbroker")

    class Meta:
        ordering = ["-timestamp", "-id"]

    def __str__(self) -> str:
        return f"[{self.timestamp:%d/%b/%Y:%H:%M:%S %Z}] {self.level} {self.logger}: {self.message}"


# --- The database message store (imq.persist.store=jdbc; broker/store/dbstore.py) ---------
# The same data as the file store, one set of rows per broker instance, so several brokers
# can share one database.  Rows are written only by the store's writer thread, in one
# database transaction per batch.  Message keys are the 32-byte SysMessageID as hex.  There
# are no foreign keys on purpose: a delete by key list is then one plain DELETE, where a
# cascade would make Django select the rows first.


class StoredDestination(models.Model):
    """A destination the store re-creates on start (``DestAdd``)."""

    broker_instance = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    dest_type = models.IntegerField()
    attributes = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["broker_instance", "name", "dest_type"], name="broker_storeddest_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.broker_instance}: {self.name} ({self.dest_type})"


class StoredDurable(models.Model):
    """A durable subscription the store re-creates on start (``DurableAdd``)."""

    broker_instance = models.CharField(max_length=255)
    sub_id = models.CharField(max_length=512)
    client_id = models.CharField(max_length=255, null=True)
    name = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)
    selector = models.TextField(null=True)
    no_local = models.BooleanField(default=False)
    share = models.CharField(max_length=255, null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["broker_instance", "sub_id"], name="broker_storeddurable_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.broker_instance}: {self.sub_id}"


class StoredMessage(models.Model):
    """A persistent message (``MsgAdd``); the id orders messages as they were stored."""

    broker_instance = models.CharField(max_length=255)
    key = models.CharField(max_length=64, help_text="SysMessageID, hex.")
    destination = models.CharField(max_length=255)
    dest_type = models.IntegerField()
    raw = models.BinaryField(help_text="The packet bytes as received.")

    class Meta:
        constraints = [
            # Key first: selective whatever the planner's statistics say about instances.
            models.UniqueConstraint(fields=["key", "broker_instance"], name="broker_storedmsg_key"),
        ]
        # DestRemove drops a destination's messages: temporary destinations come and go.
        indexes = [
            models.Index(
                fields=["destination", "dest_type", "broker_instance"], name="broker_storedmsg_dest"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.broker_instance}: {self.key} on {self.destination}"


class StoredInterest(models.Model):
    """An open interest in a stored message (``""`` for a queue, a durable id for a topic).

    A settled interest's row is deleted; the message goes when its last one does.
    """

    broker_instance = models.CharField(max_length=255)
    key = models.CharField(max_length=64)
    interest = models.CharField(max_length=512, blank=True)
    delivery_count = models.IntegerField(default=0)

    class Meta:
        # Serves settles (key list per interest) and deletes by key; key first as above.
        # The load reads the whole instance, and DurableRemove is rare: no index for those.
        constraints = [
            models.UniqueConstraint(
                fields=["key", "interest", "broker_instance"], name="broker_storedinterest_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.broker_instance}: {self.key} / {self.interest!r}"


class StoredTransaction(models.Model):
    """A transaction the store holds until ``TxnRemove`` (state and description)."""

    broker_instance = models.CharField(max_length=255)
    txn_id = models.BigIntegerField()
    state = models.IntegerField()
    info = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["broker_instance", "txn_id"], name="broker_storedtxn_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.broker_instance}: transaction {self.txn_id} state {self.state}"


class StoredTxnWork(models.Model):
    """A send (``kind`` "s": key, destination, bytes) or an ack ("a": key, interest)
    held by a stored transaction, in the order it was written."""

    class Kind(models.TextChoices):
        SEND = "s", "send"
        ACK = "a", "acknowledge"

    broker_instance = models.CharField(max_length=255)
    txn_id = models.BigIntegerField()
    kind = models.CharField(max_length=1, choices=Kind.choices)
    key = models.CharField(max_length=64)
    destination = models.CharField(max_length=255, blank=True, default="")
    dest_type = models.IntegerField(default=0)
    raw = models.BinaryField(null=True)
    interest = models.CharField(max_length=512, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["broker_instance", "txn_id"], name="broker_storedtxnwork_txn"),
        ]

    def __str__(self) -> str:
        return f"{self.broker_instance}: transaction {self.txn_id} {self.kind} {self.key}"


class BrokerState(models.TextChoices):
    """A broker's state in an HA cluster's shared store, OpenMQ's names."""

    OPERATING = "OPERATING"
    QUIESCE_STARTED = "QUIESCE_STARTED"
    QUIESCE_COMPLETED = "QUIESCE_COMPLETED"
    FAILOVER_PENDING = "FAILOVER_PENDING"
    FAILOVER_STARTED = "FAILOVER_STARTED"
    FAILOVER_COMPLETE = "FAILOVER_COMPLETE"
    FAILOVER_FAILED = "FAILOVER_FAILED"
    SHUTDOWN_STARTED = "SHUTDOWN_STARTED"
    SHUTDOWN_COMPLETE = "SHUTDOWN_COMPLETE"


class StoreOwner(models.Model):
    """Who holds a broker instance's rows of the database store, and whether it is alive.

    The broker claims the row when it loads its store (``epoch`` + 1, ``state``
    running), beats ``heartbeat`` every ``interval`` seconds from the store's writer
    thread, and releases it (``state`` stopped) on a clean shutdown.  The expiry job
    reclaims expired rows only of an instance whose row is stopped or whose heartbeat is
    stale, in a transaction that holds this row (and bumps ``epoch``), so a broker
    starting meanwhile waits for it, and a broker that was only slow learns on its next
    heartbeat that it lost its rows (see broker/store/dbstore.py)."""

    class State(models.TextChoices):
        RUNNING = "running"
        STOPPED = "stopped"

    broker_instance = models.CharField(max_length=255, unique=True)
    epoch = models.BigIntegerField(default=0)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    heartbeat = models.DateTimeField(null=True, blank=True)
    interval = models.FloatField(default=5.0, help_text="Seconds between heartbeats.")
    started = models.DateTimeField(null=True, blank=True)
    address = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="host:port of its port mapper: the broker's name in DMQ copies.",
    )
    pid = models.IntegerField(null=True, blank=True)
    # High availability (imq.cluster.ha=true): brokers of one cluster id watch each
    # other's heartbeats here, and one takes over the rows of a broker that stopped beating
    # (broker/store/takeover.py).
    ha = models.BooleanField(default=False, help_text="Member of an HA cluster.")
    cluster_id = models.CharField(
        max_length=255, blank=True, default="", help_text="imq.cluster.clusterid (HA)."
    )
    broker_state = models.CharField(
        max_length=24,
        choices=BrokerState.choices,
        default=BrokerState.OPERATING,
        help_text="OpenMQ's broker state as an HA cluster sees it.",
    )
    taken_over_by = models.CharField(
        max_length=255, blank=True, default="", help_text="The broker that took its rows over."
    )
    taken_over_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.broker_instance}: {self.state} (epoch {self.epoch})"


class BrokerTransaction(models.Model):
    """A transaction an administrator must see: every XA transaction and any PREPARED
    one, as the broker holds it now (``imqtxn list``).  Written by the broker off the
    event loop on each change and deleted when the transaction is finished; not the
    message store's record (that is :class:`StoredTransaction`)."""

    broker_instance = models.CharField(max_length=255, default="imqbroker")
    txn_id = models.BigIntegerField(help_text=f"{JMQ_TRANSACTION_ID}.")
    state = models.CharField(
        max_length=20, help_text="STARTED, INCOMPLETE, FAILED, COMPLETE, PREPARED, TIMED_OUT..."
    )
    xid = models.CharField(
        max_length=300, blank=True, default="", help_text="The Xid's string form (hex)."
    )
    xid_format_id = models.IntegerField(null=True, blank=True)
    xid_gtrid = models.CharField(
        max_length=128, blank=True, default="", help_text="Global transaction id, hex."
    )
    xid_bqual = models.CharField(
        max_length=128, blank=True, default="", help_text="Branch qualifier, hex."
    )
    client_id = models.CharField(max_length=255, blank=True, default="")
    user = models.CharField(max_length=150, blank=True, default="")
    connection_id = models.BigIntegerField(default=0)
    is_xa = models.BooleanField(default=False)
    in_doubt = models.BooleanField(
        default=False,
        help_text="Its connection has gone: only a transaction manager's recovery or an "
        "administrator can finish it.",
    )
    created = models.DateTimeField(help_text="When the transaction started.")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["broker_instance", "created", "txn_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["broker_instance", "txn_id"], name="broker_brokertxn_unique"
            ),
        ]

    def __str__(self) -> str:
        xid = f" xid {self.xid}" if self.xid else ""
        return f"{self.broker_instance}: transaction {self.txn_id} {self.state}{xid}"


class AccessRule(models.Model):
    """One access control rule (a line of OpenMQ's ``accesscontrol.properties``), e.g.
    ``queue.orders.consume.allow.group`` = ``billing, audit``.  The broker reads these
    unless it is given a rule file; ``imqacl`` imports and exports the file format."""

    broker_instance = models.CharField(
        max_length=255,
        blank=True,
        default="",
        help_text="The broker instance the rule is for; empty: every broker.",
    )
    key = models.CharField(
        max_length=400, help_text="The property name, e.g. queue.orders.consume.allow.group."
    )
    value = models.TextField(
        blank=True, default="", help_text="Comma-separated user or group names; * = everybody."
    )
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["broker_instance", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["broker_instance", "key"], name="broker_accessrule_unique"
            ),
        ]

    def __str__(self) -> str:
        where = self.broker_instance or "all brokers"
        return f"{where}: {self.key}={self.value}"


class MetricSample(models.Model):
    """One broker's figures at one moment, written every ``imq.metrics.sample.interval``
    seconds (default 10) by the broker's sample writer thread (broker/server/events.py)
    and kept for ``imq.metrics.sample.retention`` seconds (default 86400).  The portal's
    live overview starts from these rows, then follows the broker's live events."""

    # Indexed with timestamp (Meta.indexes): a broker's recent samples are one range scan.
    broker_instance = models.CharField(max_length=255)
    timestamp = models.DateTimeField(db_index=True)
    msgs_in = models.FloatField(
        default=0, help_text="Messages received per second, averaged over the sample interval."
    )
    msgs_out = models.FloatField(
        default=0, help_text="Messages delivered per second, averaged over the sample interval."
    )
    bytes_in = models.FloatField(
        default=0, help_text="Message bytes received per second over the sample interval."
    )
    bytes_out = models.FloatField(
        default=0, help_text="Message bytes delivered per second over the sample interval."
    )
    connections = models.IntegerField(default=0, help_text="Open client connections.")
    memory_state = models.CharField(
        max_length=10, default="green", help_text="green, yellow, orange or red."
    )
    memory_used = models.BigIntegerField(default=0, help_text="Bytes of messages held.")
    memory_limit = models.BigIntegerField(
        default=0, help_text="The message memory budget in bytes."
    )
    destinations = models.IntegerField(default=0, help_text="Number of destinations.")
    # db_default: rows written by a broker of the previous release still insert.
    loop_lag_max = models.FloatField(
        default=0,
        db_default=0.0,
        help_text="The event loop's longest lag in the last window, ms (looplag.py).",
    )
    loop_lag_p99 = models.FloatField(
        default=0,
        db_default=0.0,
        help_text="The event loop's 99th percentile lag in the last window, ms.",
    )
    depths = models.JSONField(
        default=list,
        blank=True,
        help_text="The deepest destinations (at most 50): a list of {name, type, messages, "
        "bytes, consumers, producers}.",
    )

    class Meta:
        ordering = ["-timestamp", "-id"]
        indexes = [
            models.Index(fields=["broker_instance", "timestamp"], name="broker_metric_inst_ts"),
        ]

    def __str__(self) -> str:
        return f"{self.broker_instance} at {self.timestamp:%Y-%m-%d %H:%M:%S}"
