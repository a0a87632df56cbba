"""Where training runs: picking a device, and mixed precision on it."""

from __future__ import annotations

from contextlib import nullcontext

import torch

__all__ = ["pick_device", "autocast_for"]


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


def autocast_for(device: torch.device, amp: str):
    """bf16 autocast context for ``amp`` ("auto": on CUDA with bf16 support only)."""
    use = amp == "bf16" or (
        amp == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported()
    )
    if not use:
        return nullcontext
    return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)

