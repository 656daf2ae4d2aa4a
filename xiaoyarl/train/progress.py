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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

# Not tqdm or rich: piped to a log file, tqdm writes its redraws as one '\r'-joined line and rich
# nothing until the end; rich's speed cannot pause for evaluations, tqdm's unpause() drops training.
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


class TrainingSpeed:
    """Env steps per second of training alone, for the progress bar and its time left.

    Time spent inside `paused()` (evaluations, checkpoints) is left out, so that the speed does
    not collapse after each evaluation, and the rate is an exponential moving average (weight
    `smoothing` for the newest) of windows of at least `window` seconds of training, so that it
    neither flickers between rollouts nor jumps. Until the first full window it is the rate so
    far. `clock` is a function of no arguments returning seconds (tests pass a fake one).
    """

    def __init__(
        self,
        step: int = 0,
        clock: Callable[[], float] = time.perf_counter,
        window: float = 1.0,
        smoothing: float = 0.3,
    ) -> None:
        self.clock = clock
        self.window = window
        self.smoothing = smoothing
        self.rate = 0.0  # env steps per second; 0 until measured
        self.windows = 0  # full windows measured
        self.restart(step)

    def restart(self, step: int) -> None:
        """Measure from `step`, now (the start of a run, or of a resumed one)."""
        self.mark_time = self.clock()
        self.mark_step = step
        self.paused_seconds = 0.0  # inside `paused()` since the mark

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Leave the time spent in this block out of the speed."""
        start = self.clock()
        try:
            yield
        finally:
            self.paused_seconds += self.clock() - start

    def update(self, step: int) -> float:
        """The training speed once `step` env steps are done (also kept in `rate`)."""
        now = self.clock()
        seconds = now - self.mark_time - self.paused_seconds
        if seconds <= 0 or step == self.mark_step:
            return self.rate  # nothing trained since the mark: nothing new to say
        rate = (step - self.mark_step) / seconds
        if seconds >= self.window:
            first = self.windows == 0
            self.rate = rate if first else self.smoothing * rate + (1 - self.smoothing) * self.rate
            self.windows += 1
            self.mark_time, self.mark_step, self.paused_seconds = now, step, 0.0
        elif self.windows == 0:
            self.rate = rate
        return self.rate


def progress_text(
    step: int,
    max_steps: int,
    sps: float,
    last_eval: float | None,
    train_return: float | None,
) -> str:
    """`[######----]  45% 45,056/100,000 steps | 12,345 sps | 4s left | eval 475.0 | ep 180.3`.

    The last rollout may carry a run past its budget (budgets are rounded up to whole
    rollouts): the bar then shows the budget, 100% and no time left."""
    shown = min(step, max_steps)
    frac = shown / max(1, max_steps)
    filled = int(round(20 * frac))
    left = (max_steps - shown) / sps if sps > 0 else math.inf
    if shown == max_steps:
        left = 0.0
    parts = [
        f"[{'#' * filled}{'-' * (20 - filled)}] {100 * frac:3.0f}% {shown:,}/{max_steps:,} steps",
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


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _silence(stream: TextIO) -> None:
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
