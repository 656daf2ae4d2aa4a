"""Shared helpers for tests that run the command line in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import xiaoyarl

PACKAGE_DIR = Path(xiaoyarl.__file__).parent  # as tracebacks print it (not resolved)


def library_frames(text: str) -> list[str]:
    """The lines of `text` that are Python traceback frames in the library's own files.

    Matched by the package's full path, so a clone whose path contains 'xiaoyarl/' (and a torch
    C++ trace that prints the path of the venv inside it) is not taken for one.
    """
    return [line for line in text.splitlines() if f'File "{PACKAGE_DIR}{os.sep}' in line]


# A tiny but complete PPO run on the torch-native CartPole: 16 envs x 16 steps per rollout.
TINY = ["--num-envs", "16", "--set", "horizon_len=16", "--threads", "1", "--eval-episodes", "2"]


def cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """Run `python -m xiaoyarl ARGS` and return the CompletedProcess (text output)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "xiaoyarl", *args], capture_output=True, text=True,
        cwd=cwd, env=full_env, timeout=timeout,
    )  # fmt: skip


def popen(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "xiaoyarl", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
