"""Export a run's best policy as one self-contained model file: ONNX or TorchScript.

Why: a trained policy should be deployable without xiaoyarl, and for ONNX without Python or
PyTorch at all (ONNX Runtime, TensorRT, browsers, microcontrollers). The exported model takes
the env's own observations (`(batch, *obs_shape)` of the env's dtype: uint8 images as the env
gives them; a Dict env's one input per key), normalises and encodes them as the run did and
returns actions in the env's own units, exactly as `Policy.predict` does: int64 indices
`(batch,)` for discrete envs, values `(batch, action_dim)` within the action bounds for
continuous ones. A recurrent policy's model also takes its hidden state and whether each
episode starts at this step, and returns the next hidden state (SB3's `predict(obs, state,
episode_start)`). The batch axis is dynamic.

ONNX uses PyTorch's `torch.export`-based exporter (the default since PyTorch 2.9; the older
TorchScript-based one is deprecated), which needs the `onnx` and `onnxscript` packages: the
`export` extra. TorchScript (`torch.jit.trace`) needs nothing beyond torch, though PyTorch
has deprecated it too; prefer ONNX for new deployments.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xiaoyarl.errors import ConfigError, XiaoyaError
from xiaoyarl.policy import (
    MultiAgentPolicy,
    Policy,
    discrete_continuous,
    load_policy,
    pack_observation,
)
from xiaoyarl.train.checkpoint import atomic_output

# Default file name of each format, in the run folder; none collides with `actor.pt`.
FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.torchscript.pt"}

_EXPORT_EXTRA = "pip install -e '.[export]'"


class DeployedPolicy(nn.Module):
    """A rebuilt actor (its observation normaliser and encoder inside) plus the rescale to env
    units: the env's own observations `(batch, *obs_shape)` of its dtype (uint8 images) ->
    int64 `(batch,)` or float32 `(batch, action_dim)`. A Dict env's observations come one input
    per key, packed inside as the env adapter packs them (`EnvSpec.obs_keys`); a recurrent
    policy also takes the hidden state `(batch, state_dim)` and whether each episode starts
    here `(batch,)` bool (the hidden state is zeroed there), and returns the next state."""

    low: torch.Tensor  # buffers, continuous actions only
    high: torch.Tensor

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        self.actor = policy.actor
        self.action_parts = policy.action_parts  # a Dict or Tuple action space's parts
        self.discrete_components = len(policy.meta["action_nvec"] or ())
        self.memory = policy.memory  # the recurrent encoder inside the actor, or None
        self.obs_keys = policy.obs_keys
        self.if_discrete = policy.if_discrete
        if not self.if_discrete:
            self.register_buffer("low", policy.low.float())
            self.register_buffer("high", policy.high.float())

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        n = len(self.obs_keys) if self.obs_keys else 1
        obs = pack_observation(inputs[:n], self.obs_keys) if self.obs_keys else inputs[0]
        if self.memory is None:
            return self.rescale(self.actor(obs))
        state, starts = inputs[n], inputs[n + 1].view(1, -1).bool()
        with self.memory.context(state, starts):
            action = self.rescale(self.actor(obs))
        assert self.memory.hiddens is not None, "set by the call"
        actions = action if isinstance(action, tuple) else (action,)
        return (*actions, self.memory.hiddens[0])

    def rescale(self, action: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The actor's action in env units: an index, or from [-1, 1] to the action bounds; a
        Dict or Tuple action space's, each part's (`envs/actions.py`)."""
        if self.action_parts is not None:
            from xiaoyarl.envs.actions import split  # structured actions only

            bounds = None if self.if_discrete else (self.low, self.high)
            both = discrete_continuous(action, self.discrete_components, bounds)
            return tuple(split(self.action_parts, *both))
        if self.if_discrete:
            return action
        return self.low + (action + 1.0) * 0.5 * (self.high - self.low)  # as in Policy.predict


