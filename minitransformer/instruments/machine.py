"""Name the machine a timing was measured on.

A time printed in a chapter means something only with the machine beside
it: the CPU model, how many cores it has, how many threads PyTorch uses,
and how busy the machine was (the 1-minute load average, where the system
reports one).

    from minitransformer.instruments.machine import describe_machine
    print(describe_machine())  # AMD EPYC 7B13, 2 cores, torch 2.5.1, 1 thread, load 0.4
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

__all__ = ["cpu_model", "describe_machine"]


def cpu_model() -> str:
    """The CPU's model name (Linux's ``/proc/cpuinfo``, else the platform's
    processor string, else the architecture, e.g. ``"x86_64"``)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_machine() -> str:
    """One line: CPU model, cores, torch version, torch threads and the
    1-minute load average (where the system has one)."""
    threads = torch.get_num_threads()
    parts = [cpu_model(), f"{os.cpu_count()} cores", f"torch {torch.__version__}",
             f"{threads} thread{'s' if threads != 1 else ''}"]
    if hasattr(os, "getloadavg"):
        parts.append(f"load {os.getloadavg()[0]:.1f}")
    return ", ".join(parts)
