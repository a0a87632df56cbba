"""Where training runs: picking a device, and mixed precision on it."""

from __future__ import annotations

from contextlib import nullcontext

import torch

#: The values of :attr:`TrainConfig.amp` (see :func:`precision`).
AMP_MODES = ("auto", "native", "bf16", "off")

__all__ = ["AMP_MODES", "pick_device", "native_bf16", "precision", "autocast_for"]


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


def precision(device: torch.device, amp: str) -> tuple[bool, str]:
    """Whether training with ``amp`` on ``device`` runs under bf16 autocast,
    and why, in words: ``amp="bf16"`` always; ``"auto"`` on CUDA GPUs with
    bf16; ``"native"`` wherever :func:`native_bf16` finds hardware for it;
    ``"off"`` never."""
    device = torch.device(device)
    native = native_bf16(device)
    if amp == "bf16":
        return True, "bf16 autocast (asked for)"
    if amp == "auto" and device.type == "cuda" and native:
        return True, f"bf16 autocast ({native})"
    if amp == "native" and native:
        return True, f"bf16 autocast ({native})"
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