class DeployedMultiAgentPolicy(nn.Module):
    """A multi-agent policy as deployed: the agents' observations of a batch of envs `(batch,
    A, O)` -> their actions, int64 `(batch, A)` or float32 `(batch, A, U)` within the action
    bounds; each agent's row gets its id inside, as in training (`with_agent_ids`). A recurrent
    one also takes the agents' hidden states `(batch, A, H)` and whether each env's episode
    starts at this step `(batch,)` bool (its agents' states are zeroed there), and returns the
    next states."""

    low: torch.Tensor  # buffers, continuous actions only
    high: torch.Tensor

    def __init__(self, policy: MultiAgentPolicy) -> None:
        super().__init__()
        self.actor = policy.actor
        self.memory = policy.memory  # a recurrent encoder inside the actor, or None
        self.recurrent = policy.recurrent
        self.if_discrete = policy.if_discrete
        if not self.if_discrete:
            self.register_buffer("low", policy.low.float())
            self.register_buffer("high", policy.high.float())

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        from xiaoyarl.agents.multi.common import with_agent_ids  # multi-agent policies only

        obs, carried = inputs[0], inputs[1:]
        batch, agents = obs.shape[:2]
        x = with_agent_ids(obs).flatten(0, 1)
        if not self.recurrent:
            return self.rescale(self.per_env(self.actor(x), batch, agents))
        state, starts = carried
        kept = (~starts.bool()).to(state.dtype).view(batch, 1, 1)
        hidden = (state * kept).flatten(0, 1)
        if self.memory is None:  # VDN's and QMIX's recurrent Q-networks (`RecurrentQNet.step`)
            actor: Any = self.actor
            q, hidden = actor.step(x, hidden)
            return q.argmax(-1).view(batch, agents), hidden.view(batch, agents, -1)
        along = torch.zeros(1, batch * agents, dtype=torch.bool, device=obs.device)
        with self.memory.context(hidden, along):
            action = self.per_env(self.actor(x), batch, agents)
        assert self.memory.hiddens is not None, "set by the call"
        return self.rescale(action), self.memory.hiddens[0].view(batch, agents, -1)

    @staticmethod
    def per_env(action: torch.Tensor, batch: int, agents: int) -> torch.Tensor:
        """The agents' rows of actions `(batch * A[, U])` -> `(batch, A[, U])`."""
        return action.view(batch, agents, *action.shape[1:])

    def rescale(self, action: torch.Tensor) -> torch.Tensor:
        """Actions as agents see them `(batch, A[, U])` in env units, as `predict` gives them."""
        if self.if_discrete:
            return action
        return self.low + (action + 1.0) * 0.5 * (self.high - self.low)


def model_inputs(policy: Policy, batch: int = 2) -> dict[str, torch.Tensor]:
    """Example inputs of the exported model by name: "obs" (or, for a Dict env, each key), and
    for a recurrent policy "state" and "episode_start"."""
    if isinstance(policy, MultiAgentPolicy):  # the agents' observations of each env
        inputs = {"obs": torch.zeros(batch, policy.num_agents, policy.obs_dim)}
        carried = policy.carried()
        if carried is not None:
            inputs["state"] = torch.zeros(batch, *carried[1])
            inputs["episode_start"] = torch.ones(batch, dtype=torch.bool)
        return inputs
    if policy.obs_keys:
        inputs = {key: torch.zeros(batch, dtype=torch.int64) if kind == "onehot" else
                  torch.zeros(batch, *shape, dtype=torch.uint8 if kind == "uint8" else
                              torch.float32)
                  for key, shape, kind in policy.obs_keys}  # fmt: skip
    else:
        inputs = {"obs": torch.zeros(batch, *policy.obs_shape, dtype=policy.obs_dtype)}
    if policy.memory is not None:
        inputs["state"] = policy.memory.initial(batch)
        inputs["episode_start"] = torch.ones(batch, dtype=torch.bool)
    return inputs


