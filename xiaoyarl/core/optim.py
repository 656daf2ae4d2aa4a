"""The optimizer step of every agent: gradient clipping and Adam, lean on a CPU; RAdam.

Why: RL networks are small, so on a CPU the Python around an optimizer step costs as much as
the arithmetic. `torch.optim.Adam.step` spends ~150 us of bookkeeping around a fused kernel
that runs in ~15 us, `nn.utils.clip_grad_norm_` ~120 us around four kernels, and the first
call into any `torch.optim` optimizer imports `torch._dynamo` (~2 s, at every process start).
`Adam` here does the same arithmetic as `torch.optim.Adam(fused=True)` (it calls the same
fused kernel, with the same state) and reads and writes the same `state_dict`, so checkpoints
move between the two; tests check both bit for bit. On a GPU the agents keep
`torch.optim.Adam`, whose capturable mode the CUDA-graph replay relies on.

`adam_step` and `clip_scale` are that arithmetic as functions of tensors: `Adam` and
`clip_grad_norm` call them, and so does a vmapped population (`population/vmap.py`) for each
member's slice of its stacked weights, so every member steps as its own optimizer would.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import torch
from torch import nn

# torch.optim.Adam's hyper-parameters that this Adam does not vary, as its param group shows
_FIXED = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
          "differentiable": False, "fused": True}  # fmt: skip


class Adam:
    """Adam (Kingma & Ba, 2015) over one group of parameters, as `torch.optim.Adam(params, lr,
    betas, eps, fused=True)`: the same fused kernel, state and `state_dict` format; with
    `weight_decay`, AdamW's decoupled decay (Loshchilov & Hutter, 2019), as
    `torch.optim.AdamW(..., weight_decay, fused=True)`."""

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        self.params = list(params)
        group = {"lr": lr, "betas": betas, "eps": eps, **_FIXED, "weight_decay": weight_decay,
                 "decoupled_weight_decay": weight_decay > 0}  # fmt: skip
        self.param_groups: list[dict[str, Any]] = [{"params": self.params, **group}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for the parameters that have a gradient."""
        group = self.param_groups[0]
        params: list[torch.Tensor] = [p for p in self.params if p.grad is not None]
        if not params:
            return
        for p in params:
            if p not in self.state:  # as torch.optim.Adam creates it
                self.state[p] = {
                    "step": torch.zeros((), dtype=torch.float32, device=p.device),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
        states = [self.state[p] for p in params]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        grads = [cast(torch.Tensor, p.grad) for p in params]  # each has one (above)
        adam_step(params, grads, [s["exp_avg"] for s in states],
                  [s["exp_avg_sq"] for s in states], steps, group["lr"], group["betas"],
                  group["eps"], group["weight_decay"])  # fmt: skip

    def state_dict(self) -> dict:
        """`torch.optim.Adam.state_dict()`'s format: state by parameter index, and the group."""
        index: dict[torch.Tensor, int] = {p: i for i, p in enumerate(self.params)}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {
            "state": {index[p]: dict(s) for p, s in self.state.items()},
            "param_groups": [{**group, "params": list(range(len(self.params)))}],
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state dict of this class or of `torch.optim.Adam` over the same parameters."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"optimizer state for {sum(len(g['params']) for g in groups)} parameters in "
                f"{len(groups)} group(s) does not fit {len(self.params)} parameters in one group"
            )
        position = {i: k for k, i in enumerate(groups[0]["params"])}
        self.param_groups[0].update(
            {k: v for k, v in groups[0].items() if k not in ("params", "capturable")}
        )
        self.state = {}
        for i, saved in state_dict["state"].items():
            p = self.params[position[i]]
            self.state[p] = {
                "step": saved["step"].to(device=p.device, dtype=torch.float32).clone(),
                "exp_avg": saved["exp_avg"].to(device=p.device, dtype=p.dtype).clone(),
                "exp_avg_sq": saved["exp_avg_sq"].to(device=p.device, dtype=p.dtype).clone(),
            }


class LeanKit:
    """The optimizers the trainer gives its agents (`AgentBase.kit`, `agents/registry.py`): on
    a CPU this module's `Adam`, elsewhere `torch.optim.Adam` (the CUDA-graph replay relies on
    its capturable mode), and torch's RAdam where the config asks for it; gradients clipped by
    `clip_grad_norm` on every device."""

    def optimizer(self, kind: str, params: Iterable[nn.Parameter], lr: float,
                  weight_decay: float = 0.0) -> Adam | torch.optim.Optimizer:  # fmt: skip
        params = list(params)
        if kind == "radam":
            return torch_radam(params, lr, weight_decay)
        if params[0].device.type == "cpu":
            return Adam(params, lr=lr, eps=1e-5, weight_decay=weight_decay)
        return torch_adam(params, lr, weight_decay)

    def clip_grad_norm(self, params: list[nn.Parameter], max_norm: float) -> None:
        clip_grad_norm(params, max_norm)


def torch_adam(params: list[nn.Parameter], lr: float, weight_decay: float) -> torch.optim.Adam:
    """torch's fused Adam with the agents' eps, AdamW where `weight_decay` is not 0."""
    if weight_decay:
        return torch.optim.AdamW(params, lr=lr, eps=1e-5, weight_decay=weight_decay, fused=True)
    return torch.optim.Adam(params, lr=lr, eps=1e-5, fused=True)


def torch_radam(params: list[nn.Parameter], lr: float, weight_decay: float) -> torch.optim.RAdam:
    """torch's RAdam (Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond",
    ICLR 2020), foreach, with its (and optax's) eps 1e-8; decoupled `weight_decay` where it is
    not 0. No lean version: its arithmetic is several kernels, which `radam_step` runs."""
    return torch.optim.RAdam(params, lr, weight_decay=weight_decay, foreach=True,
                             decoupled_weight_decay=weight_decay > 0)  # fmt: skip


def radam_step(params: list[torch.Tensor], grads: list[torch.Tensor],
               exp_avgs: list[torch.Tensor], exp_avg_sqs: list[torch.Tensor],
               steps: list[torch.Tensor], lr: float,
               weight_decay: float = 0.0) -> None:  # fmt: skip
    """One RAdam step of `params` in place, as `torch_radam`'s optimizer runs it (its function,
    with its state: the same moments and step counts as Adam's); `steps` are counted up here."""
    from torch.optim.radam import radam  # torch.optim's first import is slow: only for RAdam

    radam(params, grads, exp_avgs, exp_avg_sqs, steps, foreach=True, beta1=0.9, beta2=0.999,
          lr=lr, weight_decay=weight_decay, eps=1e-8,
          decoupled_weight_decay=weight_decay > 0)  # fmt: skip


def adam_step(
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    exp_avgs: list[torch.Tensor],
    exp_avg_sqs: list[torch.Tensor],
    steps: list[torch.Tensor],
    lr: float,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float = 0.0,
) -> None:
    """One Adam step of `params` in place, and of their moments `exp_avgs` and `exp_avg_sqs`:
    torch's fused kernel, as `torch.optim.Adam(fused=True)` runs it (AdamW's, with decoupled
    `weight_decay`, where it is not 0). `steps`: each parameter's step count (float32, `()`),
    already counted up for this step."""
    beta1, beta2 = betas
    step = torch._fused_adamw_ if weight_decay else torch._fused_adam_
    step(
        params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=lr, beta1=beta1,
        beta2=beta2, weight_decay=weight_decay, eps=eps, maximize=False, grad_scale=None,
        found_inf=None,
    )  # fmt: skip


def clip_scale(norms: torch.Tensor, max_norm: float | torch.Tensor) -> torch.Tensor:
    """What `clip_grad_norm` scales gradients by, from their norms `(..., P)`: min(1, max_norm /
    (global norm + 1e-6)), the global norm the 2-norm of the last axis. A reciprocal times
    `max_norm`, as torch evaluates `float / tensor`: a tensor of max norms gives the same bits
    as the floats."""
    total = torch.linalg.vector_norm(norms, dim=-1)
    return ((total + 1e-6).reciprocal() * max_norm).clamp(max=1.0)


def clip_grad_norm(params: list[nn.Parameter], max_norm: float) -> None:
    """`nn.utils.clip_grad_norm_(params, max_norm)`, the same arithmetic (`clip_scale` of the
    per-tensor norms), without its per-call grouping of tensors by device: four kernels.
    Parameters without a gradient, or on several devices, go through torch's own function."""
    grads = [p.grad for p in params if p.grad is not None]
    if len(grads) < len(params) or len({g.device for g in grads}) > 1:
        nn.utils.clip_grad_norm_(params, max_norm)
        return
    torch._foreach_mul_(grads, clip_scale(torch.stack(torch._foreach_norm(grads)), max_norm))
