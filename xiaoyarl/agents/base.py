"""`AgentBase`: what every agent shares (optimizer step, checkpoint state, policy export)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
from torch import nn

from xiaoyarl.agents.hterm import HTerm
from xiaoyarl.config import Config
from xiaoyarl.core.buffer import Batch, PrioritizedReplayBuffer, ReplayBuffer, Transitions
from xiaoyarl.core.graphs import GraphedStep
from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.core.optim import Adam, clip_grad_norm
from xiaoyarl.core.ranks import Ranks
from xiaoyarl.envs.base import EnvSpec, VecEnv
from xiaoyarl.errors import ConfigError


class AgentBase:
    """An agent owns its networks, optimizers and normalizers, explores a `VecEnv` and updates.

    Subclasses set `if_off_policy` and `if_discrete`. Networks that make up the training state
    are listed in `self.nets`, optimizers in `self.optimizers`; `state_dict` saves both, the
    replay buffer, and the state the next rollout starts from.

    On-policy agents implement `explore_env` and `update_net`. Off-policy agents get both from
    here (random actions for the first `learning_starts` env steps, then `explore_action`; each
    rollout goes into the replay buffer and is followed by `repeat_times` gradient steps per
    env step) and implement `explore_action` and `update_step` on one sampled batch.
    """

    if_off_policy: ClassVar[bool]
    if_discrete: ClassVar[bool]
    if_multi_agent: ClassVar[bool] = False  # acts in multi-agent envs (`agents/multi/`)
    # The algorithm-specific Config fields this agent reads (others of that kind it ignores, and
    # setting them gets a warning); general fields (gamma, net_dims, ...) are not listed.
    config_fields: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True
    ) -> None:
        if spec.if_discrete != self.if_discrete:
            kind = "discrete" if spec.if_discrete else "continuous"
            raise ValueError(f"{type(self).__name__} cannot act in the {kind} env {spec.name}")
        self.spec = spec
        self.config = config
        self.device = device
        self.nets: dict[str, nn.Module] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.last_state: torch.Tensor | None = None  # (num_envs, state_dim): exploring resumes here
        # the running observation normaliser every network of the agent applies to its input
        self.state_norm = RunningNorm(spec.state_dim, config.state_norm, config.state_norm_clip)
        self.state_norm.to(device)
        self.actor: nn.Module  # the policy; `actor(state)` is the deterministic action in [-1, 1]
        self.explored = 0  # env steps taken so far (summed over sub-envs)
        self.updates = 0  # gradient steps taken so far (off-policy)
        self.buffer: ReplayBuffer | None = None
        # learner=False: an acting-only copy (the parallel runner's workers and evaluator), with
        # no replay buffer and no optimizers
        self.learner = learner
        if self.if_off_policy and learner:
            self.buffer = self._make_buffer()
        # the H-term add-on's trajectories (`agents/hterm.py`), when `h_term` is on
        self.h_term = HTerm(config, device) if config.h_term and learner else None
        # CUDA-graph replay of the update (see xiaoyarl/core/graphs.py)
        period = self.graph_period()
        self.use_cuda_graph = (
            learner and config.cuda_graph and device.type == "cuda"
            and period is not None and period <= MAX_GRAPHS and not config.h_term
        )  # fmt: skip
        self.graphed: GraphedStep | None = None
        self._target_params: dict[tuple[int, int], tuple[list, list]] = {}  # update_targets
        # set by `attach_data_parallel` when several ranks share this agent's update
        self.data_parallel: Ranks | None = None

    # --- what an algorithm implements ---
    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        """Off-policy: the exploratory action for a batch of states (in [-1, 1], or int64)."""
        raise NotImplementedError

    def update_step(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Off-policy: one gradient step on `batch`; returns (named scalars, TD errors `(B,)`)."""
        raise NotImplementedError

    def graph_period(self) -> int | None:
        """The number of updates (off-policy: gradient steps, `update_step`) after which their
        Python-side choices (which networks they update) repeat, so that one CUDA graph per
        phase can replay them; None when an update's choices depend on data read back from the
        device."""
        return self.config.target_update_every

    # --- off-policy machinery ---
    @torch.no_grad()
    def explore_env(self, env: VecEnv, horizon_len: int) -> NamedTuple:
        """Step `env` for `horizon_len` steps from `self.last_state`; return time-major data."""
        spec, dev = env.spec, self.device
        n = spec.num_envs
        states = torch.empty((horizon_len, n, spec.state_dim), device=dev)
        next_states = torch.empty_like(states)
        if self.if_discrete:
            actions = torch.empty((horizon_len, n), dtype=torch.int64, device=dev)
        else:
            actions = torch.empty((horizon_len, n, spec.action_dim), device=dev)
        rewards = torch.empty((horizon_len, n), device=dev)
        terminals = torch.empty((horizon_len, n), dtype=torch.bool, device=dev)
        truncates = torch.empty_like(terminals)

        state = self.last_state
        for t in range(horizon_len):
            if self.explored < self.config.learning_starts:
                action = self.random_action(n)
            else:
                action = self.explore_action(state)
            next_state, reward, terminal, truncate, info = env.step(action)
            states[t], actions[t], rewards[t] = state, action, reward
            terminals[t], truncates[t], next_states[t] = terminal, truncate, info["final_state"]
            state = next_state
            self.explored += n
        self.last_state = state
        return Transitions(states, actions, rewards, terminals, truncates, next_states)

    def random_action(self, n: int) -> torch.Tensor:
        """Uniformly random actions for `n` sub-envs (the warm-up before learning starts)."""
        if self.if_discrete:
            return torch.randint(self.spec.action_dim, (n,), device=self.device)
        return torch.rand((n, self.spec.action_dim), device=self.device) * 2 - 1

    def update_net(self, rollout: NamedTuple) -> dict[str, torch.Tensor]:
        """Store the rollout, update the observation normaliser (when enabled) with its states,
        then take `repeat_times` gradient steps per new env step."""
        self.buffer.add(rollout)
        self.update_normalizers(rollout)
        self.h_term_observe(rollout)
        if self.explored < self.config.learning_starts or self.buffer.num_sampleable == 0:
            return {}
        num_updates = max(1, round(self.config.repeat_times * rollout.rewards.numel()))
        totals: dict[str, torch.Tensor] = {}
        counts: dict[str, int] = {}
        for _ in range(num_updates):
            logs = self.gradient_step(self.sample_batch())
            for name, value in logs.items():  # some (e.g. a delayed actor loss) not every step
                totals[name] = totals.get(name, 0) + value
                counts[name] = counts.get(name, 0) + 1
        return {name: value / counts[name] for name, value in totals.items()}

    def sample_batch(self) -> NamedTuple:
        """Off-policy: what one gradient step learns from: `batch_size` replayed transitions
        (recurrent agents replay whole episodes instead)."""
        return self.buffer.sample(self.config.batch_size)

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """This algorithm's values for the fields of `config` left at None (num_envs,
        horizon_len, batch_size, ...), for a batched env or not, on device type "cpu" or
        "cuda" (`agents/settings.py` applies them)."""
        raise NotImplementedError(f"{cls.__name__} gives no defaults")

    # --- the H-term add-on (`agents/hterm.py`) ---
    def h_term_observe(self, rollout: NamedTuple) -> None:
        """Give the H-term's buffer the rollout's episodes (when the add-on is on); with
        several learners the H-term starts once every rank's buffer is ready."""
        if self.h_term is not None:
            dones = rollout.terminals | rollout.truncates
            self.h_term.add(rollout.states, rollout.actions, rollout.rewards, dones)
            if self.data_parallel is not None and not self.h_term.all_ranks_ready:
                self.h_term.all_ranks_ready = self.data_parallel.every(self.h_term.ready)

    def h_term_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log pi(a | s) `(n,)` of stored actions: what the H-term raises (agents with it)."""
        raise NotImplementedError

    def h_term_loss(self) -> tuple[torch.Tensor | float, dict[str, torch.Tensor]]:
        """The H-term's part of the actor's loss (0 while it is off or filling) and its log
        (NaN while the buffer fills, so the column exists from the first row on)."""
        if self.h_term is None:
            return 0.0, {}
        loss, h = self.h_term.loss(self.h_term_logprob)
        return loss, {"h_term": torch.tensor(float("nan"), device=self.device) if h is None else h}

    def update_normalizers(self, rollout: NamedTuple) -> None:
        """Off-policy: merge a rollout's states into the observation normaliser (if enabled)."""
        self.state_norm.update(rollout.states.flatten(0, 1))

    def observe(self, state: torch.Tensor, info: dict) -> torch.Tensor:
        """What exploring resumes from (`last_state`) after a reset that returned `state` and
        `info`: the state itself (multi-agent agents also keep the global state and masks)."""
        return state

    def gradient_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        """`update_step` on `batch` (replayed as a CUDA graph where enabled), then count it and
        give prioritized replay the new TD errors."""
        logs, td_errors = self.run_update(self.update_step, batch)
        self.updates += 1
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            self.buffer.update_priorities(batch.indices, td_errors)
        return logs

    def run_update(self, update: Callable[[NamedTuple], Any], inputs: NamedTuple) -> Any:
        """`update(inputs)`, replayed as a CUDA graph where `use_cuda_graph` (one graph per
        phase of `graph_period`, by the update counter). In data-parallel training every rank
        draws the update's random numbers from one shared random state."""
        if self.data_parallel is not None:
            with self.data_parallel.shared_random():
                return update(inputs)
        if not self.use_cuda_graph:
            return update(inputs)
        self.graphed = self.graphed or GraphedStep(update, self.graph_period())
        return self.graphed(inputs, self.updates % self.graphed.period)

    def buffer_sizes(self) -> tuple:
        """The replay buffer's shape: capacity, sub-envs, state width, action width, whether
        actions are discrete indices, the time limit (see `ReplayBuffer`)."""
        cfg, spec = self.config, self.spec
        return (cfg.buffer_size, spec.num_envs, spec.state_dim, spec.action_dim,
                spec.if_discrete, spec.max_step)  # fmt: skip

    def _make_buffer(self) -> ReplayBuffer:
        cfg, spec = self.config, self.spec
        sizes = self.buffer_sizes()
        buffer_class = PrioritizedReplayBuffer if cfg.per else ReplayBuffer
        need = buffer_class.bytes_needed(*sizes)
        free = _free_memory(self.device)
        if free is not None and need > 0.8 * free:
            raise ConfigError(
                f"a replay buffer of buffer_size={cfg.buffer_size:,} transitions for "
                f"{spec.name} needs {need / 2**30:.2f} GiB, but only {free / 2**30:.2f} GiB is "
                f"free on {self.device}; lower buffer_size (e.g. --set buffer_size=100000)."
            )
        if cfg.per:
            return PrioritizedReplayBuffer(
                *sizes, device=self.device, alpha=cfg.per_alpha, beta=cfg.per_beta,
                beta_steps=max(1, round(cfg.per_beta_steps * cfg.repeat_times)),
            )  # fmt: skip
        return ReplayBuffer(*sizes, device=self.device)

    def make_target(self, net: nn.Module) -> nn.Module:
        """A frozen copy of `net` for targets that shares `net`'s observation normaliser (a
        target network must see states scaled as the online one does; only weights lag)."""
        norm = getattr(net, "norm", None)
        target = copy.deepcopy(net).requires_grad_(False)
        if norm is not None:
            target.norm = norm
        return target

    @staticmethod
    @torch.no_grad()
    def soft_update(target: nn.Module, online: nn.Module, tau: float) -> None:
        """target <- tau * online + (1 - tau) * target, for every parameter."""
        torch._foreach_lerp_(list(target.parameters()), list(online.parameters()), tau)

    def update_targets(self, *pairs: tuple[nn.Module, nn.Module]) -> None:
        """Soft-update each (target, online) pair every `target_update_every` gradient steps
        (the parameter lists are gathered once: walking the modules costs more than the lerp)."""
        if self.updates % self.config.target_update_every == 0:
            for target, online in pairs:
                key = (id(target), id(online))
                if key not in self._target_params:
                    self._target_params[key] = (list(target.parameters()),
                                                list(online.parameters()))  # fmt: skip
                if self._target_params[key][0]:  # (VDN's sum has nothing to update)
                    with torch.no_grad():
                        torch._foreach_lerp_(*self._target_params[key],
                                             self.config.soft_update_tau)  # fmt: skip

    # --- shared mechanics ---
    def make_optimizer(self, net: nn.Module) -> torch.optim.Optimizer | Adam | None:
        """Adam with the fused kernel (one pass over all parameters): on a CPU xiaoyarl's lean
        `Adam` (`xiaoyarl/core/optim.py`: the same arithmetic and state), elsewhere
        `torch.optim.Adam` (capturable for CUDA graphs); None for an acting-only copy."""
        if not self.learner:
            return None
        if self.device.type == "cpu" and _FUSED_ADAM:
            return Adam(net.parameters(), lr=self.config.learning_rate, eps=1e-5)
        return torch.optim.Adam(
            net.parameters(), lr=self.config.learning_rate, eps=1e-5, fused=_FUSED_ADAM or None,
            capturable=self.use_cuda_graph,
        )  # fmt: skip

    def optimizer_step(
        self, optimizer: torch.optim.Optimizer, net: nn.Module, loss: torch.Tensor
    ) -> None:
        """Backward, clip the global gradient norm to `clip_grad_norm`, and step."""
        self.optimizer_steps(loss, (optimizer, net))

    def optimizer_steps(
        self, loss: torch.Tensor, *pairs: tuple[torch.optim.Optimizer, nn.Module]
    ) -> None:
        """One backward pass through `loss`, a sum of losses of networks that share no
        parameters, then per network: clip its gradient norm to `clip_grad_norm` and step its
        optimizer. The same update as one `optimizer_step` per network, with one autograd pass."""
        for optimizer, _ in pairs:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.data_parallel is not None:  # every rank steps with the average gradient
            params = [p for optimizer, _ in pairs for p in optimizer.param_groups[0]["params"]]
            self.data_parallel.average_gradients(params)
        for optimizer, _ in pairs:
            clip_grad_norm(optimizer.param_groups[0]["params"], self.config.clip_grad_norm)
            optimizer.step()

    def attach_data_parallel(self, data_parallel: Ranks) -> None:
        """Share this agent's updates with the other ranks of `data_parallel`: gradients are
        averaged, normaliser statistics and other batch statistics taken over every rank's
        data, and the update's randomness drawn alike (`scale/distributed.py`). CUDA graphs
        are not used then."""
        self.data_parallel = data_parallel
        self.use_cuda_graph = False
        self.graphed = None
        for net in self.nets.values():
            for module in net.modules():
                if isinstance(module, RunningNorm):
                    module.moments = data_parallel.moments
        self.state_norm.moments = data_parallel.moments
        if self.h_term is not None:  # each rank draws its windows from a stream of its own
            self.h_term.seed(self.config.seed, data_parallel.rank)
            self.h_term.all_ranks_ready = False  # until every rank's buffer is (h_term_observe)

    @torch.no_grad()
    def act(self, state: torch.Tensor) -> torch.Tensor:
        """Deterministic env action for a batch of states `(batch, state_dim)`."""
        return self.actor(state)

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        """The deterministic policy the evaluator runs: `act`, or (recurrent agents) an object
        that keeps hidden states between steps and has a `reset()` for each new episode batch."""
        return self.act

    def state_dict(self) -> dict:
        """The agent's whole training state as plain data (tensors, dicts, numbers)."""
        return {
            "nets": {name: net.state_dict() for name, net in self.nets.items()},
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "last_state": self.last_state,
            "counters": {"explored": self.explored, "updates": self.updates},
            "buffer": self.buffer.state_dict() if self.buffer is not None else None,
            "h_term": self.h_term.state_dict() if self.h_term is not None else None,
        }

    def load_state_dict(self, state: dict) -> None:
        for name, net in self.nets.items():
            net.load_state_dict(state["nets"][name])
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
            for group in opt.param_groups:  # a checkpoint from a GPU run may say True
                group["capturable"] = self.use_cuda_graph
        self.graphed = None  # new optimizer state tensors: graphs must be captured anew
        last = state["last_state"]
        self.last_state = None if last is None else last.to(self.device)
        self.explored = state["counters"]["explored"]
        self.updates = state["counters"]["updates"]
        if self.buffer is not None:
            self.buffer.load_state_dict(state["buffer"])
        self._load_h_term(state)

    def sub_env_state(self) -> dict:
        """The part of the training state that belongs to this agent's own sub-envs: where
        exploring resumes and the replay buffer (several learners keep it per rank)."""
        return {
            "last_state": self.last_state,
            "buffer": self.buffer.state_dict() if self.buffer is not None else None,
            "h_term": self.h_term.state_dict() if self.h_term is not None else None,
        }

    def load_sub_env_state(self, state: dict) -> None:
        last = state["last_state"]
        self.last_state = None if last is None else last.to(self.device)
        if self.buffer is not None and state["buffer"] is not None:
            self.buffer.load_state_dict(state["buffer"])
        self._load_h_term(state)

    def _load_h_term(self, state: dict) -> None:
        if self.h_term is not None and state.get("h_term") is not None:
            self.h_term.load_state_dict(state["h_term"])

    def policy_state(self) -> dict:
        """What `load_policy` needs to rebuild the actor: its class, sizes and weights."""
        return {
            "actor_class": type(self.actor).__name__,
            "state_dim": self.spec.state_dim,
            "action_dim": self.spec.action_dim,
            "net_dims": list(self.config.net_dims),
            "state_norm": self.config.state_norm,
            "state_norm_clip": self.config.state_norm_clip,
            "if_discrete": self.spec.if_discrete,
            "action_low": self.spec.action_low,
            "action_high": self.spec.action_high,
            "env_id": self.spec.name,
            "algo": self.config.algo,
            "explore_rate": self.config.explore_rate,  # for Policy.predict(deterministic=False)
            "explore_noise_std": self.config.explore_noise_std,
            "actor": {k: v.detach().cpu() for k, v in self.actor.state_dict().items()},
        }


# The Config fields every off-policy agent reads (replay, targets, prioritized replay).
H_TERM_FIELDS = frozenset({
    "h_term", "h_term_k", "h_term_gamma", "h_term_lambda", "h_term_drop", "h_term_start",
    "h_term_capacity",
})  # fmt: skip
OFF_POLICY_FIELDS = frozenset({
    "buffer_size", "learning_starts", "soft_update_tau", "target_update_every", "per",
    "per_alpha", "per_beta", "per_beta_steps",
})  # fmt: skip

# An update whose choices repeat with a longer period (e.g. a hard target copy every 1,000
# gradient steps) runs eagerly rather than holding that many graphs; REDQ with the paper's
# update-to-data ratio of 20 still fits.
MAX_GRAPHS = 32

# Fused Adam runs on CPU from torch 2.4 and on CUDA; older torch falls back to the default
# torch.optim.Adam.
_FUSED_ADAM = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 4)


def _free_memory(device: torch.device) -> int | None:
    """Bytes of memory free for new tensors on `device` (None when it cannot be told)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
