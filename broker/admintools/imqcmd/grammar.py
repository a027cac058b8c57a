"""imqcmd's grammar: the usage text, the options, and the checks of a subcommand's
options before anything is sent to the broker (or asked)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from django.core.management.base import CommandError

from broker.protocol.dest_attributes import DESTINATION_ATTRIBUTES

from .session import Spec

USAGE = """\
Administer a running broker with OpenMQ's imqcmd syntax: imqcmd SUBCOMMAND ARGUMENT [options]

Broker:
  query bkr                              show the broker's state and main properties
  update bkr -o name=value [-o ...]      change broker properties at run time
  pause bkr / resume bkr                 pause or resume every NORMAL service
  quiesce bkr / unquiesce bkr            refuse, or accept again, new connections
  shutdown bkr [-nofailover]             stop the broker (HA: -nofailover, no takeover)
  restart bkr                            stop the broker and start it again
  takeover bkr -n BROKERID               HA: take over a failed or stopped broker's data now
  reset bkr [-rst METRICS|ALL]           reset the broker's metrics counters
  metrics bkr [-m ttl|rts|cxn] [-int SECONDS] [-msp COUNT]
  reload cls                             every broker of the cluster reads its broker
                                         list again (imq.cluster.brokerlist / .url)
  changemaster cls -o imq.cluster.masterbroker=HOST:PORT
                                         on the master broker: another broker becomes
                                         the master (imq.cluster.dynamicChangeMasterBrokerEnabled)
  reload acl                             re-read the access control rules (ours)
Connection services:
  list svc                               the services, their ports and states
  query svc -n NAME                      one service
  update svc -n NAME -o port=N|minThreads=N|maxThreads=N [-o ...]
  pause svc -n NAME / resume svc -n NAME
  metrics svc -n NAME [-m ttl|rts|cxn] [-int SECONDS] [-msp COUNT]
Connections:
  list cxn [-svn SERVICE]                the client connections (-n SERVICE works too)
  query cxn -n ID / destroy cxn -n ID
Physical destinations:
  list dst [-t q|t] [-tmp]               -tmp: with temporary destinations
  query dst -t q|t -n NAME
  create dst -t q|t -n NAME [-o attr=value ...]
  update dst -t q|t -n NAME -o attr=value [-o ...]
  destroy dst -t q|t -n NAME / purge dst -t q|t -n NAME
  pause dst -t q|t -n NAME [-pst CONSUMERS|PRODUCERS|ALL] / resume dst -t q|t -n NAME
  compact dst [-t q|t -n NAME]           reclaim message store space (all, or one)
  metrics dst -t q|t -n NAME [-m ttl|rts|con|dsk] [-int SECONDS] [-msp COUNT]
  list cns -t q|t -n NAME                a destination's consumers (ours: not in OpenMQ)
  attributes (-o): {attributes}
Durable subscriptions:
  list dur [-d TOPIC]                    (OpenMQ needs -d; without it: all of them)
  purge dur -n NAME -c CLIENTID / destroy dur -n NAME -c CLIENTID
Transactions:
  list txn / query txn -n ID / commit txn -n ID / rollback txn -n ID

