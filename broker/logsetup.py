"""Broker logging: OpenMQ log levels, the instance log file, the console and the database
log table.

The broker configures logging itself (Django's settings leave LOGGING alone):
``imq.log.level`` (or ``-loglevel``) picks the level; each output takes the categories
its property names (:func:`parse_output`: ``ERROR|WARNING``, ``ALL``, ``NONE``): the log
file ``<instance_dir>/log/log.txt`` with OpenMQ-style rollover (``log_1.txt`` ...
``log_9.txt``) ``imq.log.file.output``, the console (stderr, or stdout with
``imq.log.console.stream=OUT``) ``imq.log.console.output`` (``-tty``: ALL), and the
``LogRecord`` table, WARNING and above, through :class:`DatabaseLogHandler`, which never
touches the ORM on the caller's thread.  ``imq.log.timezone`` is the time zone of the
file's and the console's time stamps.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, tzinfo
from logging.handlers import RotatingFileHandler, SysLogHandler
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from broker import props
from broker.config import BrokerConfig, ConfigError
from broker.loglevels import DEBUGHIGH, DEBUGMED, FORCE, LEVELS, NONE

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "DEBUGHIGH",
    "DEBUGMED",
    "FORCE",
    "LEVELS",
    "NONE",
    "DatabaseLogHandler",
    "OpenMQFormatter",
    "RolloverFileHandler",
    "configure_logging",
    "openmq_level_name",
    "parse_level",
    "parse_output",
]


# Older OpenMQ releases keep 9 archives: log_1.txt (newest) .. log_9.txt.
BACKUP_COUNT = 9


def parse_level(name: str) -> int:
    """Map an OpenMQ level name (case-insensitive; ``ALL`` = everything) to a logging level."""
    key = name.strip().upper()
    if key == "ALL":
        return DEBUGHIGH
    try:
        return LEVELS[key]
    except KeyError:
        raise ConfigError(
            f"unknown log level {name!r} (expected one of {', '.join(LEVELS)})"
        ) from None


def parse_output(text: str, name: str = "output") -> frozenset[str]:
    """The categories an output property names: level names separated by ``|`` (any case,
    blanks ignored), ``ALL`` or ``NONE``.  FORCE lines (the broker's start-up banner) go
    to every output that takes anything, as on OpenMQ's broker."""
    words = [w.strip().upper() for w in text.split("|") if w.strip()]
    if not words:
        raise ConfigError(f"{name}: no category named (ERROR|WARNING|INFO, ALL or NONE)")
    categories: set[str] = set()
    for word in words:
        if word == "ALL":
            categories.update(n for n in LEVELS if n != "NONE")
        elif word == "NONE":
            pass
        elif word in LEVELS:
            categories.add(word)
        else:
            raise ConfigError(
                f"{name}: unknown category {word!r} (expected {', '.join(LEVELS)} or ALL,"
                " separated by |)"
            )
    if categories:
        categories.add("FORCE")
    return frozenset(categories)


class CategoryFilter(logging.Filter):
    """Passes the records whose OpenMQ category is one of ``categories``."""

    def __init__(self, categories: frozenset[str]) -> None:
        super().__init__()
        self.categories = categories

    def filter(self, record: logging.LogRecord) -> bool:
        return openmq_level_name(record.levelno) in self.categories


def openmq_level_name(levelno: int) -> str:
    """Return the OpenMQ level name for a Python level (CRITICAL shows as ERROR)."""
    if levelno >= FORCE:
        return "FORCE"
    if levelno >= logging.ERROR:
        return "ERROR"
    if levelno >= logging.WARNING:
        return "WARNING"
    if levelno >= logging.INFO:
        return "INFO"
    if levelno >= logging.DEBUG:
        return "DEBUG"
    if levelno >= DEBUGMED:
        return "DEBUGMED"
    return "DEBUGHIGH"


class OpenMQFormatter(logging.Formatter):
    """``[22/Nov/2026:12:00:00 UTC] WARNING broker.core: message`` (INFO omits the level)."""

    def __init__(self, tz: tzinfo | None = None) -> None:
        super().__init__()
        self.tz = tz

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        when = datetime.fromtimestamp(record.created).astimezone(self.tz)
        return when.strftime(datefmt or "%d/%b/%Y:%H:%M:%S %Z")

    def format(self, record: logging.LogRecord) -> str:
        level = openmq_level_name(record.levelno)
        # OpenMQ prints no level tag for INFO lines; everything else is tagged.
        tag = "" if level == "INFO" else level + " "
        text = f"[{self.formatTime(record)}] {tag}{record.name}: {record.getMessage()}"
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += "\n" + record.exc_text
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


class RolloverFileHandler(RotatingFileHandler):
    """Size- and age-based rollover with OpenMQ archive names (``log_1.txt`` newest ..
    ``log_9.txt`` oldest; the oldest is dropped at the next rollover).

    The age counts from when the file was started.  A file the broker continues after a
    restart has no recorded start, so its age counts from its last write (it is at
    least that old): a log that had not been written for ``rollover_secs`` rolls at the
    first record, and none lives more than ``rollover_secs`` past the restart.
    """

    def __init__(
        self,
        filename: str | os.PathLike[str],
        max_bytes: int = 0,
        rollover_secs: int = 0,
        backup_count: int = BACKUP_COUNT,
    ) -> None:
        super().__init__(
            filename, maxBytes=max(max_bytes, 0), backupCount=backup_count, encoding="utf-8"
        )
        self.rollover_secs = max(rollover_secs, 0)
        self.namer = self._openmq_name
        self._opened_at = time.time()
        try:
            st = os.stat(self.baseFilename)
        except OSError:
            pass
        else:
            if st.st_size:
                self._opened_at = min(self._opened_at, st.st_mtime)

    @staticmethod
    def _openmq_name(default_name: str) -> str:
        # RotatingFileHandler proposes "log.txt.3"; OpenMQ calls it "log_3.txt".
        m = re.fullmatch(r"(.*?)(\.[^.\\/]*)?\.(\d+)", default_name)
        if not m:
            return default_name
        stem, ext, num = m.group(1), m.group(2) or "", m.group(3)
        return f"{stem}_{num}{ext}"

    def shouldRollover(self, record: logging.LogRecord) -> int:  # noqa: N802
        if self.rollover_secs and record.created - self._opened_at >= self.rollover_secs:
            return 1
        return super().shouldRollover(record)

    def doRollover(self) -> None:  # noqa: N802
        super().doRollover()
        self._opened_at = time.time()


# --------------------------------------------------------------------------------------
# Database handler
# --------------------------------------------------------------------------------------

_STOP = object()


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class DatabaseLogHandler(logging.Handler):
    """Write log records (WARNING and above by default) to the ``LogRecord`` table.

    ``emit`` only formats the message and puts a small tuple on a bounded queue; a
    daemon thread writes batches with ``bulk_create``.  Database errors and a full
    queue drop records (counted in :attr:`dropped`) and never raise.  ``flush``
    waits for queued records to be written; ``close`` flushes and stops the thread.
    """

    def __init__(
        self,
        instance: str,
        level: int = logging.WARNING,
        *,
        batch_size: int = 200,
        max_queue: int = 10000,
    ) -> None:
        super().__init__(level)
        self.instance = instance[:255]
        self.batch_size = batch_size
        self.written = 0
        self.dropped = 0
        self.last_error: BaseException | None = None
        self._counter_lock = threading.Lock()
        self._queue: queue.Queue[object] = queue.Queue(max_queue)
        self._closed = False
        self._reported_error = False
        self._thread = threading.Thread(target=self._run, name="imq-db-log-writer", daemon=True)
        self._thread.start()

    # -- caller side ---------------------------------------------------------------------

    def emit(self, record: logging.LogRecord) -> None:
        # Records logged by the writer itself (e.g. the ORM) would feed back forever.
        if record.thread == self._thread.ident or self._closed:
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message += "\n" + logging.Formatter().formatException(record.exc_info)
            item = (record.created, openmq_level_name(record.levelno), record.name[:255], message)
            self._queue.put_nowait(item)
        except queue.Full:
            self._count_dropped(1)
        except Exception:
            self.handleError(record)

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait until records queued so far are written (or dropped); False on timeout."""
        if not self._thread.is_alive():
            return self._queue.empty()
        marker = _Flush()
        try:
            self._queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        return marker.done.wait(timeout)

    def close(self) -> None:
        """Write what is queued, stop the writer thread and close its DB connection."""
        if not self._closed:
            self._closed = True
            if self._thread.is_alive():
                try:
                    self._queue.put(_STOP, timeout=5.0)
                except queue.Full:
                    pass
                self._thread.join(timeout=10.0)
        super().close()

    def _count_dropped(self, n: int) -> None:
        with self._counter_lock:
            self.dropped += n

    # -- writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            stop = False
            while not stop:
                items = [self._queue.get()]
                # Take whatever else is already waiting: a burst becomes one INSERT.
                while len(items) < self.batch_size:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                rows = []
                flushes = []
                for item in items:
                    if item is _STOP:
                        stop = True
                    elif isinstance(item, _Flush):
                        flushes.append(item)
                    else:
                        rows.append(item)
                if rows:
                    self._write(rows)
                for marker in flushes:
                    marker.done.set()
        finally:
            self._close_connection()

    def _write(self, rows: Iterable[tuple[float, str, str, str]]) -> None:
        rows = list(rows)
        try:
            from broker.models import LogRecord

            LogRecord.objects.bulk_create(
                [
                    LogRecord(
                        timestamp=datetime.fromtimestamp(created, UTC),
                        level=level,
                        logger=logger,
                        message=message,
                        broker_instance=self.instance,
                    )
                    for created, level, logger, message in rows
                ]
            )
        except Exception as exc:
            self._count_dropped(len(rows))
            self.last_error = exc
            if not self._reported_error:
                # Not through logging: that would queue more records for a failing DB.
                self._reported_error = True
                print(
                    f"DatabaseLogHandler: cannot write log records ({exc!r}); dropping",
                    file=sys.stderr,
                )
            self._close_connection(only_unusable=True)
        else:
            with self._counter_lock:
                self.written += len(rows)

    @staticmethod
    def _close_connection(only_unusable: bool = False) -> None:
        try:
            from django.db import close_old_connections, connections

            if only_unusable:
                close_old_connections()
            else:
                connections.close_all()
        except Exception:
            pass


# --------------------------------------------------------------------------------------
# syslog
# --------------------------------------------------------------------------------------

# OpenMQ's categories as syslog severities (FORCE: the start-up banner, a notice).
_SYSLOG_SEVERITY = {
    "FORCE": "notice",
    "ERROR": "err",
    "WARNING": "warning",
    "INFO": "info",
    "DEBUG": "debug",
    "DEBUGMED": "debug",
    "DEBUGHIGH": "debug",
}


class OpenMQSysLogHandler(SysLogHandler):
    """``imq.log.syslog.*``: one datagram per record, ``<PRI>identity[pid]: message``
    as syslog(3) writes it; when the daemon cannot be reached and ``logconsole`` says
    so, the record goes to the console instead."""

    def __init__(
        self, address: str | tuple[str, int], facility: int, ident: str, console: TextIO | None
    ) -> None:
        self._console = console
        self._unreachable = False
        super().__init__(address=address, facility=facility)
        self.ident = ident

    def mapPriority(self, levelName: str) -> str:  # noqa: N802 (logging's name)
        return _SYSLOG_SEVERITY.get(levelName, "warning")

    def emit(self, record: logging.LogRecord) -> None:
        # SysLogHandler takes the priority from levelName: OpenMQ's category instead.
        record = logging.makeLogRecord(record.__dict__)
        record.levelname = openmq_level_name(record.levelno)
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802
        if self._console is not None:
            self._console.write(self.format(record) + "\n")
            return
        if not self._unreachable:  # once, not for every record that follows
            self._unreachable = True
            print(
                f"syslog at {self.address!r} cannot be reached: records for it are dropped",
                file=sys.stderr,
            )


def _syslog_facility(name: str) -> int:
    key = name.strip().upper().removeprefix("LOG_").lower()
    code = SysLogHandler.facility_names.get(key)
    if code is None:
        raise ConfigError(
            f"imq.log.syslog.facility: unknown facility {name!r} (LOG_USER, LOG_DAEMON,"
            " LOG_LOCAL0 .. LOG_LOCAL7)"
        )
    return code


def _syslog_address(text: str) -> str | tuple[str, int] | None:
    text = text.strip()
    if text.upper() == "NONE":
        return None
    if text.startswith("/"):
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(
            f"imq.log.syslog.address: {text!r} is neither a socket path nor host:port (or NONE)"
        )
    return (host or "127.0.0.1", int(port))


def _syslog_handler(config: BrokerConfig) -> logging.Handler | None:
    """The syslog output, or None when it takes nothing or has nowhere to go (a machine
    without a syslog daemon's socket: said once on stderr unless it falls back to the
    console)."""
    output = parse_output(config.get(props.LOG_SYSLOG_OUTPUT), props.LOG_SYSLOG_OUTPUT.name)
    address = _syslog_address(config.get(props.LOG_SYSLOG_ADDRESS))
    facility = _syslog_facility(config.get(props.LOG_SYSLOG_FACILITY))  # checked even if off
    if not output or address is None:
        return None
    ident = config.get(props.LOG_SYSLOG_IDENTITY)
    ident += f"[{os.getpid()}]: " if config.get(props.LOG_SYSLOG_LOGPID) else ": "
    console = _console_stream(config) if config.get(props.LOG_SYSLOG_LOGCONSOLE) else None
    explicit = config.configured(props.LOG_SYSLOG_ADDRESS.name)
    if isinstance(address, str) and not explicit and console is None and not Path(address).exists():
        return None  # no syslog daemon here (a container): nothing to say
    try:
        handler: logging.Handler = OpenMQSysLogHandler(address, facility, ident, console)
    except OSError as exc:
        if console is None:
            if explicit:
                print(
                    f"imq.log.syslog.address: {address!r} cannot be reached ({exc})",
                    file=sys.stderr,
                )
            return None
        handler = logging.StreamHandler(console)  # imq.log.syslog.logconsole
    # syslog stamps the time itself: the message alone, as OpenMQ's handler sends it.
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(CategoryFilter(output))
    return handler


# --------------------------------------------------------------------------------------
# configure_logging
# --------------------------------------------------------------------------------------

_OWNED_ATTR = "_imq_owned"


def _timezone(config: BrokerConfig) -> tzinfo | None:
    name = (config.get(props.LOG_TIMEZONE) or "").strip()
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"imq.log.timezone: unknown time zone {name!r}") from exc


def _log_file(config: BrokerConfig) -> Path:
    pattern = (config.get(props.LOG_FILE_PATTERN) or "").strip()
    if pattern:
        return Path(_jul_pattern(pattern))
    dirpath = config.get(props.LOG_FILE_DIRPATH) or str(config.instance_dir / "log")
    filename = config.get(props.LOG_FILE_NAME)
    return Path(dirpath) / filename


_JUL_TOKEN = re.compile(r"%(.)?")


def _jul_pattern(pattern: str) -> str:
    """A java.util.logging FileHandler pattern as a path: %t the temporary directory, %h
    the home directory, %% a percent sign; %g (generation) and %u (unique number) are 0,
    what the stock broker's single log file gets (rollover names come from the file's
    name here, log_1.txt...)."""

    def token(m: re.Match[str]) -> str:
        code = m.group(1)
        if code == "t":
            return tempfile.gettempdir()
        if code == "h":
            return str(Path.home())
        if code in ("g", "u"):
            return "0"
        if code == "%":
            return "%"
        raise ConfigError(
            f"{props.LOG_FILE_PATTERN.name}: {pattern!r}: unknown %{code or ''} "
            "(%t, %h, %g, %u and %% are known)"
        )

    return _JUL_TOKEN.sub(token, pattern)


def _console_stream(config: BrokerConfig) -> TextIO:
    stream = config.get(props.LOG_CONSOLE_STREAM).strip().upper()
    if stream == "ERR":
        return sys.stderr
    if stream == "OUT":
        return sys.stdout
    raise ConfigError(f"imq.log.console.stream: {stream!r} is not ERR or OUT")


def configure_logging(config: BrokerConfig, loglevel: str | None, tty: bool) -> None:
    """Set up the broker's root logging from ``config``; ``loglevel`` is ``-loglevel``,
    ``tty`` is ``-tty`` (every category to the console, unless
    ``imq.log.console.output`` is set explicitly).

    Calling it again replaces the handlers it installed before.
    """
    level = parse_level(loglevel or config.get(props.LOG_LEVEL))
    formatter = OpenMQFormatter(_timezone(config))

    # Older property name kept as an alias while the current one is at its default.
    max_bytes = config.get(props.LOG_ROLLOVER_SIZE)
    if max_bytes <= 0:
        max_bytes = config.get(props.LOG_ROLLOVER_BYTES)
    if max_bytes <= 0:
        max_bytes = config.get(props.LOG_FILE_LIMIT)  # OpenMQ 6.9's name
    rollover_secs = config.get(props.LOG_ROLLOVER_SECS)

    handlers: list[logging.Handler] = []
    file_output = parse_output(config.get(props.LOG_FILE_OUTPUT), props.LOG_FILE_OUTPUT.name)
    if file_output:
        path = _log_file(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        file_handler = RolloverFileHandler(path, max_bytes=max_bytes, rollover_secs=rollover_secs)
        file_handler.setFormatter(formatter)
        file_handler.addFilter(CategoryFilter(file_output))
        handlers.append(file_handler)

    console_text = config.get(props.LOG_CONSOLE_OUTPUT)
    if tty and not config.configured(props.LOG_CONSOLE_OUTPUT.name):
        console_text = "ALL"
    console_output = parse_output(console_text, props.LOG_CONSOLE_OUTPUT.name)
    stream = _console_stream(config)
    if console_output:
        console = logging.StreamHandler(stream)
        console.setFormatter(formatter)
        console.addFilter(CategoryFilter(console_output))
        handlers.append(console)

    syslog = _syslog_handler(config)
    if syslog is not None:
        handlers.append(syslog)

    if config.get(props.LOG_DATABASE_ENABLED):
        db_level = parse_level(config.get(props.LOG_DATABASE_OUTPUT))
        handlers.append(DatabaseLogHandler(config.instance, db_level))

    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _OWNED_ATTR, False):
            root.removeHandler(old)
            old.close()
    for handler in handlers:
        setattr(handler, _OWNED_ATTR, True)
        root.addHandler(handler)
    root.setLevel(level)
