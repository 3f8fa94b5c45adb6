"""The benchmark says when the machine is loaded (its ratios are then not comparable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fbnops.tools.bench import machine_load


def test_the_verdict_follows_the_figures():
    quiet = {"busy_elsewhere": 0.05, "loadavg": [0.1, 0.1, 0.1], "median_spread": 0.03, "threads_used": 2,
             "loaded": False}  # fmt: skip
    assert machine_load.lines(quiet, 2)[0].startswith("# machine: quiet")
    monitor = machine_load.LoadMonitor()
    noisy = monitor.summary([{"fbnops_spread": 0.6}, {"fbnops_spread": 0.5}], threads_used=1)
    assert noisy["loaded"] and noisy["median_spread"] == 0.55  # the spread alone is a witness
    assert machine_load.lines(noisy, 2)[0].startswith("# WARNING: loaded machine")


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not os.path.exists("/proc/stat"), reason="needs 2 cores and Linux")
def test_a_run_beside_a_busy_process_is_reported_loaded(tmp_path):
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        out = tmp_path / "bench.json"
        run = subprocess.run([sys.executable, "-m", "fbnops.cli", "bench", "--quick", "--json", str(out)],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    finally:
        hog.kill()
        hog.wait()
    assert run.returncode == 0, run.stderr
    assert "WARNING: loaded machine" in run.stdout
    doc = json.loads(out.read_text())
    assert doc["load"]["loaded"] and doc["load"]["busy_elsewhere"] >= 0.7
