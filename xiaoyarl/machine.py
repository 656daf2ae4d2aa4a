"""The machine a run, a benchmark or a preset's search ran on, in one line (their provenance)."""

from __future__ import annotations

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
