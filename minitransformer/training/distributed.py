"""Data-parallel training under ``torchrun`` (DistributedDataParallel).

Each of ``W`` processes holds a copy of the model, runs forward and backward
on its own batch, and DDP averages the gradients across processes during the
backward pass, so every copy takes the same optimiser step. ``torchrun``
sets ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``; these helpers read them,
start the process group (NCCL on CUDA GPUs, gloo on CPUs) when needed and do
nothing at all in a plain single process.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import Tensor, nn

__all__ = [
    "is_on", "rank_and_world", "device_for_rank", "wrap",
    "all_reduce_sum", "all_reduce_max", "barrier",
]


def _env_world() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_on() -> bool:
    """True when running as one of several processes (a process group exists or will)."""
    return (dist.is_available() and dist.is_initialized()) or _env_world() > 1


def _ensure_group(device: torch.device) -> None:
    if _env_world() > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")


def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)``; ``(0, 1)`` in a single process."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def device_for_rank(device: torch.device) -> torch.device:
    """Start the process group if ``torchrun`` asked for one; on CUDA, give
    each process its own GPU (``cuda:LOCAL_RANK``)."""
    if device.type == "cuda" and _env_world() > 1:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    _ensure_group(device)
    return device


def wrap(model: nn.Module, device: torch.device) -> nn.Module:
    """The model wrapped in DistributedDataParallel when distributed, else itself."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return model
    ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=ids)


def _all_reduce(t: Tensor, op) -> Tensor:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(t, op=op)
    return t


def all_reduce_sum(t: Tensor) -> Tensor:
    """Sum ``t`` over all processes in place (and return it); no-op in one process."""
    return _all_reduce(t, dist.ReduceOp.SUM)


def all_reduce_max(t: Tensor) -> Tensor:
    """Largest ``t`` over all processes, in place (and returned); no-op in one process."""
    return _all_reduce(t, dist.ReduceOp.MAX)


def barrier() -> None:
    """Wait for every process (no-op in one process)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