def output_names(parts: tuple | None, recurrent: bool) -> list[str]:
    """The exported model's outputs: "action" (a Dict or Tuple action space: one per part,
    "action/" and its path, `"action/aim"`, `"action/1/0"`), then for a recurrent policy
    "next_state"."""
    names = ["action"]
    if parts is not None:
        from xiaoyarl.envs.actions import names as part_names  # structured actions only

        names = [f"action/{name}" for name in part_names(parts)]
    return [*names, "next_state"] if recurrent else names


def export_policy(run_dir: str | Path, out: str | Path | None = None, fmt: str = "onnx") -> Path:
    """Write the best policy of the run in `run_dir` as a `fmt` ("onnx" or "torchscript") model.

    `out` defaults to `run_dir/policy.onnx` or `run_dir/policy.torchscript.pt`; its folder is
    created if needed. The model's inputs are the env's observations, named "obs" (a Dict env:
    one input per key, by its name), then for a recurrent policy "state" and "episode_start";
    its outputs "action" and, recurrent, "next_state" (`DeployedPolicy`; a multi-agent policy's
    `DeployedMultiAgentPolicy` takes the agents' observations of each env). Returns the path
    written."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    if fmt == "onnx":
        _check_onnx_installed()
    run_dir = Path(run_dir)
    policy = load_policy(run_dir)  # CheckpointError for a missing folder or actor.pt
    model: DeployedPolicy | DeployedMultiAgentPolicy
    if isinstance(policy, MultiAgentPolicy):
        model = DeployedMultiAgentPolicy(policy).eval()
    else:
        model = DeployedPolicy(policy).eval()
    inputs = model_inputs(policy)  # batch 2: a batch of 1 would be specialised
    out = Path(out) if out is not None else run_dir / FORMATS[fmt]
    with atomic_output(out) as partial:
        if fmt == "onnx":
            _export_onnx(model, inputs, output_names(policy.action_parts, "state" in inputs),
                         partial)  # fmt: skip
        else:
            _export_torchscript(model, inputs, partial)
    return out


def _check_onnx_installed() -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise XiaoyaError(
            f"exporting to ONNX needs the packages onnx and onnxscript ({e}). Install them with "
            f"`{_EXPORT_EXTRA}`, or export with --format torchscript, which needs only torch."
        ) from None


def _export_onnx(model: nn.Module, inputs: dict[str, torch.Tensor], outputs: list[str],
                 path: Path) -> None:  # fmt: skip
    onnx_logger = logging.getLogger("torch.onnx")  # warns about every missing torchvision op
    level = onnx_logger.level
    onnx_logger.setLevel(logging.ERROR)
    batch = torch.export.Dim("batch")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deprecated", category=FutureWarning)
            # torch's own notes while it exports (its tracer's, a recurrent encoder's context)
            warnings.filterwarnings("ignore", message=".*_check_is_size", category=FutureWarning)
            warnings.filterwarnings("ignore", message=".*assigned during export")
            warnings.filterwarnings("ignore", message=".*axis name")
            torch.onnx.export(
                model,
                tuple(inputs.values()),
                str(path),
                input_names=list(inputs),
                output_names=outputs,
                dynamic_shapes={"inputs": tuple({0: batch} for _ in inputs)},
                dynamo=True,
                external_data=False,  # weights inside the file: one self-contained model
                verbose=False,
            )
    except Exception as e:
        raise XiaoyaError(f"ONNX export of the policy failed ({type(e).__name__}: {e}).") from e
    finally:
        onnx_logger.setLevel(level)


def _export_torchscript(model: nn.Module, inputs: dict[str, torch.Tensor], path: Path) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        # the user asked for TorchScript; PyTorch's deprecation notice is not theirs to act on
        warnings.filterwarnings("ignore", message=r".*torch\.jit.* is deprecated")
        # the RNN layers' checks of their input sizes, which hold for any batch
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        traced = torch.jit.trace(model, tuple(inputs.values()))
        torch.jit.save(traced, str(path))
