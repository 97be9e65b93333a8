"""Crash tests' child processes: a writer started on a store and SIGKILLed mid-work."""

from __future__ import annotations

import signal
import subprocess
import sys
import time


def kill_when_ready(script, store, delay: float) -> None:
    """Run ``script`` on ``store`` in a child process; ``delay`` seconds after it prints its
    ``ready`` line, SIGKILL it (a point inside its commit loop, chosen by the caller's
    random delay) and wait for it to end."""
    child = subprocess.Popen([sys.executable, str(script), str(store)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    child.wait()
