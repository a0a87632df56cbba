"""describe_machine names the machine beside a timing (instruments/machine.py)."""

from __future__ import annotations

import os

import torch

from minitransformer.instruments import machine
from minitransformer.instruments.machine import cpu_model, describe_machine


def test_describe_machine_names_cores_threads_and_torch():
    line = describe_machine()
    assert "\n" not in line
    assert line.startswith(cpu_model())
    assert f"{os.cpu_count()} cores" in line
    assert f"torch {torch.__version__}" in line
    threads = torch.get_num_threads()
    assert f"{threads} thread" in line


def test_cpu_model_reads_the_model_name_from_cpuinfo(tmp_path, monkeypatch):
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nvendor_id\t: X\nmodel name\t: Test CPU 9000\n")
    monkeypatch.setattr(machine, "Path", lambda _: fake)
    assert cpu_model() == "Test CPU 9000"
    monkeypatch.setattr(machine, "Path", lambda _: tmp_path / "missing")
    assert cpu_model()  # falls back to the platform's name, never empty
