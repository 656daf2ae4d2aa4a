"""Model fusion: one agent from K agents of the same architecture (ElegantRL's `avg_update_net`).

The fused agent's networks are the (weighted) average of the K agents' networks, parameter by
parameter, and so are its optimizers' states (Adam's first and second moments and step count),
so that training can go on from the fused agent as from any other. Averaging is done in float64
and divided by the sum of the weights last, so fusing K copies of one agent gives that agent
back bit for bit. Integer tensors (counters) and everything that is not a network or optimizer
state (replay buffer, env state, counters) come from the first agent.

Two kinds of entries in the networks' state dicts are not averaged:
- running normalisers (`RunningNorm`: `mean`, `var`, `count`) get the mean and variance of the
  runs' data pooled (Chan et al.'s parallel formula: the variance includes the spread between
  the runs' means), each run's samples counted times its weight; the count is the weighted
  average of the runs' counts, one run's worth of data, so the fused normaliser moves with new
  data as fast as each run's did;
- per-sub-env state (`RewardScaler.returns`, the discounted return of each sub-env's episode in
  progress) is the first run's: the fused run continues the first run's envs.

`fuse_runs` applies this to run folders and writes a new run folder: `config.yaml`, a
checkpoint that `--resume` continues, and `actor.pt` for `load_policy` and `xiaoyarl eval`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import torch

from xiaoyarl.agents.settings import config_from_saved
from xiaoyarl.config_io import save_config
from xiaoyarl.errors import CheckpointError, ConfigError
from xiaoyarl.train.checkpoint import load_plain, policy_state, save_atomic

# Config fields that decide the shape of an agent's networks and optimizer state: runs that
# differ in one of these cannot be fused.
ARCHITECTURE = ("algo", "env_id", "backend", "net_dims", "num_critics", "state_norm")
# The buffers of a `RunningNorm` (xiaoyarl/core/nets.py) in a state dict, after the module's prefix.
NORM_KEYS = ("mean", "var", "count")
# Per-sub-env buffers (`RewardScaler.returns`), kept from the first run.
SUB_ENV_KEYS = ("returns",)


def average(tensors: Sequence[torch.Tensor], weights: Sequence[float]) -> torch.Tensor:
    """Weighted average of same-shape tensors (float64 sums, one division at the end); integer
    and boolean tensors are taken from the first."""
    first = tensors[0]
    if not (first.is_floating_point() or first.is_complex()):
        return first.clone()
    # a tensor (`sum` starts from 0, but there is a tensor at least)
    total = cast(torch.Tensor, sum(w * t.double() for w, t in zip(weights, tensors, strict=True)))
    return (total / sum(weights)).to(first.dtype)


def fuse_trees(trees: Sequence[Any], weights: Sequence[float], path: str = "state") -> Any:
    """Average K nested structures of tensors (state dicts, optimizer states) leaf by leaf;
    numbers are averaged too, except ints and bools, which come from the first tree. (Any:
    whatever a checkpoint holds; the checks below say what the trees are.)"""
    first = trees[0]
    if isinstance(first, torch.Tensor):
        shapes = {tuple(t.shape) for t in trees}
        if len(shapes) > 1:
            raise CheckpointError(f"cannot fuse {path}: the agents' shapes differ {shapes}.")
        return average(trees, weights)
    if isinstance(first, dict):
        keys = [set(t.keys()) for t in trees]
        if any(k != keys[0] for k in keys):
            raise CheckpointError(f"cannot fuse {path}: the agents hold different entries.")
        return {k: fuse_trees([t[k] for t in trees], weights, f"{path}.{k}") for k in first}
    if isinstance(first, list | tuple):
        if any(len(t) != len(first) for t in trees):
            raise CheckpointError(f"cannot fuse {path}: the agents hold different lengths.")
        fused = [fuse_trees([t[i] for t in trees], weights, f"{path}[{i}]")
                 for i in range(len(first))]  # fmt: skip
        return type(first)(fused)
    if isinstance(first, float):
        return sum(w * t for w, t in zip(weights, trees, strict=True)) / sum(weights)
    return first  # ints, bools, strings, None: the first agent's


def fuse_nets(nets: Sequence[dict], weights: Sequence[float]) -> dict:
    """The networks' state dicts (`{name: state_dict}` per agent) averaged, except normalisers
    (pooled statistics) and per-sub-env buffers (the first agent's); see the module's docstring."""
    fused = fuse_trees(nets, weights, "nets")
    for name, first in nets[0].items():
        for key in first:
            prefix, _, leaf = key.rpartition(".")
            prefix = f"{prefix}." if prefix else ""
            if leaf in SUB_ENV_KEYS:
                fused[name][key] = first[key].clone()
            elif leaf == NORM_KEYS[0] and all(prefix + k in first for k in NORM_KEYS):
                stats = [[n[name][prefix + k] for k in NORM_KEYS] for n in nets]
                for k, value in zip(NORM_KEYS, pool_statistics(stats, weights), strict=True):
                    fused[name][prefix + k] = value
    return fused


def pool_statistics(
    stats: Sequence[Sequence[torch.Tensor]], weights: Sequence[float]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean, variance and count of K normalisers' data pooled, from each one's `(mean (dim,),
    var (dim,), count ())`, its samples counted `weight` times (c_i = w_i n_i, C = sum c_i):

        mean = sum c_i m_i / C,    var = sum c_i (v_i + (m_i - mean)^2) / C.

    The spread term is written as sum_{i<j} c_i c_j (m_i - m_j)^2 / C^2 (the same sum), so that
    runs with equal means add exactly nothing. The count is the weighted average of the counts.
    Sums in float64."""
    means = [m.double() for m, _, _ in stats]
    variances = [v.double() for _, v, _ in stats]
    counts = [w * n.double() for w, (_, _, n) in zip(weights, stats, strict=True)]
    total = cast(torch.Tensor, sum(counts))  # a tensor, as there is a normaliser at least
    mean = sum(c * m for c, m in zip(counts, means, strict=True)) / total
    spread = sum(counts[i] * counts[j] * (means[i] - means[j]).square()
                 for i in range(len(stats)) for j in range(i + 1, len(stats)))  # fmt: skip
    var = sum(c * v for c, v in zip(counts, variances, strict=True)) / total + spread / total**2
    count = total / sum(weights)
    m0, v0, n0 = stats[0]
    return mean.to(m0.dtype), var.to(v0.dtype), count.to(n0.dtype)


def fuse_agent_states(states: Sequence[dict], weights: Sequence[float] | None = None) -> dict:
    """An agent state (`AgentBase.state_dict()`) whose networks and optimizer states are the
    weighted average of `states`' (normalisers: their pooled statistics; per-sub-env buffers:
    the first's); the rest (buffer, counters, last state) is the first's."""
    if not states:
        raise ConfigError("fusion needs at least one agent.")
    weights = list(weights) if weights is not None else [1.0] * len(states)
    if len(weights) != len(states) or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(
            f"fusion weights must be one non-negative number per agent ({len(states)}), not "
            f"all zero; got {weights}."
        )
    fused = dict(states[0])
    fused["nets"] = fuse_nets([s["nets"] for s in states], weights)
    optimizers = {}
    for name in states[0]["optimizers"]:
        group_state = [s["optimizers"][name] for s in states]
        optimizers[name] = {
            "state": fuse_trees([g["state"] for g in group_state], weights, f"{name}.state"),
            "param_groups": group_state[0]["param_groups"],
        }
    fused["optimizers"] = optimizers
    return fused


def fuse_runs(
    run_dirs: Sequence[str | Path], out: str | Path, weights: Sequence[float] | None = None
) -> Path:
    """Fuse the latest checkpoints of `run_dirs` into a new run folder `out` (config of the
    first run, with `cwd` = `out`); it evaluates (`actor.pt`) and resumes (`--resume out`)."""
    from xiaoyarl.agents import make_agent
    from xiaoyarl.envs import make_env
    from xiaoyarl.train.checkpoint import CHECKPOINT_FORMAT

    dirs = [Path(d) for d in run_dirs]
    out = Path(out)
    if (out / "checkpoint" / "state.pt").exists():
        raise CheckpointError(f"{out} already holds a run; choose a new folder for the fusion.")
    checkpoints = []
    for run in dirs:
        state = load_plain(run / "checkpoint" / "state.pt")
        if state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{run}/checkpoint/state.pt is not a xiaoyarl checkpoint.")
        checkpoints.append(state)
    first = checkpoints[0]["config"]
    for run, state in zip(dirs[1:], checkpoints[1:], strict=True):
        differ = [f"{k}: {first.get(k)!r} vs {state['config'].get(k)!r}" for k in ARCHITECTURE
                  if state["config"].get(k) != first.get(k)]  # fmt: skip
        if differ:
            raise CheckpointError(
                f"cannot fuse {dirs[0]} and {run}: their agents differ ({'; '.join(differ)})."
            )
    fused = dict(checkpoints[0])
    fused["agent"] = fuse_agent_states([c["agent"] for c in checkpoints], weights)
    fused["evaluator"] = None  # a new run: its first evaluation scores the fused policy
    config = config_from_saved({**first, "cwd": str(out)}, source=str(dirs[0]))
    fused["config"] = config.to_dict()

    # the fused policy, for `load_policy` and `xiaoyarl eval`, through the agent itself
    with make_env(config.env_id, 1, "cpu", config.backend, env_kwargs=config.env_kwargs) as env:
        spec = env.spec.__class__(**{**env.spec.__dict__, "num_envs": config.num_envs})
    agent = make_agent(config.algo, spec, config, torch.device("cpu"), learner=False)
    for name, net in agent.nets.items():
        net.load_state_dict(fused["agent"]["nets"][name])
    out.mkdir(parents=True, exist_ok=True)
    save_config(config, out / "config.yaml")
    save_atomic(policy_state(agent), out / "actor.pt")
    save_atomic(fused, out / "checkpoint" / "state.pt")
    return out
