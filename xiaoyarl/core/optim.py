"""The optimizer step of every agent: gradient clipping and Adam, lean on a CPU.

Why: RL networks are small, so on a CPU the Python around an optimizer step costs as much as
the arithmetic. `torch.optim.Adam.step` spends ~150 us of bookkeeping around a fused kernel
that runs in ~15 us, `nn.utils.clip_grad_norm_` ~120 us around four kernels, and the first
call into any `torch.optim` optimizer imports `torch._dynamo` (~2 s, at every process start).
`Adam` here does the same arithmetic as `torch.optim.Adam(fused=True)` (it calls the same
fused kernel, with the same state) and reads and writes the same `state_dict`, so checkpoints
move between the two; tests check both bit for bit. On a GPU the agents keep
`torch.optim.Adam`, whose capturable mode the CUDA-graph replay relies on.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

# torch.optim.Adam's hyper-parameters that this Adam does not vary, as its param group shows
_FIXED = {"weight_decay": 0, "amsgrad": False, "maximize": False, "foreach": None,
          "capturable": False, "differentiable": False, "fused": True,
          "decoupled_weight_decay": False}  # fmt: skip


class Adam:
    """Adam (Kingma & Ba, 2015) over one group of parameters, as `torch.optim.Adam(params, lr,
    betas, eps, fused=True)`: the same fused kernel, state and `state_dict` format."""

    def __init__(
        self,
        params: Iterable[nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = list(params)
        group = {"lr": lr, "betas": betas, "eps": eps, **_FIXED}
        self.param_groups = [{"params": self.params, **group}]
        self.state: dict[nn.Parameter, dict[str, torch.Tensor]] = {}

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
        params = [p for p in self.params if p.grad is not None]
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
        beta1, beta2 = group["betas"]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            params, [p.grad for p in params], [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states], [], steps, amsgrad=False, lr=group["lr"],
            beta1=beta1, beta2=beta2, weight_decay=0.0, eps=group["eps"], maximize=False,
            grad_scale=None, found_inf=None,
        )  # fmt: skip

    def state_dict(self) -> dict:
        """`torch.optim.Adam.state_dict()`'s format: state by parameter index, and the group."""
        index = {p: i for i, p in enumerate(self.params)}
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


def clip_grad_norm(params: list[nn.Parameter], max_norm: float) -> None:
    """`nn.utils.clip_grad_norm_(params, max_norm)`, the same arithmetic (the global 2-norm of
    the per-tensor norms; gradients scaled by min(1, max_norm / (norm + 1e-6))), without its
    per-call grouping of tensors by device: four kernels. Parameters without a gradient, or
    on several devices, go through torch's own function."""
    grads = [p.grad for p in params]
    if any(g is None for g in grads) or len({g.device for g in grads}) > 1:
        nn.utils.clip_grad_norm_(params, max_norm)
        return
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, (max_norm / (total + 1e-6)).clamp(max=1.0))