Options:
  -b host:port   the broker's port mapper (default localhost:7676)
  -u user        the administrator (default admin); changes are logged under this name
  -passfile FILE a file with a line imq.imqcmd.password=PASSWORD (otherwise prompted)
  -f             do not ask "Are you sure ...?" before a change
  -s             silent: no output but errors (and the question, without -f)
  -rtm SECONDS   how long to wait for each reply (default 10)
  -secure        over the broker's TLS admin service (ssladmin), its certificate verified
  -truststore FILE  with -secure, a PEM file of the certificates to trust, e.g. the broker's
                 keystore.crt (ours; default: the system's CAs and this machine's broker
                 certificate, IMQ_VARHOME/IMQ_INSTANCE's keystore.crt)
  -rtr N, -javahome DIR   accepted for compatibility and ignored
"""


def _usage() -> str:
    import textwrap

    from broker.protocol.dest_attributes import DESTINATION_ATTRIBUTES

    names = ", ".join(a.name for a in DESTINATION_ATTRIBUTES)
    names += " (sizes in bytes or 100b, 10k, 5m; -1: unlimited)"
    text = "\n    ".join(textwrap.wrap(names, 84))
    return USAGE.replace("{attributes}", text)


def usage() -> str:
    """The usage text, with the destination attributes -o takes."""
    names = ", ".join(a.name for a in DESTINATION_ATTRIBUTES)
    names += " (sizes in bytes or 100b, 10k, 5m; -1: unlimited)"
    text = "\n    ".join(textwrap.wrap(names, 84))
    return USAGE.replace("{attributes}", text)


PAUSE_TYPES = ("CONSUMERS", "PRODUCERS", "ALL")
METRIC_TYPES = {
    "bkr": ("ttl", "rts", "cxn"),
    "svc": ("ttl", "rts", "cxn"),
    "dst": ("ttl", "rts", "con", "dsk"),
}
NEEDS_TEXT = {
    "dest_type": "-t q|t (the destination type)",
    "name": "-n <name>",
    "client_id": "-c <client ID>",
    "attrs": "-o name=value",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """imqcmd's options (OpenMQ's names)."""
    parser.add_argument("command", metavar="SUBCOMMAND", help="list, query, create, ...")
    parser.add_argument("object", metavar="ARGUMENT", help="bkr, svc, cxn, dst, dur, txn")
    parser.add_argument("-t", dest="dest_type", help="destination type: q (queue), t (topic)")
    parser.add_argument("-n", dest="name", help="destination, service, durable, ID, ...")
    parser.add_argument("-c", dest="client_id", help="client ID (purge/destroy dur)")
    parser.add_argument(
        "-nofailover",
        dest="nofailover",
        action="store_true",
        help="shutdown bkr: no other broker of an HA cluster takes over its data",
    )
    parser.add_argument("-d", dest="topic", help="topic (list dur)")
    parser.add_argument("-svn", dest="service", help="service name (list cxn)")
    parser.add_argument("-o", dest="attrs", action="append", default=[], metavar="name=value")
    parser.add_argument(
        "-pst", dest="pause_type", default="ALL", help="pause dst: " + "|".join(PAUSE_TYPES)
    )
    parser.add_argument("-rst", dest="reset_type", default="METRICS", help="reset bkr: METRICS|ALL")
    parser.add_argument(
        "-tmp", dest="temporary", action="store_true", help="list dst: temporary ones too"
    )
    parser.add_argument(
        "-m", dest="metric_type", help="metrics: ttl, rts, cxn (bkr, svc), con, dsk (dst)"
    )
    parser.add_argument(
        "-int", dest="interval", type=int, default=5, help="metrics: seconds between samples"
    )
    parser.add_argument(
        "-msp",
        dest="samples",
        type=int,
        default=-1,
        help="metrics: number of samples (default: until Ctrl-C)",
    )
    parser.add_argument("-b", dest="broker", default="localhost:7676", help="host:port")
    parser.add_argument("-u", dest="user", default="admin", help="administrator user")
    parser.add_argument("-passfile", dest="passfile", help="file with imq.imqcmd.password=...")
    parser.add_argument("-f", dest="force", action="store_true", help="no confirmation")
    parser.add_argument("-s", dest="silent", action="store_true", help="silent mode")
    parser.add_argument(
        "-rtm", dest="timeout", type=float, default=10.0, help="seconds to wait for each reply"
    )
    parser.add_argument(
        "-secure",
        dest="secure",
        action="store_true",
        help="use the broker's TLS admin service (ssladmin)",
    )
    parser.add_argument(
        "-truststore",
        dest="truststore",
        metavar="FILE",
        help="with -secure: PEM certificates to trust (e.g. the broker's keystore.crt)",
    )
    parser.add_argument("-rtr", dest="retries", type=int, help=argparse.SUPPRESS)
    parser.add_argument("-javahome", dest="javahome", help=argparse.SUPPRESS)


def unknown(key: tuple[str, str], commands: dict[tuple[str, str], Spec]) -> str:
    """The error for a (verb, noun) that is not a subcommand."""
    objects = sorted({o for c, o in commands if c == key[0]})
    if not objects:
        verbs = ", ".join(sorted({c for c, _ in commands}))
        return f"Error: unknown subcommand {key[0]!r}; one of: {verbs}"
    return f"Error: imqcmd {key[0]} takes {' or '.join(objects)}, not {key[1]!r}"


def check(key: tuple[str, str], spec: Spec, opts: dict[str, Any]) -> dict[str, str]:
    """Refuse incomplete or bad options before anything is sent (or asked); normalise
    those the handlers read (-pst, -m) and return the -o attributes."""
    what = f"{key[0]} {key[1]}"
    if key == ("list", "cxn") and opts["name"] and not opts["service"]:
        opts["service"] = opts["name"]  # `list cxn -n jms` as well as `-svn jms`
    missing = [NEEDS_TEXT[n] for n in spec.needs if not opts.get(n)]
    if missing:
        raise CommandError(f"Error: imqcmd {what} needs {' and '.join(missing)}")
    if opts["dest_type"] is not None and opts["dest_type"].lower() not in (
        "q",
        "t",
        "queue",
        "topic",
    ):
        raise CommandError(f"Error: -t must be q (queue) or t (topic), not {opts['dest_type']!r}")
    if key == ("compact", "dst") and bool(opts["name"]) != bool(opts["dest_type"]):
        raise CommandError("Error: imqcmd compact dst takes both -t and -n, or neither")
    pst = opts["pause_type"].upper()
    if pst not in PAUSE_TYPES:
        raise CommandError(
            f"Error: -pst must be one of {', '.join(PAUSE_TYPES)}, not {opts['pause_type']!r}"
        )
    opts["pause_type"] = pst
    if opts["reset_type"].upper() not in ("METRICS", "ALL"):
        raise CommandError(f"Error: -rst must be METRICS or ALL, not {opts['reset_type']!r}")
    if key[0] == "metrics":
        kinds = METRIC_TYPES[key[1]]
        opts["metric_type"] = (opts["metric_type"] or "ttl").lower()
        if opts["metric_type"] not in kinds:
            raise CommandError(
                f"Error: metrics {key[1]} -m takes {', '.join(kinds)}, not {opts['metric_type']!r}"
            )
        if opts["interval"] < 1:
            raise CommandError("Error: -int must be at least 1 (seconds)")
        if opts["samples"] == 0 or opts["samples"] < -1:
            raise CommandError("Error: -msp must be a positive number of samples")
    attrs = attributes(opts["attrs"])
    if key[0] in ("query", "destroy", "commit", "rollback") and key[1] in ("cxn", "txn"):
        try:
            int(opts["name"])
        except ValueError:
            kind = "connection" if key[1] == "cxn" else "transaction"
            raise CommandError(
                f"Error: -n must be a {kind} ID (a number), not {opts['name']!r}"
            ) from None
    return attrs


def attributes(items: list[str]) -> dict[str, str]:
    """-o name=value options as a dict."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"Error: -o expects name=value, got {item!r}")
        out[name.strip()] = value.strip()
    return out
