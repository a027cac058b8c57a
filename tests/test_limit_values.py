"""The one parser of sizes and counts (broker/props.py) and what 0 means for each limit.

The size cases are what OpenMQ 6.9's own ``com.sun.messaging.jmq.util.SizeString`` makes of
the same text (run once against imq.jar): ``b``/``k``/``m`` in either case, a sign, no
``g``, no decimals, the number part a Java int.  0 is no limit for the broker's message and
system limits and for maxNumMsgs / maxTotalMsgBytes / maxBytesPerMsg (the stock broker
reads them so, and its imqcmd turns a 0 into -1 with warning A2011); a broker property of 0
producers or active consumers stops the stock broker at start (B4359, B4358), an admin
update to 0 producers is refused (B4178).
"""

from __future__ import annotations

import pytest

from broker import props as imq
from broker.config import BrokerConfig, ConfigError
from broker.propcheck import property_value_problem
from broker.props import RUNTIME_PROPERTIES
from broker.protocol import dest_attributes as dattrs

pytestmark = pytest.mark.fast

# text -> bytes, as OpenMQ's SizeString reads it (negative values: no limit, -1 here).
SIZES = {
    "10m": 10 * 2**20,
    "10M": 10 * 2**20,
    "512k": 512 * 1024,
    "512K": 512 * 1024,
    "100b": 100,
    "100B": 100,
    "100": 100,
    "+5": 5,
    "0": 0,
    "0k": 0,
    "-1": -1,
    "-5": -1,
    "-1k": -1,
    "2147483647": 2**31 - 1,
    "10240m": 10240 * 2**20,
    "3000000m": 3000000 * 2**20,
}
NOT_SIZES = ["1g", "1G", "1.5m", "10mb", "10kb", "", "m", "k", "2147483648", "1x", "10 m", "ten"]


def test_sizes_read_as_openmq_reads_them() -> None:
    for text, want in SIZES.items():
        assert imq.parse_size(text) == want, text
    for text in NOT_SIZES:
        with pytest.raises(ValueError, match="size|too large"):
            imq.parse_size(text, "imq.message.max_size")
    assert imq.parse_size(" 10m ") == 10 * 2**20  # a properties file's stray blanks
    assert imq.parse_size(12345) == 12345  # a DestinationInfo's long
    with pytest.raises(ValueError):
        imq.parse_size(True)


def test_counts() -> None:
    assert [imq.parse_count(v) for v in ("0", "7", "-1", "-9", " 12 ", 3)] == [0, 7, -1, -1, 12, 3]
    for text in ("10k", "1.5", "", "many"):
        with pytest.raises(ValueError, match="not an integer"):
            imq.parse_count(text)


def test_broker_limits_zero_is_no_limit() -> None:
    zero = {
        imq.MESSAGE_MAX_SIZE: "0",
        imq.SYSTEM_MAX_SIZE: "0k",
        imq.SYSTEM_MAX_COUNT: "0",
        imq.AUTOCREATE_DEST_ATTRIBUTES["maxNumMsgs"]: "0",
        imq.AUTOCREATE_DEST_ATTRIBUTES["maxTotalMsgBytes"]: "0",
        imq.AUTOCREATE_DEST_ATTRIBUTES["maxBytesPerMsg"]: "0m",
    }
    c = BrokerConfig({p.name: v for p, v in zero.items()})
    assert [c.get(p) for p in zero] == [-1] * len(zero)
    c = BrokerConfig({imq.MESSAGE_MAX_SIZE.name: "10K", imq.SYSTEM_MAX_COUNT.name: "-7"})
    assert (c.get(imq.MESSAGE_MAX_SIZE), c.get(imq.SYSTEM_MAX_COUNT)) == (10240, -1)
    assert BrokerConfig({}).get(imq.MESSAGE_MAX_SIZE) == 70 * 2**20
    # Zero is a value for these: no backup consumers, no prefetch.
    c = BrokerConfig({imq.AUTOCREATE_QUEUE_MAX_BACKUP.name: "0"})
    assert c.get(imq.AUTOCREATE_QUEUE_MAX_BACKUP) == 0
    for prop in (
        imq.AUTOCREATE_DEST_ATTRIBUTES["maxNumProducers"],
        imq.AUTOCREATE_QUEUE_MAX_ACTIVE,
    ):
        with pytest.raises(ConfigError, match=f"{prop.name}: 0 is not allowed"):
            BrokerConfig({prop.name: "0"}).get(prop)
    with pytest.raises(ConfigError, match="imq.message.max_size: '1g' is not a size"):
        BrokerConfig({imq.MESSAGE_MAX_SIZE.name: "1g"}).get(imq.MESSAGE_MAX_SIZE)


def test_runtime_updates_check_with_the_same_parser() -> None:
    """imqcmd update bkr -o name=value: what the admin service accepts."""
    for name, value in [
        (imq.MESSAGE_MAX_SIZE.name, "0"),
        (imq.MESSAGE_MAX_SIZE.name, "20k"),
        (imq.SYSTEM_MAX_SIZE.name, "1M"),
        (imq.SYSTEM_MAX_COUNT.name, "0"),
        (imq.AUTOCREATE_DEST_ATTRIBUTES["maxBytesPerMsg"].name, "100b"),
    ]:
        assert property_value_problem(name, RUNTIME_PROPERTIES[name], value) is None, name
    for name, value, words in [
        (imq.MESSAGE_MAX_SIZE.name, "1g", "not a size"),
        (imq.SYSTEM_MAX_COUNT.name, "5k", "not an integer"),
        (imq.AUTOCREATE_DEST_ATTRIBUTES["maxNumProducers"].name, "0", "not allowed"),
    ]:
        problem = property_value_problem(name, RUNTIME_PROPERTIES[name], value)
        assert problem is not None and words in problem and name in problem, problem


def test_destination_attributes_use_the_same_rules() -> None:
    assert dattrs.convert("maxBytesPerMsg", "10k") == 10240
    assert dattrs.convert("maxTotalMsgBytes", "512K") == 512 * 1024
    assert dattrs.convert("maxBytesPerMsg", 0) == -1
    assert dattrs.convert("maxNumMsgs", 0) == -1
    assert dattrs.convert("consumerFlowLimit", 0) == 0
    assert dattrs.convert("maxNumProducers", "-3") == -1
    with pytest.raises(ValueError, match="maxNumProducers can not be set to 0"):
        dattrs.convert("maxNumProducers", 0)
    with pytest.raises(ValueError, match="not a size"):
        dattrs.convert("maxBytesPerMsg", "1g")
