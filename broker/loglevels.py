"""OpenMQ's log levels, defined once for the broker's logging (broker/logsetup.py), the log
table (:class:`broker.models.LogRecord`), the commands and the portal.

OpenMQ has two debug levels below DEBUG and FORCE (always shown unless NONE); the others
are Python's.  No Django import: the broker runtime and tools use this directly.
"""

from __future__ import annotations

import logging

__all__ = [
    "DEBUGHIGH",
    "DEBUGMED",
    "FORCE",
    "LEVELS",
    "LOGLEVEL_CHOICES",
    "NONE",
    "RECORD_LEVELS",
]

DEBUGMED = 8
DEBUGHIGH = 5
FORCE = 55
NONE = 100

# Every name imq.log.level and a log record may carry, with its logging level.
LEVELS: dict[str, int] = {
    "NONE": NONE,
    "FORCE": FORCE,
    "ERROR": logging.ERROR,
    "WARNING": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "DEBUGMED": DEBUGMED,
    "DEBUGHIGH": DEBUGHIGH,
}

# The levels a record can have, least severe first (a "this level and above" filter
# takes a tail of it).
RECORD_LEVELS: tuple[str, ...] = tuple(
    sorted((name for name in LEVELS if name != "NONE"), key=LEVELS.__getitem__)
)

# What ``-loglevel`` accepts (imqbrokerd's choices: FORCE is not a threshold).
LOGLEVEL_CHOICES: tuple[str, ...] = tuple(name for name in LEVELS if name != "FORCE")

logging.addLevelName(DEBUGMED, "DEBUGMED")
logging.addLevelName(DEBUGHIGH, "DEBUGHIGH")
logging.addLevelName(FORCE, "FORCE")
