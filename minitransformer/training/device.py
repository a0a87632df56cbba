"""Where training runs: picking a device, and mixed precision on it."""

from __future__ import annotations

import time
from contextlib import nullcontext

import torch

#: The values of :attr:`TrainConfig.amp` (see :func:`precision`).
AMP_MODES = ("auto", "native", "bf16", "off")

#: ``amp="native"`` on a CPU takes bf16 only where a bf16 matrix product
#: measures at least this many times faster than the same one in float32.
BF16_MIN_SPEEDUP = 1.1

__all__ = ["AMP_MODES", "BF16_MIN_SPEEDUP", "pick_device", "native_bf16",
           "bf16_matmul_speedup", "precision", "autocast_for"]

_speedups: dict[str, float] = {}


def pick_device(preference: str = "auto") -> torch.device:
    """CUDA if available, then Apple's MPS, then the CPU (or ``preference`` if not "auto").

    Raises ``RuntimeError`` (one line) for a device this machine does not have
    (``"cuda"`` without a GPU, ``"cuda:3"`` with one) or cannot compute on
    (``"meta"``), so the mistake shows before anything is loaded or written.
    """
    if preference != "auto":
        device = torch.device(preference)  # RuntimeError for a malformed string
        if device.type == "meta":
            raise RuntimeError("the 'meta' device holds no data; use 'cpu', 'cuda' or 'auto'")
        try:
            torch.empty(1, device=device)
        except Exception as err:  # not compiled with it, no such GPU, no driver
            reason = str(err).strip().split(". ")[0][:120] or type(err).__name__
            raise RuntimeError(f"device {preference!r} is not available here ({reason})") from None
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def native_bf16(device: torch.device) -> str | None:
    """What lets ``device`` compute bf16 matrix products natively ("a CUDA GPU
    with bf16", "a CPU with AMX", "a CPU with AVX512_BF16"), or None. On a
    CPU without either, bf16 is emulated and slower than float32."""
    device = torch.device(device)
    if device.type == "cuda":
        return "a CUDA GPU with bf16" if torch.cuda.is_bf16_supported() else None
    if device.type == "cpu":
        cpu = getattr(torch, "cpu", None)
        if getattr(cpu, "_is_amx_tile_supported", lambda: False)():
            return "a CPU with AMX"
        if getattr(cpu, "_is_avx512_bf16_supported", lambda: False)():
            return "a CPU with AVX512_BF16"
    return None


def bf16_matmul_speedup(device: torch.device, size: int = 1024) -> float:
    """How many times faster a ``(size, size/2) @ (size/2, size)`` float32
    product runs under bf16 autocast than without it on ``device``.

    On a CPU the product runs on one thread (the threads torch had are
    restored after): a 2-thread product on a 2-core machine that also runs
    other work waits for its slower thread, and its ratio swung from 0.6x to
    12x between calls where one thread gave 4.2x to 5.2x. Each precision is
    warmed up three times (the first bf16 calls compile kernels), then timed
    seven times in turn; the ratio is of the fastest of each, since other
    work can only slow a call down. About 0.1 s; measured once per device
    type and process, then remembered. Its random inputs come from a
    generator of its own, so the global random state is left as it was.

    Hardware that supports bf16 is not always faster with it: an Intel Xeon
    with AVX512_BF16 but no AMX ran a training step 0.69x as fast under bf16
    autocast as in float32 (benchmarks/README.md), an AMD EPYC with the same
    flag 1.32x, a Xeon with AMX 1.27x (this product: about 4.8x there)."""
    device = torch.device(device)
    if device.type in _speedups:
        return _speedups[device.type]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size // 2, device=device, generator=generator)
    b = torch.randn(size // 2, size, device=device, generator=generator)

    def timed(cast: bool) -> float:
        context = (torch.autocast(device_type=device.type, dtype=torch.bfloat16)
                   if cast else nullcontext())
        sync()
        start = time.perf_counter()
        with context:
            a @ b
        sync()
        return time.perf_counter() - start

    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        for _ in range(3):  # warm-up: the first calls compile and allocate
            timed(False), timed(True)
        times = {False: [], True: []}
        for _ in range(7):
            for cast in (False, True):
                times[cast].append(timed(cast))
    finally:
        torch.set_num_threads(threads)
    _speedups[device.type] = min(times[False]) / max(min(times[True]), 1e-9)
    return _speedups[device.type]


def precision(device: torch.device, amp: str) -> tuple[bool, str]:
    """Whether training with ``amp`` on ``device`` runs under bf16 autocast,
    and why, in words: ``amp="bf16"`` always; ``"auto"`` on CUDA GPUs with
    bf16; ``"native"`` on CUDA GPUs with bf16, and on a CPU where
    :func:`native_bf16` finds hardware for it and a bf16 matrix product
    measures at least :data:`BF16_MIN_SPEEDUP` times faster than float32
    (:func:`bf16_matmul_speedup`); ``"off"`` never."""
    device = torch.device(device)
    native = native_bf16(device)
    if amp == "bf16":
        return True, "bf16 autocast (asked for)"
    if amp in ("auto", "native") and device.type == "cuda" and native:
        return True, f"bf16 autocast ({native})"
    if amp == "native" and native:
        speedup = bf16_matmul_speedup(device)
        measured = f"a bf16 matrix product ran {speedup:.2f}x as fast as float32 here"
        if speedup >= BF16_MIN_SPEEDUP:
            return True, f"bf16 autocast ({native}; {measured})"
        return False, f"float32 ({native}, but {measured})"
    if amp == "off":
        return False, "float32 (asked for)"
    if amp == "auto" and device.type != "cuda":
        return False, "float32 (amp='auto' uses bf16 on CUDA GPUs only)"
    return False, f"float32 (no native bf16 on this {device.type})"


def autocast_for(device: torch.device, amp: str):
    """bf16 autocast context for ``amp`` (see :func:`precision`)."""
    if not precision(device, amp)[0]:
        return nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)
