"""What machine a benchmark ran on: CPU model and flags, threads, load, matmul speed.

Timings only mean something beside the machine that produced them: every
benchmark prints :func:`describe` before and after its work (the matmul
speed before and after shows whether the machine was busy meanwhile) and
stores the dicts in its JSON.

    from machine import describe, print_machine
    before = print_machine("before")

or, in one line once the thread count is set, ``report_before_and_after()``.
"""

from __future__ import annotations

import atexit
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from minitransformer.instruments.machine import cpu_model  # the chapters' name for it

__all__ = [
    "cpu_model", "cpu_flags", "matmul_gflops", "describe", "print_machine",
    "report_before_and_after", "run_stamp",
]

#: The CPU features that decide the fast paths: AVX-512, native bf16 (AVX512_BF16
#: or AMX), AVX2 as the floor.
FLAGS_OF_INTEREST = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def _cpuinfo() -> dict[str, str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    fields = (line.partition(":") for line in first.splitlines())
    return {k.strip(): v.strip() for k, _, v in fields}


def cpu_flags() -> dict[str, bool]:
    """Which of :data:`FLAGS_OF_INTEREST` the CPU reports (Linux only; else empty)."""
    flags = set(_cpuinfo().get("flags", "").split())
    return {name: name in flags for name in FLAGS_OF_INTEREST} if flags else {}


def matmul_gflops(size: int = 1024, repeats: int = 10) -> dict[str, float]:
    """GFLOP/s of a ``size``² fp32 matmul now, per wall second and per CPU
    second of this process (a busy machine gives less; ``benchmarks/README.md``
    records what the project's machines gave)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        a @ b
    flop = repeats * 2 * size**3 / 1e9
    return {
        "wall": round(flop / (time.perf_counter() - wall), 1),
        "cpu": round(flop / max(time.process_time() - cpu, 1e-9), 1),
    }


def describe() -> dict:
    """The machine now, as plain values for a result file."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu": cpu_model(),
        "flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "load_average_1_5_15": [round(x, 2) for x in load] if load else None,
        "matmul_1024_gflops": matmul_gflops(),
    }


def print_machine(when: str) -> dict:
    """Print :func:`describe` in two lines, headed ``when``; return it."""
    d = describe()
    flags = " ".join(f"{k}{'+' if v else '-'}" for k, v in d["flags"].items()) or "unknown"
    print(f"[{when}] {d['cpu']}, {d['cpu_count']} CPUs, torch {d['torch']} with "
          f"{d['torch_threads']} threads; flags: {flags}")
    m = d["matmul_1024_gflops"]
    print(f"[{when}] 1024² fp32 matmul: {m['wall']:.0f} GFLOP/s per wall second "
          f"({m['cpu']:.0f} per CPU second); load average {d['load_average_1_5_15']}",
          flush=True)
    return d


def report_before_and_after() -> dict:
    """Print the machine now, and again when the script exits (after its
    measurements, whichever way it ends); returns :func:`describe` of now."""
    before = print_machine("before")
    atexit.register(print_machine, "after")
    return before


def run_stamp(started: float | None = None, args: list[str] | None = None) -> dict:
    """How and when this script ran, for its JSON record: ``{"command": "python
    benchmarks/<script> <args>", "date": "YYYY-MM-DD HH:MM UTC"}``.

    ``started`` is a ``time.time()`` (default: now); ``args`` replaces the
    command-line arguments as given (``sys.argv[1:]``), e.g. with defaults
    spelled out.
    """
    shown = sys.argv[1:] if args is None else list(args)
    when = datetime.fromtimestamp(time.time() if started is None else started, timezone.utc)
    return {"command": " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *shown]),
            "date": when.strftime("%Y-%m-%d %H:%M UTC")}
