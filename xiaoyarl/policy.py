"""Inference from a finished run: `load_policy(run_dir)` and `evaluate(run_dir)`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from xiaoyarl.config import Config
from xiaoyarl.errors import CheckpointError
from xiaoyarl.nets import ACTORS, RunningNorm
from xiaoyarl.train.checkpoint import load_plain


class Policy:
    """A trained deterministic policy. Call it on a batch of observations `(batch, state_dim)`
    (numpy or torch) or a single one `(state_dim,)`; it returns actions in the env's own units:
    int64 indices for discrete envs, values within the action bounds for continuous ones.
    numpy in gives numpy out."""

    def __init__(self, meta: dict, device: str | torch.device = "cpu") -> None:
        self.meta = meta
        self.device = torch.device(device)
        self.state_dim = meta["state_dim"]
        self.if_discrete = meta["if_discrete"]
        if meta["actor_class"] not in ACTORS:
            raise CheckpointError(f"unknown actor class {meta['actor_class']} in policy file.")
        norm = RunningNorm(meta["state_dim"], enabled=meta["state_norm"])
        self.actor = ACTORS[meta["actor_class"]](
            meta["state_dim"], meta["action_dim"], meta["net_dims"], norm
        )
        self.actor.load_state_dict(meta["actor"])
        self.actor.to(self.device).eval()
        if not self.if_discrete:
            self.low = torch.tensor(meta["action_low"], device=self.device)
            self.high = torch.tensor(meta["action_high"], device=self.device)

    def act_normalized(self, state: torch.Tensor) -> torch.Tensor:
        """Action as agents see it (continuous in [-1, 1]) for a torch batch on `self.device`."""
        with torch.no_grad():
            return self.actor(state)

    def __call__(self, obs: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        is_numpy = not isinstance(obs, torch.Tensor)
        state = torch.as_tensor(np.asarray(obs) if is_numpy else obs, dtype=torch.float32)
        single = state.dim() == 1
        if state.shape[-1] != self.state_dim or state.dim() > 2:
            raise ValueError(
                f"policy expects observations of shape (batch, {self.state_dim}) or "
                f"({self.state_dim},), got {tuple(state.shape)}."
            )
        state = state.to(self.device).reshape(-1, self.state_dim)
        action = self.act_normalized(state)
        if not self.if_discrete:
            action = self.low + (action + 1.0) * 0.5 * (self.high - self.low)
        if single:
            action = action[0]
        return action.cpu().numpy() if is_numpy else action


def load_policy(run_dir: str | Path, device: str | torch.device = "cpu") -> Policy:
    """The best policy a run saved (`run_dir/actor.pt`), ready for inference."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run folder {run_dir} does not exist.")
    return Policy(load_plain(run_dir / "actor.pt", what="policy file"), device)


def evaluate(run_dir: str | Path, episodes: int = 10, seed: int = 12_345) -> dict:
    """Score a run's best policy on `episodes` fresh episodes of its env (same backend).

    Returns {"mean", "std", "returns"}; episodes run as parallel sub-envs."""
    from xiaoyarl.envs import make_env
    from xiaoyarl.train.evaluator import run_episodes

    run_dir = Path(run_dir)
    policy = load_policy(run_dir)
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise CheckpointError(f"{run_dir} has no config.yaml: it is not a xiaoyarl run folder.")
    config = Config.load(config_path)
    with make_env(config.env_id, episodes, "cpu", config.backend, seed) as env:
        returns = run_episodes(env, policy.act_normalized, seed=seed)
    return {
        "mean": returns.mean().item(),
        "std": returns.std(unbiased=False).item(),
        "returns": returns.tolist(),
    }
