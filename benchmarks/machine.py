"""The line every benchmark prints about the machine it ran on (`xiaoyarl.machine`)."""

from __future__ import annotations

from xiaoyarl.machine import machine

__all__ = ["machine"]
