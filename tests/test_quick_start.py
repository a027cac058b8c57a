"""The quick-start page's programs and commands work as printed (docs/quick-start.md).

The Java program runs on the stock OpenMQ Java client (the jars the page names), the Python
program on our client, and the page's ``imqcmd list dst`` line on the installed imqcmd, each
against a real broker; only the port mapper's port is changed from the page's 7676.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker.launcher import BrokerProcess
from broker.stock_paths import JAVA_CLIENT
from tests.interop.jvm import require_java
from tests.jvmflags import JAVA

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "quick-start.md"

pytestmark = pytest.mark.timeout(180)


def code_block(language: str) -> str:
    """The page's one fenced block in ``language``."""
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", PAGE.read_text(), re.M | re.S)
    assert len(blocks) == 1, f"{PAGE} should hold one {language} block"
    return blocks[0]


def command_line(start: str) -> str:
    """The page's indented command line that starts with ``start``."""
    lines = [ln.strip() for ln in PAGE.read_text().splitlines() if ln.startswith("    ")]
    found = [ln for ln in lines if ln.startswith(start)]
    assert found, f"{PAGE} has no command line starting {start!r}"
    return found[0]


def test_the_java_program_sends_and_receives_on_the_stock_client(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    require_java()
    source = tmp_path / "Hello.java"
    source.write_text(code_block("java"))
    # The page's command, with the jars where the page says they are.
    cmd = command_line("java -cp")
    jars = ":".join(str(JAVA_CLIENT / name) for name in re.findall(r"\$J/([\w.-]+\.jar)", cmd))
    assert jars.count(".jar") == 2, cmd
    address = f"mq://{broker.host}:{broker.portmapper_port}/jms"
    r = subprocess.run(
        [*JAVA, "-cp", jars, str(source), address],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "received: hello from Java"


def test_the_python_program_sends_and_receives(broker: BrokerProcess, tmp_path: Path) -> None:
    code = code_block("python")
    assert '"127.0.0.1", 7676' in code
    program = tmp_path / "hello.py"
    program.write_text(
        code.replace('"127.0.0.1", 7676', f'"{broker.host}", {broker.portmapper_port}')
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, str(program)], capture_output=True, text=True, timeout=60, env=env
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "received: hello from Python"


def test_the_imqcmd_line_lists_the_destinations(broker: BrokerProcess, tmp_path: Path) -> None:
    cmd = command_line(".venv/bin/imqcmd list dst").split()
    assert cmd[1:] == ["list", "dst", "-b", "127.0.0.1:7676", "-u", "admin"]
    installed = Path(sys.executable).parent / "imqcmd"
    program = (
        [str(installed)]
        if installed.is_file()
        else [sys.executable, "-c", "from broker.management.console import imqcmd; imqcmd()"]
    )
    args = ["list", "dst", "-b", f"{broker.host}:{broker.portmapper_port}", "-u", "admin"]
    r = subprocess.run(
        [*program, *args],
        input="admin\n",  # the password the page says to type
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "mq.sys.dmq" in r.stdout
    assert "Successfully performed the requested operation." in r.stdout
