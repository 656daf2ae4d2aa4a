"""Checkpoint I/O: plain data written atomically, read back with `weights_only=True`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from xiaoyarl.errors import CheckpointError


def save_atomic(obj: dict, path: str | Path) -> None:
    """Write `obj` with `torch.save` to a temporary file, flush it to disk, then rename it over
    `path`: a crash at any moment leaves either the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` for a writer (a model exporter, a video writer); renamed
    over `path` when the block succeeds, removed when it fails: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.partial{path.suffix}")
    try:
        yield partial
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def load_plain(path: str | Path, what: str = "checkpoint") -> dict:
    """Load a file written by `save_atomic`; any failure becomes one clear `CheckpointError`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no {what} at {path}.")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for truncated or foreign files
        raise CheckpointError(
            f"the {what} {path} cannot be read ({type(e).__name__}: {str(e)[:120]}). It is "
            f"corrupted, truncated or not a xiaoyarl file. Delete it to start over, or restore a "
            f"copy from a backup."
        ) from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"the {what} {path} does not hold a xiaoyarl state dict.")
    return obj
