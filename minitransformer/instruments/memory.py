"""The peak memory a call allocates: the bytes of the tensors it creates
that are alive at once, at their most.

How chapter 12 and ``benchmarks/bench_flash_attention.py`` compare the
full score matrix of attention with blocks of keys (FlashAttention's idea)
on any device, a CPU included: a ``TorchDispatchMode`` sees the outputs of
every operator the call runs; a new storage counts from its allocation
until the tensor it was allocated for is freed. The arguments, allocated
before the call, do not count; views (``transpose``, slicing) share their
base's storage and count once. What PyTorch's allocator caches or a fused kernel
keeps inside itself is not seen: this counts tensors, not the process's
memory.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

__all__ = ["PeakLiveBytes", "peak_bytes"]


class PeakLiveBytes(TorchDispatchMode):
    """While active, counts the bytes of the storages operators allocate that
    are alive at once: ``live`` now, ``peak`` their maximum.

    Args:
        existing: tensors allocated before (the inputs): their storages,
            and views of them, are not counted.
    """

    def __init__(self, existing: Any = ()) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.seen: set[int] = set()
        self.before = {t.untyped_storage().data_ptr() for t in tree_leaves(existing)
                       if isinstance(t, torch.Tensor)}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                ptr, size = storage.data_ptr(), storage.nbytes()
                if size and ptr not in self.seen and ptr not in self.before:  # new, not a view
                    self.seen.add(ptr)
                    self.live += size
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(t, self._free, ptr, size)
        return out

    def _free(self, ptr: int, size: int) -> None:
        if ptr in self.seen:
            self.seen.discard(ptr)
            self.live -= size


def peak_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """The most bytes of tensors allocated by ``fn(*args, **kwargs)`` alive at
    once (:class:`PeakLiveBytes`), its arguments not counted; the result of
    ``fn`` is dropped."""
    with PeakLiveBytes(existing=(args, kwargs)) as counter:
        fn(*args, **kwargs)
    return counter.peak
