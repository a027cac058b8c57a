"""Brokers shared by the tests of one module, one per set of broker properties.

A test that needs properties the session's ``broker`` does not have, and does not stop,
kill or restart the broker, asks ``broker_with(*props)``: the first test asking for those
properties starts the broker, the others of the module reuse it (each with destinations
of its own names), and it stops when the module is done.  Import the fixture into the
test module: ``from .shared_brokers import broker_with_fixture  # noqa: F401``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from broker.launcher import BrokerProcess, start_broker


@pytest.fixture(scope="module", name="broker_with")
def broker_with_fixture(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_with(*props)``: this module's running broker started with ``props``."""
    started: dict[tuple[str, ...], BrokerProcess] = {}

    def get(*props: str) -> BrokerProcess:
        b = started.get(props)
        if b is None or b.proc.poll() is not None:  # a test that failed may have left it dead
            b = started[props] = start_broker(tmp_path_factory.mktemp("shared"), *props)
        return b

    yield get
    for b in started.values():
        b.stop()
