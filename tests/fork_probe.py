"""What tests/test_manage_fork.py runs as ``python -m tests.fork_probe FLAG ARGS``: says
how it was started, then waits (its output not flushed) until the file FLAG exists."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    print("argv", Path(sys.argv[0]).name, *sys.argv[1:])
    print("orig", *sys.orig_argv[1:])
    print("leader", os.getsid(0) == os.getpid())
    print("waiting")  # no flush: seen while it waits only if stdout is unbuffered
    flag = Path(sys.argv[1])
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(3)
