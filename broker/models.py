"""The shared data model of the broker and the portal (no broker runtime logic here)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from broker.security.digest import basic_credential, constant_time_equals

# Characters imqusermgr refuses in user names: they would break the passwd file
# (':'), the access control lists (',', '*') or the line format.
FORBIDDEN_USERNAME_CHARS = frozenset(":*,\r\n")

# Destination attributes by their OpenMQ (imqcmd -o) names.
DESTINATION_ATTRIBUTES: tuple[str, ...] = (
    "maxNumMsgs",
    "maxTotalMsgBytes",
    "maxBytesPerMsg",
    "limitBehavior",
    "maxNumProducers",
    "consumerFlowLimit",
    "maxNumActiveConsumers",
    "maxNumBackupConsumers",
    "isLocalOnly",
    "localDeliveryPreferred",
    "useDMQ",
    "validateXMLSchemaEnabled",
    "XMLSchemaURIList",
    "reloadXMLSchemaOnFailure",
    "maxNumSharedConsumers",
    "sharedConsumerFlowLimit",
)


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
        self.password_digest = basic_credential(self.username, raw)

    def check_password(self, raw: str) -> bool:
        """Whether ``raw`` is this user's password (basic authentication check)."""
        return constant_time_equals(self.password_digest, basic_credential(self.username, raw))


class PhysicalDestination(models.Model):
    """A physical destination (queue or topic) with its OpenMQ attributes."""

    class DestType(models.TextChoices):
        QUEUE = "q", "queue"
        TOPIC = "t", "topic"

    class State(models.TextChoices):
        RUNNING = "RUNNING", "running"
        CONSUMERS_PAUSED = "CONSUMERS_PAUSED", "consumers paused"
        PRODUCERS_PAUSED = "PRODUCERS_PAUSED", "producers paused"
        PAUSED = "PAUSED", "paused"

    name = models.CharField(max_length=255)
    dest_type = models.CharField(max_length=1, choices=DestType.choices)
    is_temporary = models.BooleanField(default=False)
    is_auto_created = models.BooleanField(default=False)
    attributes = models.JSONField(
        default=dict, blank=True, help_text="Destination attributes by their OpenMQ names."
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.RUNNING)
    broker_instance = models.CharField(max_length=255, default="imqbroker")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["dest_type", "name"]
        constraints = [
            models.UniqueConstraint(fields=["name", "dest_type"], name="broker_physdest_name_type"),
        ]

    def __str__(self) -> str:
        return f"{self.get_dest_type_display()} {self.name}"

    def clean(self) -> None:
        if not isinstance(self.attributes, dict):
            raise ValidationError({"attributes": "Must be an object of attribute values."})
        unknown = sorted(set(self.attributes) - set(DESTINATION_ATTRIBUTES))
        if unknown:
            raise ValidationError({"attributes": f"Unknown attributes: {', '.join(unknown)}."})


class LogRecord(models.Model):
    """A broker log record kept in the database (WARNING and above by default)."""

    class Level(models.TextChoices):
        FORCE = "FORCE", "FORCE"
        ERROR = "ERROR", "ERROR"
        WARNING = "WARNING", "WARNING"
        INFO = "INFO", "INFO"
        DEBUG = "DEBUG", "DEBUG"
        DEBUGMED = "DEBUGMED", "DEBUGMED"
        DEBUGHIGH = "DEBUGHIGH", "DEBUGHIGH"

    timestamp = models.DateTimeField(db_index=True)
    level = models.CharField(max_length=10, choices=Level.choices, db_index=True)
    logger = models.CharField(max_length=255, blank=True, default="")
    message = models.TextField()
    broker_instance = models.CharField(max_length=255, default="imqbroker")

    class Meta:
        ordering = ["-timestamp", "-id"]

    def __str__(self) -> str:
        return f"[{self.timestamp:%d/%b/%Y:%H:%M:%S %Z}] {self.level} {self.logger}: {self.message}"
