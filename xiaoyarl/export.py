"""Export a run's best policy as one self-contained model file: ONNX or TorchScript.

Why: a trained policy should be deployable without xiaoyarl, and for ONNX without Python or
PyTorch at all (ONNX Runtime, TensorRT, browsers, microcontrollers). The exported model takes
raw observations `(batch, state_dim)` float32, normalises them with the run's own statistics
and returns actions in the env's own units, exactly as `Policy.__call__` does: int64 indices
`(batch,)` for discrete envs, values `(batch, action_dim)` within the action bounds for
continuous ones. The batch axis is dynamic.

ONNX uses PyTorch's `torch.export`-based exporter (the default since PyTorch 2.9; the older
TorchScript-based one is deprecated), which needs the `onnx` and `onnxscript` packages: the
`export` extra. TorchScript (`torch.jit.trace`) needs nothing beyond torch, though PyTorch
has deprecated it too; prefer ONNX for new deployments.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import torch
from torch import nn

from xiaoyarl.errors import ConfigError, XiaoyaError
from xiaoyarl.policy import MultiAgentPolicy, Policy, load_policy
from xiaoyarl.train.checkpoint import atomic_output

# Default file name of each format, in the run folder; none collides with `actor.pt`.
FORMATS = {"onnx": "policy.onnx", "torchscript": "policy.torchscript.pt"}

_EXPORT_EXTRA = "pip install -e '.[export]'"


class DeployedPolicy(nn.Module):
    """A rebuilt actor (its observation normaliser inside) plus the rescale to env units:
    `(batch, state_dim)` float32 -> int64 `(batch,)` or float32 `(batch, action_dim)`."""

    low: torch.Tensor  # buffers, continuous actions only
    high: torch.Tensor

    def __init__(self, policy: Policy) -> None:
        super().__init__()
        self.actor = policy.actor
        self.if_discrete = policy.if_discrete
        if not self.if_discrete:
            self.register_buffer("low", policy.low.float())
            self.register_buffer("high", policy.high.float())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        action = self.actor(obs)  # argmax index, or in [-1, 1]
        if self.if_discrete:
            return action
        return self.low + (action + 1.0) * 0.5 * (self.high - self.low)  # as in Policy.__call__


def export_policy(run_dir: str | Path, out: str | Path | None = None, fmt: str = "onnx") -> Path:
    """Write the best policy of the run in `run_dir` as a `fmt` ("onnx" or "torchscript") model.

    `out` defaults to `run_dir/policy.onnx` or `run_dir/policy.torchscript.pt`; its folder is
    created if needed. The model's input is named "obs" and its output "action". Returns the
    path written."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    if fmt == "onnx":
        _check_onnx_installed()
    run_dir = Path(run_dir)
    policy = load_policy(run_dir)  # CheckpointError for a missing folder or actor.pt
    if policy.recurrent:
        what = "recurrent (agent_rnn)" if isinstance(policy, MultiAgentPolicy) else "recurrent"
        raise ConfigError(
            f"the policy of {run_dir} is {what}: it keeps a hidden state from step to step, "
            f"which these single-step model files do not carry yet. Use it through "
            f"`load_policy` (with `reset()` between episode batches)."
        )
    model = DeployedPolicy(policy).eval()
    example = torch.zeros(2, policy.state_dim)  # batch 2: a batch of 1 would be specialised
    out = Path(out) if out is not None else run_dir / FORMATS[fmt]
    with atomic_output(out) as partial:
        if fmt == "onnx":
            _export_onnx(model, example, partial)
        else:
            _export_torchscript(model, example, partial)
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


def _export_onnx(model: DeployedPolicy, example: torch.Tensor, path: Path) -> None:
    onnx_logger = logging.getLogger("torch.onnx")  # warns about every missing torchvision op
    level = onnx_logger.level
    onnx_logger.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deprecated", category=FutureWarning)
            torch.onnx.export(
                model,
                (example,),
                str(path),
                input_names=["obs"],
                output_names=["action"],
                dynamic_shapes={"obs": {0: torch.export.Dim("batch")}},
                dynamo=True,
                external_data=False,  # weights inside the file: one self-contained model
                verbose=False,
            )
    except Exception as e:
        raise XiaoyaError(f"ONNX export of the policy failed ({type(e).__name__}: {e}).") from e
    finally:
        onnx_logger.setLevel(level)


def _export_torchscript(model: DeployedPolicy, example: torch.Tensor, path: Path) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        # the user asked for TorchScript; PyTorch's deprecation notice is not theirs to act on
        warnings.filterwarnings("ignore", message=r".*torch\.jit.* is deprecated")
        traced = torch.jit.trace(model, example)
        torch.jit.save(traced, str(path))
