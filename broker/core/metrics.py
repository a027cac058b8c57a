"""Metric counters: per connection service and per destination, as OpenMQ keeps them.

OpenMQ's administration reads two shapes (admin.md, GET_METRICS):

* ``MetricCounters`` per connection service and for the whole broker: messages, message
  bytes, packets and packet bytes in and out, plus connection, thread and memory figures
  filled in when asked.  Here each :class:`Service` owns one :class:`ServiceCounters`
  that all its connections increment; the broker's totals are the sum over services.
* ``DestMetricsCounters`` per destination: messages and bytes in and out, current,
  peak and average depth, consumer counts, and how many messages expired, were
  acknowledged, discarded, rejected or rolled back.

Hot path rules: counting a message is a few integer increments on objects that already
exist (``__slots__`` classes or the destination itself) -- no dicts, no allocation, no
logging.  Peaks are one comparison per message.  Averages are sampled by the broker's
once-a-second housekeeping timer (:func:`sample_averages`), never per message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .destination import Destination

__all__ = [
    "DEST_METRICS_KEYS",
    "LagWindow",
    "ServiceCounters",
    "consumer_counts",
    "destination_metrics",
    "note_consumers",
    "reset_destination",
    "sample_averages",
]


# DestMetricsCounters' keys in the order a getMetrics() result first received them (the
# constructor's 27, then the two averages Destination.getMetrics() adds), with the boxed
# type of each value: J Long, I Integer.  The order fixes the HashMap's entry order.
DEST_METRICS_KEYS: tuple[tuple[str, str], ...] = (
    ("numMsgsIn", "J"),
    ("numMsgsOut", "J"),
    ("peakNumMsgs", "I"),
    ("peakTotalMsgBytes", "J"),
    ("peakMsgBytes", "J"),
    ("numActiveConsumers", "I"),
    ("numBackupConsumers", "I"),
    ("peakNumActiveConsumers", "I"),
    ("peakNumBackupConsumers", "I"),
    ("numConsumers", "I"),
    ("peakNumConsumers", "I"),
    ("avgNumConsumers", "I"),
    ("msgBytesIn", "J"),
    ("msgBytesOut", "J"),
    ("numMsgs", "I"),
    ("totalMsgBytes", "J"),
    ("avgNumMsgs", "I"),
    ("avgTotalMsgBytes", "J"),
    ("diskReserved", "J"),
    ("diskUsed", "J"),
    ("diskUtilizationRatio", "I"),
    ("numExpiredMsgs", "I"),
    ("numPurgedMsgs", "I"),
    ("numAckedMsgs", "I"),
    ("numDiscardedMsgs", "I"),
    ("numRejectedMsgs", "I"),
    ("numRolledbackMsgs", "I"),
    ("avgNumActiveConsumers", "I"),
    ("avgNumBackupConsumers", "I"),
)


class ServiceCounters:
    """OpenMQ's ``MetricCounters`` traffic fields for one connection service.

    ``messages_*`` count JMS message packets (the client's sends in, deliveries out) and
    ``message_bytes_*`` their packet sizes; ``packets_*`` / ``packet_bytes_*`` count every
    packet (control and JMS) and the bytes read from / written to the sockets.
    """

    __slots__ = (
        "messages_in",
        "messages_out",
        "message_bytes_in",
        "message_bytes_out",
        "packets_in",
        "packets_out",
        "packet_bytes_in",
        "packet_bytes_out",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.messages_in = 0
        self.messages_out = 0
        self.message_bytes_in = 0
        self.message_bytes_out = 0
        self.packets_in = 0
        self.packets_out = 0
        self.packet_bytes_in = 0
        self.packet_bytes_out = 0

    def add(self, other: ServiceCounters) -> None:
        """Accumulate ``other`` into this one (the broker's totals over its services)."""
        self.messages_in += other.messages_in
        self.messages_out += other.messages_out
        self.message_bytes_in += other.message_bytes_in
        self.message_bytes_out += other.message_bytes_out
        self.packets_in += other.packets_in
        self.packets_out += other.packets_out
        self.packet_bytes_in += other.packet_bytes_in
        self.packet_bytes_out += other.packet_bytes_out

    @classmethod
    def total(cls, counters: Iterable[ServiceCounters]) -> ServiceCounters:
        out = cls()
        for c in counters:
            out.add(c)
        return out


def consumer_counts(dest: Destination) -> tuple[int, int, int]:
    """(all, active, backup) consumers: a queue's backups wait (failover).  A topic's
    are its subscriptions, as OpenMQ counts them (imqcmd's "Consumers"): a durable one
    also while nobody is connected to it, a shared one once."""
    if dest.is_queue:
        active = len(dest.dq.consumers)  # type: ignore[attr-defined]
        backup = len(dest.backups)  # type: ignore[attr-defined]
        return active + backup, active, backup
    n = len(dest.subscriptions)  # type: ignore[attr-defined]
    return n, n, 0


def note_consumers(dest: Destination) -> None:
    """Raise the consumer high-water marks (called when a consumer attaches)."""
    total, active, backup = consumer_counts(dest)
    st = dest.stats
    if total > st.peak_consumers:
        st.peak_consumers = total
    if active > st.peak_active:
        st.peak_active = active
    if backup > st.peak_backup:
        st.peak_backup = backup


def sample_averages(dest: Destination, consumers: tuple[int, int, int]) -> None:
    """One averaging sample (the broker takes one per destination per second)."""
    st = dest.stats
    st.samples += 1
    st.sum_msgs += dest.msg_count
    st.sum_bytes += dest.msg_bytes
    st.sum_consumers += consumers[0]
    st.sum_active += consumers[1]
    st.sum_backup += consumers[2]


def reset_destination(dest: Destination) -> None:
    """RESET_BROKER metrics: counts start again; peaks restart from the current depth."""
    dest.msgs_in = 0
    dest.msgs_out = 0
    dest.msg_bytes_in = 0
    dest.msg_bytes_out = 0
    dest.peak_msgs = dest.msg_count
    dest.peak_bytes = dest.msg_bytes
    dest.peak_msg_bytes = 0
    dest.stats.reset()
    note_consumers(dest)


def destination_metrics(dest: Destination) -> dict[str, int]:
    """The destination's ``DestMetricsCounters`` values by their OpenMQ key names."""
    st = dest.stats
    total, active, backup = consumer_counts(dest)
    n = st.samples

    def avg(total_sum: int, current: int) -> int:
        return total_sum // n if n else current

    return {
        "numMsgsIn": dest.msgs_in,
        "numMsgsOut": dest.msgs_out,
        "peakNumMsgs": max(dest.peak_msgs, dest.msg_count),
        "peakTotalMsgBytes": max(dest.peak_bytes, dest.msg_bytes),
        "peakMsgBytes": dest.peak_msg_bytes,
        "numActiveConsumers": active,
        "numBackupConsumers": backup,
        "peakNumActiveConsumers": max(st.peak_active, active),
        "peakNumBackupConsumers": max(st.peak_backup, backup),
        "numConsumers": total,
        "peakNumConsumers": max(st.peak_consumers, total),
        "avgNumConsumers": avg(st.sum_consumers, total),
        "msgBytesIn": dest.msg_bytes_in,
        "msgBytesOut": dest.msg_bytes_out,
        "numMsgs": dest.msg_count,
        "totalMsgBytes": dest.msg_bytes,
        "avgNumMsgs": avg(st.sum_msgs, dest.msg_count),
        "avgTotalMsgBytes": avg(st.sum_bytes, dest.msg_bytes),
        "diskReserved": 0,
        "diskUsed": 0,
        "diskUtilizationRatio": 0,
        "numExpiredMsgs": st.expired,
        "numPurgedMsgs": st.purged,
        "numAckedMsgs": st.acked,
        "numDiscardedMsgs": st.discarded,
        "numRejectedMsgs": st.rejected,
        "numRolledbackMsgs": st.rolledback,
        "avgNumActiveConsumers": avg(st.sum_active, active),
        "avgNumBackupConsumers": avg(st.sum_backup, backup),
    }


class LagWindow:
    """Event-loop lag samples (seconds) over one window: its max and 99th percentile.

    The broker's lag probe (broker/server/looplag.py) adds one sample every 100 ms;
    :meth:`roll` closes the window, keeps its figures as the reported ones and starts
    the next, so a report always covers one whole window and costs no sorting per sample.
    """

    __slots__ = ("_samples", "max", "p99", "count", "worst")

    def __init__(self) -> None:
        self._samples: list[float] = []
        self.max = 0.0  # of the last closed window
        self.p99 = 0.0
        self.count = 0
        self.worst = 0.0  # since the broker started

    def add(self, seconds: float) -> None:
        self._samples.append(seconds)

    def roll(self) -> tuple[float, float, int]:
        """Close the window: (max, p99, samples) of it, which become the reported ones."""
        samples, self._samples = self._samples, []
        if samples:
            samples.sort()
            self.max = samples[-1]
            # Nearest rank: with fewer than 100 samples p99 is the max.
            self.p99 = samples[max(0, -(-len(samples) * 99 // 100) - 1)]
            self.worst = max(self.worst, self.max)
        else:
            self.max = self.p99 = 0.0
        self.count = len(samples)
        return self.max, self.p99, self.count
