"""The portal reaches the broker through the admin tools, the models and the shared
modules (broker/protocol, broker/rawmetrics.py, broker/channel_groups.py...), never the
broker's server package: no module of portal/ names ``broker.server`` in an import."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_portal_does_not_import_the_broker_server():
    offenders = []
    for path in sorted((ROOT / "portal").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [
                f"{path.relative_to(ROOT)}: {n}"
                for n in names
                if n == "broker.server" or n.startswith("broker.server.")
            ]
    assert offenders == []
