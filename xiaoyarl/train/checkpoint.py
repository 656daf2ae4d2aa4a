"""Checkpoint I/O: plain data written atomically, read back with `weights_only=True`; the saved
policy (`actor.pt`) an agent exports; and a run folder's checkpoint as a run starts
(`open_checkpoint`: the state to resume from, or a refusal to overwrite one)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from xiaoyarl.config import Config
from xiaoyarl.errors import CheckpointError

if TYPE_CHECKING:
    from xiaoyarl.agents.base import AgentBase
    from xiaoyarl.agents.settings import RunSettings

CHECKPOINT_FORMAT = "xiaoyarl-checkpoint-1"

# Fields that may change when a run is resumed; every other field must match the checkpoint's.
RESUMABLE_CHANGES = {
    "max_steps", "target_return", "stop_at_target", "eval_every", "eval_episodes",
    "eval_deterministic", "confirm_episodes", "checkpoint_every", "cwd", "device", "threads",
    "tensorboard", "wandb", "wandb_project", "vector_mode", "restart_workers", "worker_timeout",
}  # fmt: skip


def open_checkpoint(settings: RunSettings, run_dir: Path, resume: bool) -> dict | None:
    """The checkpoint a run in `run_dir` resumes from (`resume`; its config must match
    `settings.config` but for `RESUMABLE_CHANGES`, and the fields that follow the budget take
    its values), or None for a new run, which must not overwrite one."""
    path = run_dir / "checkpoint" / "state.pt"
    if not resume:
        if path.exists():
            raise CheckpointError(
                f"run folder {run_dir} already holds a run with a checkpoint. Pass --resume to "
                f"continue it, choose another folder with --cwd, or delete {run_dir}."
            )
        return None
    if not path.is_file():
        raise CheckpointError(
            f"cannot resume: there is no checkpoint in {run_dir} (looked for {path}). "
            f"Name the run folder to resume with --resume RUN_DIR (or --cwd RUN_DIR)."
        )
    from xiaoyarl.agents.settings import saved_run_values  # the agents: only where one resumes

    checkpoint = load_plain(path)
    if checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a xiaoyarl checkpoint.")
    config = settings.config
    for name in settings.follow_budget:
        setattr(config, name, checkpoint["config"].get(name, getattr(config, name)))
    saved = {**checkpoint["config"], **saved_run_values(checkpoint["config"])}
    unsaved, now = Config().to_dict(), config.to_dict()  # `unsaved`: fields it predates
    diffs = [f"{k}: checkpoint {saved.get(k, unsaved[k])!r}, now {now[k]!r}" for k in now
             if k not in RESUMABLE_CHANGES and saved.get(k, unsaved[k]) != now[k]]  # fmt: skip
    if diffs:
        raise CheckpointError(
            f"cannot resume {run_dir}: the config differs from the one it was trained with "
            f"({'; '.join(diffs)}). Resume with the same settings, e.g. --config "
            f"{run_dir}/config.yaml, or start a new run with another --cwd."
        )
    return checkpoint


def policy_state(agent: AgentBase) -> dict:
    """What `load_policy` needs to rebuild an agent's actor (`actor.pt`): its class, sizes and
    weights; and for a multi-agent agent, its env's agents and sizes."""
    config, spec = agent.config, agent.spec
    assert config.net_dims is not None, "resolve_config sets net_dims"
    encoder, wrappers = encoder_wrappers(agent.actor.norm)
    state = {
        "actor_class": type(agent.actor).__name__,
        "actor_module": type(agent.actor).__module__,  # where `load_policy` finds the class
        "state_dim": spec.state_dim,
        "obs_shape": list(spec.obs_shape),
        "obs_dtype": str(spec.obs_dtype).removeprefix("torch."),
        "channels_last": getattr(spec, "channels_last", None),  # images: the env's layout
        "encoder": config.encoder,
        "encoder_layer_norm": getattr(encoder, "layer_norm", False),  # PQN's CNNs
        "encoder_wrappers": wrappers,  # what the agent put around its encoder (memory, masks)
        "action_nvec": None if spec.action_nvec is None else list(spec.action_nvec),
        "action_parts": getattr(spec, "action_parts", None),  # a Dict or Tuple action space
        "obs_keys": spec.obs_keys,  # Dict observations: how they are packed
        "action_mask": spec.action_mask,  # the env says the allowed actions (agents/masked.py)
        "action_dim": spec.action_dim,
        "net_dims": list(config.net_dims),
        "state_norm": config.state_norm,
        "state_norm_clip": config.state_norm_clip,
        "if_discrete": spec.if_discrete,
        "action_low": spec.action_low,
        "action_high": spec.action_high,
        "env_id": spec.name,
        "algo": config.algo,
        "explore_rate": config.explore_rate,  # for Policy.predict(deterministic=False)
        "explore_noise_std": config.explore_noise_std,
        "actor": {k: v.detach().cpu() for k, v in agent.actor.state_dict().items()},
        # the actor's own constructor arguments (C51's atoms, a Q-network's LayerNorm, ...)
        "actor_kwargs": getattr(agent.actor, "init_kwargs", dict)(),
    }
    multi = getattr(
        agent, "multi_spec", None
    )  # a multi-agent agent's env (its `spec` is one agent's view)
    if multi is not None:
        state.update(num_agents=multi.num_agents, obs_dim=multi.obs_dim,
                     action_dim=multi.action_dim, env_id=multi.name)  # fmt: skip
    return state


def encoder_wrappers(encoder: Any) -> tuple[Any, list[dict]]:
    """The encoder of the observations themselves inside `encoder`, and the modules an agent
    put around it, innermost first, each as its class, module and constructor arguments: a
    wrapper has `inner` (what it wraps) and `init_kwargs()` (its other constructor arguments),
    so `Class(inner, **kwargs)` rebuilds it (a recurrent memory, the masked DQN family's slice
    of the observation, or a user's own)."""
    wrappers = []
    while hasattr(encoder, "inner") and hasattr(encoder, "init_kwargs"):
        kind = type(encoder)
        wrappers.append({"module": kind.__module__, "class": kind.__name__,
                         "kwargs": encoder.init_kwargs()})  # fmt: skip
        encoder = encoder.inner
    return encoder, wrappers[::-1]


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
