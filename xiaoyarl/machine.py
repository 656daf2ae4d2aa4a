"""The machine a run, a benchmark or a preset's search ran on, in one line (their provenance);
and the process's memory allocator, set to keep freed memory for reuse."""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path


def machine() -> str:
    """`"<cores> cores, <CPU model>, torch <version>"` (plus the GPU when CUDA is available)."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    line = f"{os.cpu_count()} cores, {cpu}, torch {torch.__version__}"
    if torch.cuda.is_available():
        line += f", {torch.cuda.get_device_name()}"
    return line


_MALLOC_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")
_kept: bool | None = None  # the first call's outcome


def keep_freed_memory() -> bool:
    """Make glibc's `malloc` keep freed blocks of up to 32 MiB for reuse (its mmap threshold 32
    MiB, and up to 256 MiB of free memory kept at the heap's top) instead of returning them to
    the system when they are freed, which makes every allocation of their size fault its pages
    in again. Once per process, on Linux with glibc; not where the process already chose its
    allocator's settings (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`, `GLIBC_TUNABLES`
    or an `LD_PRELOAD`ed allocator: set `MALLOC_TRIM_THRESHOLD_=131072`, glibc's default, to
    keep its defaults). Returns whether the process's allocator keeps freed memory so.

    Called where a process starts training (`train_agent`, the parallel runner's worker and
    evaluator processes) and where a torch-native MinAtar game is made on a CPU: a step of
    thousands of sub-envs of images, a batch of images, a frame stack allocate blocks of
    megabytes, and glibc's
    defaults return them to the system as they are freed (measured in BENCHMARKS.md's MinAtar
    section: up to 2x on the env steps, 1.6x on an Atari D3QN run)."""
    global _kept
    if _kept is None:
        _kept = _set_malloc_thresholds()
    return _kept


def _set_malloc_thresholds() -> bool:
    if platform.system() != "Linux" or any(
        os.environ.get(name) for name in (*_MALLOC_SETTINGS, "LD_PRELOAD")
    ):
        return False
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
        libc = ctypes.CDLL("libc.so.6")
    except (ValueError, OSError):  # not glibc
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # mallopt's parameters (malloc.h)
    return bool(
        libc.mallopt(m_mmap_threshold, 32 << 20) and libc.mallopt(m_trim_threshold, 256 << 20)
    )
