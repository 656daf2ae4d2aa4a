"""Console output of a training run: the start-up line, evaluation lines and a live progress bar.

Output can never stop a run: a closed pipe (`xiaoyarl train ... | head -1`), a full disk or a
log function that raises only silences it. On a terminal the progress bar is redrawn in place
(at most `LIVE_EVERY` seconds apart); otherwise the same text is printed as a plain line at most
every `LINES_EVERY` seconds, so a log file gets a line per progress update without a flood.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

LIVE_EVERY = 0.2  # seconds between redraws of the bar on a terminal
LINES_EVERY = 5.0  # seconds between progress lines when output is not a terminal
_STARTED = time.monotonic()  # fallback for `process_seconds` where /proc is not there


def process_seconds() -> float:
    """Seconds since this process started (interpreter start-up and imports included)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: start time since boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _STARTED


class Console:
    """Where progress goes. `log` is `print` (the console, with a live bar on a terminal), any
    other function of one string (a line each time), or None (silent)."""

    def __init__(self, log: Callable[[str], None] | None = print) -> None:
        self.log = log
        self.stream = sys.stdout if log is print else None
        self.live = self.stream is not None and _isatty(self.stream)
        self.bar_shown = False
        self.last_status = -math.inf

    @property
    def enabled(self) -> bool:
        return self.log is not None

    def line(self, text: str) -> None:
        """A line of its own (the start-up line, an evaluation, a warning)."""
        if self.live:
            self._write("\r\033[K" + text + "\n")
            self.bar_shown = False
        else:
            self._emit(text)

    def status_due(self, force: bool = False) -> bool:
        """Whether the progress bar is due for a refresh (`force`: on a terminal, now)."""
        if self.log is None:
            return False
        if force and self.live:
            return True
        wait = LIVE_EVERY if self.live else LINES_EVERY
        return time.monotonic() - self.last_status >= wait

    def status(self, text: str) -> None:
        """The progress bar: redrawn in place on a terminal, else a line (see `status_due`)."""
        self.last_status = time.monotonic()
        if self.live:
            self._write("\r\033[K" + text)
            self.bar_shown = True
        else:
            self._emit(text)

    def close(self) -> None:
        """End the bar's line, so what follows starts on a new one."""
        if self.live and self.bar_shown:
            self._write("\n")
            self.bar_shown = False

    def _emit(self, text: str) -> None:
        if self.log is None:
            return
        if self.stream is not None:
            self._write(text + "\n")
            return
        try:
            self.log(text)
        except Exception as e:  # a broken log function must not end the run
            self.log = None
            _warn(f"progress output stopped: the log function raised {type(e).__name__}: {e}")

    def _write(self, text: str) -> None:
        if self.log is None or self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            # The reader went away (e.g. `| head`): stop writing; point the descriptor at
            # /dev/null so that the interpreter's final flush does not fail either.
            self.log = None
            _silence(self.stream)


def progress_text(
    step: int,
    max_steps: int,
    sps: float,
    last_eval: float | None,
    train_return: float | None,
) -> str:
    """`[######----]  45% 45,056/100,000 steps | 12,345 sps | 4s left | eval 475.0 | ep 180.3`."""
    frac = min(1.0, step / max(1, max_steps))
    filled = int(round(20 * frac))
    left = (max_steps - step) / sps if sps > 0 else math.inf
    parts = [
        f"[{'#' * filled}{'-' * (20 - filled)}] {100 * frac:3.0f}% {step:,}/{max_steps:,} steps",
        f"{sps:,.0f} sps",
        f"{_duration(left)} left",
    ]
    if last_eval is not None:
        parts.append(f"eval {last_eval:.1f}")
    if train_return is not None:
        parts.append(f"train ep {train_return:.1f}")
    return " | ".join(parts)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _silence(stream: object) -> None:
    try:
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (AttributeError, ValueError, OSError):
        pass


def _warn(text: str) -> None:
    try:
        print(f"xiaoyarl: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def warn(text: str) -> None:
    """A warning on standard error (shown even with --quiet); never raises."""
    _warn(f"warning: {text}")
