"""The returns that count as solving tasks whose gymnasium registration names none."""

from __future__ import annotations

# Target returns for envs whose gymnasium registration has no reward threshold.
# Pendulum-v1: -200 is the customary "solved" level (an upright, still pendulum scores ~-150).
DEFAULT_TARGET_RETURNS: dict[str, float] = {
    "Pendulum-v1": -200.0,
    "Hopper-v5": 3000.0,
    "HalfCheetah-v5": 4800.0,
    "Walker2d-v5": 3000.0,
    "Ant-v5": 4000.0,
    "Humanoid-v5": 5000.0,
}
