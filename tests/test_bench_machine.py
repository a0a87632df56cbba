"""benchmarks/machine.py: the provenance every benchmark record carries."""

from __future__ import annotations

import re
import sys
from datetime import datetime, timezone

import pytest


@pytest.fixture(scope="module")
def machine(benchmarks_path):
    import machine

    return machine


def test_run_stamp_names_the_script_its_arguments_and_the_utc_minute(machine, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench_x.py", "--threads", "2"])
    stamp = machine.run_stamp(0.0)  # the epoch
    assert stamp == {"command": "python benchmarks/bench_x.py --threads 2",
                     "date": "1970-01-01 00:00 UTC"}
    # the path it was run by does not matter, arguments can be replaced
    monkeypatch.setattr(sys, "argv", ["/somewhere/benchmarks/bench_x.py"])
    assert machine.run_stamp(args=["--sizes", "4000"])["command"] == (
        "python benchmarks/bench_x.py --sizes 4000")
    # without a start time: now, to the minute
    now = datetime.now(timezone.utc)
    date = machine.run_stamp()["date"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", date)
    assert abs((datetime.strptime(date, "%Y-%m-%d %H:%M UTC").replace(tzinfo=timezone.utc)
                - now).total_seconds()) < 120
