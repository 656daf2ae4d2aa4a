"""Vmapped populations: members of one shape trained as one stacked model on one device.

With `--population-backend vmap` a slot claims a batch of the population's tasks (every member
of a generation, or a batch of tournament pods) and trains them together. The members' agents
are ordinary agents (`AgentPPO`, `AgentA2C`, `AgentPQN`, the replay agents; of the multi-agent
ones MAPPO, PQN-VDN, VDN and QMIX, whose joint steps are packed and recorded member by member:
`VmapAgents.joint`); their weights,
normaliser statistics and Adam moments are stacked along a leading member axis
(`torch.func.stack_module_state`), and every call of an agent's method is one `torch.func.vmap`
of `functional_call` over the members: the agents' own `explore_step`, in
`AgentBase.explore_env`'s loop, and their own update steps in their update's order (PPO:
`ppo_batch` (GAE), `ppo_loss`, `update_state_norms`; PQN: `q_lambda_targets`, `pqn_loss`; a
replay agent: `critic_loss`, then when due `actor_losses`, each member's batch drawn from its
own replay buffer). Each member acts in its own block of sub-envs of one
vectorized env (sub-envs `m * N ... (m + 1) * N - 1` are member m's). Per member: its own
exploration (PQN: its own epsilon), reward scaling, returns or advantages, mini-batch order,
gradient clipping and Adam step (`core/optim.py`'s, on its slice of the stacked weights) with
its own learning rate. So a GPU trains hundreds of small agents in about the time of one.

At the end of a segment every member's state is written back into its agent and saved as an
ordinary run checkpoint in its member folder, so the schemes (`population.py`) rank, copy and
explore them exactly as they do the member processes' checkpoints.

Per-member hyper-parameters (the agent's `member_fields`, searchable): learning_rate and
clip_grad_norm, for PPO ratio_clip and lambda_entropy, for A2C lambda_entropy. Every other
setting is the same for all members.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.utils._pytree import tree_leaves, tree_map

from xiaoyarl.agents.base import AgentBase
from xiaoyarl.agents.off_policy import AgentOffPolicy
from xiaoyarl.agents.ppo import LOSS_NAMES, AgentPPO, PPOBatch, Rollout
from xiaoyarl.agents.pqn import AgentPQN
from xiaoyarl.agents.pqn import Rollout as PQNRollout
from xiaoyarl.agents.settings import agent_of, resolve_config, resolve_device
from xiaoyarl.config import Config
from xiaoyarl.config_io import save_config
from xiaoyarl.core.buffer import Batch, Transitions
from xiaoyarl.core.optim import LeanKit, adam_step, clip_scale, radam_step
from xiaoyarl.envs import is_torch_native
from xiaoyarl.envs.base import VecEnv
from xiaoyarl.errors import ConfigError
from xiaoyarl.population.leaderboard import locked
from xiaoyarl.population.slots import Slot
from xiaoyarl.train.checkpoint import load_plain, policy_state, save_atomic
from xiaoyarl.train.evaluator import RECORDER_FIELDS, run_episodes
from xiaoyarl.train.loggers import append_csv_row

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-5  # as the agents' optimizers (`AgentBase.make_optimizer`)


def same_shape(configs: list[Config]) -> None:
    """Members of one vmapped batch may differ only in their agent's `member_fields`, seed and
    run folder."""
    per_member = sorted(agent_of(configs[0]).member_fields)
    skip = set(per_member) | {"seed", "cwd", "max_steps"}
    first = {k: v for k, v in configs[0].to_dict().items() if k not in skip}
    for config in configs[1:]:
        now = {k: v for k, v in config.to_dict().items() if k not in skip}
        diff = sorted(k for k in first if first[k] != now[k])
        if diff:
            shared = ", ".join(per_member)
            raise ConfigError(
                f"vmapped members must share every setting but {shared}; these differ: "
                f"{', '.join(diff)}."
            )


class _Member(nn.Module):
    """One member's networks; `forward(fn, *args)` is `fn(agent, *args)`, so that any method of
    the agent runs through `functional_call` on one member's slice of the stacked state."""

    def __init__(self, agent: AgentBase) -> None:
        super().__init__()
        self.nets = nn.ModuleDict(agent.nets)
        self.agent = agent  # not a module: its networks are the ones above

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(self.agent, *args)


def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows `idx` `(M, B)` of each member's `x` `(M, L, ...)`: `(M, B, ...)`."""
    rows = torch.arange(x.shape[0], device=x.device).unsqueeze(1)
    return x[rows, idx]


def _per_member(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`(M,)` values shaped to broadcast against a stacked tensor `(M, ...)`."""
    return value.view(-1, *([1] * (like.dim() - 1)))


def _update_state_norms(agent: AgentPPO, data: PPOBatch) -> torch.Tensor:
    agent.update_state_norms(data)
    return data.advantages.new_zeros(())  # vmap returns tensors


def _update_state_norm(agent: AgentPQN, states: torch.Tensor) -> torch.Tensor:
    agent.update_state_norm(states)
    return states.new_zeros(())  # vmap returns tensors


def _record(agent: AgentBase, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
            truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
    return agent.record(kept, reward, terminal, truncate, info)


class VmapAgents:
    """M agents of one algorithm and shape, stacked: explore, update and evaluate them together.
    An algorithm's subclass writes its update (`update`) from the agent's own steps.

    `agents` keep their own (unstacked) state until `write_back`; `last_state` `(M * N, S)` is
    where exploring resumes, for the env of `M * N` sub-envs."""

    # `explore_env`: the rollout `(T, M, N, ...)` of every member, the agents' rollout class
    rollout_class: Any
    # per-member settings (`(M,)` tensors in `hparams`) the update reads; every algorithm's
    # optimizer steps read clip_grad_norm (and learning_rate, from each agent's config)
    hparam_names: tuple[str, ...] = ("clip_grad_norm",)

    def __init__(self, agents: list[Any]) -> None:
        self.agents = agents
        self.m = len(agents)
        first = agents[0]
        self.config = first.config
        self.device = first.device
        self.num_envs = first.env_spec.num_envs  # per member
        self.rollout_class = type(first).rollout_class
        # a multi-agent agent's steps are joint: it packs what the env shows (`next_observation`)
        # and records through its layout, member by member
        self.joint = first.if_multi_agent
        self._observe = self.vmapped(lambda agent, s, info: agent.next_observation(s, info))
        self._record = self.vmapped(_record)
        self.template = _Member(copy.deepcopy(first))
        params, buffers = stack_module_state([_Member(a) for a in agents])
        # networks share the state normaliser: every name of a shared tensor is given to
        # `functional_call` (untied), which then restores each of them afterwards
        canonical = {id(v): k for k, v in self.template.named_buffers()}
        self.aliases = {k: canonical[id(v)]
                        for k, v in self.template.named_buffers(remove_duplicate=False)
                        if k != canonical[id(v)]}  # fmt: skip
        self.params: dict[str, torch.Tensor] = params
        self.buffers: dict[str, torch.Tensor] = buffers
        # the networks with an optimizer, and their parameters' names
        learned = [name for name, optimizer in first.optimizers.items() if optimizer is not None]
        self.groups = {name: [k for k in params if k.startswith(f"nets.{name}.")]
                       for name in learned}  # fmt: skip
        # per member `(M,)` (learning rates: the configs' floats, as the optimizers take them)
        self.hparams = {
            name: torch.tensor([float(getattr(a.config, name)) for a in agents],
                               device=self.device)
            for name in self.hparam_names
        }  # fmt: skip
        # Adam's state, stacked: moments as the weights, step counts `(M, P)` per network
        self.adam = {k: {"exp_avg": torch.zeros_like(v), "exp_avg_sq": torch.zeros_like(v)}
                     for k, v in params.items()}  # fmt: skip
        self.steps = {name: torch.zeros(self.m, len(keys), dtype=torch.float32,
                                        device=self.device)
                      for name, keys in self.groups.items()}  # fmt: skip
        self._load_optimizers()
        with torch.no_grad():  # each member's slices, per network, as `adam_step` takes them
            self.member_slices = {
                name: [([self.params[k][i] for k in keys],
                        [self.adam[k]["exp_avg"][i] for k in keys],
                        [self.adam[k]["exp_avg_sq"][i] for k in keys],
                        list(self.steps[name][i].unbind())) for i in range(self.m)]
                for name, keys in self.groups.items()
            }  # fmt: skip
        self.last_state: torch.Tensor | None = None
        self.explored = 0  # env steps of all members (`AgentBase.explore_env` counts them)
        self.gradient_steps = 0  # each member's, so far
        self._explore_step = self.vmapped(lambda agent, s: agent.explore_step(s), "different")

    # --- stacking ----------------------------------------------------------------------------
    def _load_optimizers(self) -> None:
        """Stack the agents' Adam moments and step counts (zeros where an agent has none yet)."""
        for name, keys in self.groups.items():
            for i, agent in enumerate(self.agents):
                state = _optimizer(agent, name).state_dict()["state"]
                for j, k in enumerate(keys):
                    if j in state:
                        self.adam[k]["exp_avg"][i] = state[j]["exp_avg"]
                        self.adam[k]["exp_avg_sq"][i] = state[j]["exp_avg_sq"]
                        self.steps[name][i, j] = state[j]["step"]

    def write_back(self) -> None:
        """Copy each member's slice of the stacked state into its agent (weights, normaliser
        statistics, Adam moments and steps, where it explores from)."""
        for i, agent in enumerate(self.agents):
            member = _Member(agent)
            with torch.no_grad():
                for k, v in member.named_parameters():
                    v.copy_(self.params[k][i])
                for k, b in member.named_buffers():
                    b.copy_(self.buffers[k][i])
            for name, keys in self.groups.items():
                optimizer = _optimizer(agent, name)
                saved = optimizer.state_dict()
                saved["state"] = {
                    j: {"step": self.steps[name][i, j].clone(),
                        "exp_avg": self.adam[k]["exp_avg"][i].clone(),
                        "exp_avg_sq": self.adam[k]["exp_avg_sq"][i].clone()}
                    for j, k in enumerate(keys)
                }  # fmt: skip
                saved["param_groups"][0]["lr"] = agent.config.learning_rate
                optimizer.load_state_dict(saved)
            if self.last_state is not None:
                n = self.num_envs
                agent.last_state = self.last_state[i * n : (i + 1) * n].clone()

    def vmapped(self, fn: Callable[..., Any], randomness: str = "error",
                out_dims: Any = 0) -> Callable[..., Any]:  # fmt: skip
        """`fn(agent, *args)` for every member at once: `(state, *args) -> outputs`, where each
        tensor of `args` and of the outputs has the member axis first (None stays None)."""

        def call(state: dict[str, torch.Tensor], *args: Any) -> Any:
            state = {**state, **{k: state[c] for k, c in self.aliases.items()}}
            return functional_call(self.template, state, (fn, *args), tie_weights=False)

        def run(state: dict[str, torch.Tensor], *args: Any) -> Any:
            in_dims: Any = 0  # every input has the member axis, but where `args` hold None:
            if any(x is None for x in tree_leaves(args)):
                in_dims = (0, *tree_map(lambda x: None if x is None else 0, args))
            return vmap(call, in_dims, out_dims, randomness=randomness)(state, *args)

        return run

    @property
    def state(self) -> dict[str, torch.Tensor]:
        return {**self.params, **self.buffers}

    def _members(self, x: torch.Tensor) -> torch.Tensor:
        """`(M * N, ...)` of the env's sub-envs as `(M, N, ...)`, member by member."""
        return x.view(self.m, self.num_envs, *x.shape[1:])

    # --- acting: `AgentBase.explore_env`'s loop, each step every member's own ----------------
    @torch.no_grad()
    def explore_env(self, env: VecEnv, horizon_len: int) -> Any:
        """A rollout `(T, M, N, ...)` of every member in its own sub-envs (`rollout_class`):
        the loop of `AgentBase.explore_env` (which reads of this object only `last_state`,
        `explored` and the methods below) on the members' own `explore_step` and `record`."""
        return AgentBase.explore_env(cast(AgentBase, self), env, horizon_len)

    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Every member's `explore_step` on its sub-envs' states of `state` `(M * N, S)`: the
        env actions `(M * N, ...)` and what each keeps `(M, N, ...)`. Each member counts its
        env steps, as its own `explore_env` does."""
        action, kept = self._explore_step(self.state, self._members(state))
        for agent in self.agents:
            agent.explored += self.num_envs
        return action.flatten(0, 1), kept

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        """The agents' `record`, with the env's outputs `(M * N, ...)` as `(M, N, ...)` (a
        multi-agent agent's, member by member: see `joint`)."""
        outputs = (self._members(reward), self._members(terminal), self._members(truncate))
        if self.joint:
            return self._record(self.state, kept, *outputs, self._member_info(info))
        final = {"final_state": self._members(info["final_state"])}
        return self.template.agent.record(kept, *outputs, final)

    def next_observation(self, state: torch.Tensor, info: dict) -> torch.Tensor:
        if not self.joint:
            return state
        return self._observe(self.state, self._members(state),
                             self._member_info(info)).flatten(0, 1)  # fmt: skip

    def _member_info(self, info: dict) -> dict[str, torch.Tensor]:
        """The tensors of an env's `info` `(M * N, ...)` as `(M, N, ...)`."""
        return {k: self._members(v) for k, v in info.items() if isinstance(v, torch.Tensor)}

    @torch.no_grad()
    def evaluate(self, env: VecEnv, seed: int | None = None) -> torch.Tensor:
        """Returns `(M, K)` of each member's evaluation policy (`eval_deterministic`), one
        episode in each of its block of `env`'s sub-envs (`env` has M * K sub-envs)."""
        act = self.vmapped(lambda agent, s, *mask: agent.evaluation_policy()(s, *mask),
                           "different")  # fmt: skip

        def policy(state: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
            """The members' actions for their blocks of states (and action masks)."""
            given = (state,) if mask is None else (state, mask)
            blocks = [x.view(self.m, -1, *x.shape[1:]) for x in given]
            return act(self.state, *blocks).flatten(0, 1)

        return run_episodes(env, policy, seed=seed).view(self.m, -1)

    def update(self, rollout: Any, order: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Every member's update on its part of `rollout` `(T, M, N, ...)`; returns the logged
        losses `(M,)` each. `order` `(M, L)`: each member's mini-batches one after the other
        (indices into its `T * N` transitions, time-major); None draws them as each member's
        own update does."""
        raise NotImplementedError

    def _minibatch_order(self, size: int, order: torch.Tensor | None) -> tuple:
        """`(order (M, L), mini-batches per update, their size, their mean)`: each member's
        mini-batches of its `size` transitions, drawn as its own update draws them
        (`reducer.minibatches`) unless `order` is given."""
        cfg = self.config
        reducer = self.template.agent.reducer
        assert cfg.batch_size and cfg.repeat_times, "resolve_config sets them"
        draws = [reducer.minibatches(size, self.num_envs, cfg.batch_size, cfg.repeat_times,
                                     self.device) for _ in range(self.m)]  # fmt: skip
        if order is None:
            order = torch.stack([torch.cat(draw.indices) for draw in draws])
        return order, len(draws[0].indices), draws[0].indices[0].numel(), draws[0].mean

    def _step(self, loss: torch.Tensor, names: list[str] | None = None,
              members: list[bool] | None = None) -> None:  # fmt: skip
        """Every member's gradient step on its part of `loss` `(M,)`: of the networks `names`
        (None: every one with an optimizer), of the `members` set (None: all)."""
        groups = {name: self.groups[name] for name in names or self.groups}
        keys = [k for group in groups.values() for k in group]
        grads = torch.autograd.grad(loss.sum(), [self.params[k] for k in keys])
        # contiguous, as parameters' own gradients are (the fused Adam kernel reads them so)
        self._optimizer_steps({k: g.contiguous() for k, g in zip(keys, grads, strict=True)},
                              groups, members)  # fmt: skip

    @torch.no_grad()
    def _optimizer_steps(self, grads: dict[str, torch.Tensor],
                         groups: dict[str, list[str]] | None = None,
                         members: list[bool] | None = None) -> None:  # fmt: skip
        """Each member's steps of `AgentBase.optimizer_steps` after its backward pass: per
        network (of `groups`, by default all), clip the gradients to the member's
        `clip_grad_norm`, then its Adam (or RAdam) step with its learning rate (`core/optim.py`'s
        `clip_scale`, `adam_step`, `radam_step`); only the `members` set step (None: all)."""
        stepping = torch.tensor(members or [True] * self.m, device=self.device)
        for name, keys in (groups or self.groups).items():
            member_grads = [[grads[k][i] for k in keys] for i in range(self.m)]
            norms = torch._foreach_norm([g for member in member_grads for g in member])
            scale = clip_scale(torch.stack(norms).view(self.m, len(keys)),
                               self.hparams["clip_grad_norm"])  # fmt: skip
            for k in keys:
                grads[k].mul_(_per_member(scale, grads[k]))
            radam = self.config.optimizer == "radam"  # it counts its steps itself
            if not radam:
                self.steps[name] += stepping.unsqueeze(1)
            for i, agent in enumerate(self.agents):
                if members is not None and not members[i]:
                    continue
                params, exp_avgs, exp_avg_sqs, steps = self.member_slices[name][i]
                lr = agent.config.learning_rate
                assert lr is not None, "resolve_config sets learning_rate"
                if radam:
                    radam_step(params, member_grads[i], exp_avgs, exp_avg_sqs, steps, lr,
                               agent.config.weight_decay)  # fmt: skip
                else:
                    adam_step(params, member_grads[i], exp_avgs, exp_avg_sqs, steps, lr,
                              ADAM_BETAS, ADAM_EPS, agent.config.weight_decay)  # fmt: skip

    # --- exploring and learning for a number of rollouts ---------------------------------------
    def train(
        self,
        env: VecEnv,
        rollouts: int,
        seconds: float | None = None,
        keep_going: Callable[[], bool] = lambda: True,
    ) -> int:
        """Explore and update `rollouts` times (or for `seconds`), while `keep_going()`;
        returns the rollouts done."""
        deadline = math.inf if seconds is None else time.perf_counter() + seconds
        horizon_len = self.config.horizon_len
        assert horizon_len is not None, "resolve_config sets horizon_len"
        done = 0
        while done < rollouts if seconds is None else time.perf_counter() < deadline:
            if not keep_going():
                break
            self.update(self.explore_env(env, horizon_len))
            done += 1
        return done


class VmapPPO(VmapAgents):
    """M `AgentPPO`s (or `AgentA2C`s): the update is `AgentPPO.ppo_update`'s, every member at
    once (A2C's clip range is not read)."""

    hparam_names = ("ratio_clip", "lambda_entropy", "clip_grad_norm")

    def update(
        self, rollout: Rollout, order: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Every member's `ppo_update` on its part of `rollout` `(T, M, N, ...)`: its GAE
        (`ppo_batch`), mini-batch steps of its `ppo_loss` (with its clip range and entropy
        weight), then its normalisers' update."""
        rollout = cast(AgentPPO, self.template.agent).ppo_rollout(rollout)
        t_len, m, n = rollout.rewards.shape
        members = Rollout._make(None if x is None else x.transpose(0, 1) for x in rollout)
        # where `AgentPPO.ppo_batch`'s fields have the member axis (None: no action masks)
        dims = tuple(None if field == "masks" and members.action_masks is None else 0
                     for field in PPOBatch._fields)  # fmt: skip
        ppo_batch = self.vmapped(lambda agent, r: tuple(agent.ppo_batch(r)), out_dims=dims)
        data = PPOBatch(*ppo_batch(self.state, members))  # (M, T * N, ...) each
        order, num_updates, batch_size, mean = self._minibatch_order(t_len * n, order)
        losses = self.vmapped(lambda agent, b, eps, entropy: agent.ppo_loss(b, mean, eps, entropy))
        logs = torch.zeros(m, len(LOSS_NAMES), device=self.device)
        for i in range(num_updates):
            idx = order[:, i * batch_size : (i + 1) * batch_size]
            minibatch = PPOBatch._make(None if x is None else _gather(x, idx) for x in data)
            loss, step_logs = losses(self.state, minibatch, self.hparams["ratio_clip"],
                                     self.hparams["lambda_entropy"])  # fmt: skip
            self._step(loss)
            logs += step_logs
        self.gradient_steps += num_updates
        self.vmapped(_update_state_norms)(self.state, data)
        return dict(zip(LOSS_NAMES, (logs / num_updates).unbind(1), strict=True))


class VmapPQN(VmapAgents):
    """M `AgentPQN`s: each explores with its own epsilon (its own env steps so far), and the
    update is `AgentPQN.pqn_update`'s, every member at once."""

    def __init__(self, agents: list[AgentPQN]) -> None:
        super().__init__(agents)
        self._explore_step = self.vmapped(
            lambda agent, s, epsilon: agent.explore_step(s, epsilon), "different"
        )

    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Every member's epsilon-greedy step, each with the epsilon of its own schedule."""
        epsilons = torch.tensor([a.epsilon() for a in self.agents], device=self.device)
        action, kept = self._explore_step(self.state, self._members(state), epsilons)
        for agent in self.agents:
            agent.explored += self.num_envs
        return action.flatten(0, 1), kept

    def update(
        self, rollout: PQNRollout, order: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Every member's `pqn_update` on its part of `rollout` `(T, M, N, ...)`: its Q(lambda)
        returns (`q_lambda_targets`), mini-batch steps of its `pqn_loss`, then its observation
        normaliser's update."""
        t_len, m, n = rollout.rewards.shape
        members = PQNRollout._make(x.transpose(0, 1) for x in rollout)  # (M, T, N, ...)
        targets = self.vmapped(lambda agent, r: agent.q_lambda_targets(r).flatten())
        returns = targets(self.state, members)  # (M, T * N)
        states, actions = members.states.flatten(1, 2), members.actions.flatten(1, 2)
        order, num_updates, batch_size, mean = self._minibatch_order(t_len * n, order)
        losses = self.vmapped(lambda agent, s, a, g: agent.pqn_loss(s, a, g, mean))
        logs = torch.zeros(m, 2, device=self.device)
        for i in range(num_updates):
            idx = order[:, i * batch_size : (i + 1) * batch_size]
            loss, step_logs = losses(self.state, _gather(states, idx), _gather(actions, idx),
                                     _gather(returns, idx))  # fmt: skip
            self._step(loss)
            logs += step_logs
        self.gradient_steps += num_updates
        self.vmapped(_update_state_norm)(self.state, states)
        return dict(zip(("critic_loss", "q_value"), (logs / num_updates).unbind(1), strict=True))


class VmapReplay(VmapAgents):
    """M replay agents (`AgentOffPolicy`: the DQN family, DDPG, TD3, SAC and their kin): each
    member explores into its own replay buffer and takes its own gradient steps, `replay_ratio`
    per env step of its own, every member's at once. A step draws a batch from every member's
    buffer, then runs the agent's own stages, each followed by every member's optimizer step:
    `critic_loss` (the critics', or the DQN family's Q-network's), then where the agent says
    the actor steps (`should_update_actor`, per member) `actor_losses` (with SAC's temperature),
    then the target networks' soft updates on the agent's schedule (`target_update_every`,
    `critic_target_due`; a target actor after its actor's step)."""

    def __init__(self, agents: list[AgentOffPolicy]) -> None:
        super().__init__(agents)
        self._critic_loss = self.vmapped(lambda agent, b: agent.critic_loss(b), "different")
        self._actor_losses = self.vmapped(lambda agent, b: agent.actor_losses(b), "different")
        self._explore_step = self.vmapped(_explore_step, "different")
        # what exploring keeps per sub-env besides the networks (DDPG's noise), stacked
        states = [agent.exploring_state() for agent in agents]
        self.exploring = {k: torch.stack([s[k] for s in states]) for k in states[0]}

    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """Every member's `explore_step` (see `VmapAgents.explore_step`), each continuing what
        it keeps per sub-env (`exploring_state`)."""
        # the members' schedules (the random warm-up, epsilon) read the env steps explored,
        # every member's the same
        self.template.agent.explored = self.agents[0].explored
        action, kept, self.exploring = self._explore_step(self.state, self._members(state),
                                                          self.exploring)  # fmt: skip
        for agent in self.agents:
            agent.explored += self.num_envs
        return action.flatten(0, 1), kept

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        # the agent's `record` sees every member's sub-envs `(M, N)`, and what they keep
        agent = cast(AgentOffPolicy, self.template.agent)
        agent.load_exploring_state(self.exploring)
        try:
            return super().record(kept, reward, terminal, truncate, info)
        finally:
            self.exploring = agent.exploring_state()
            agent.load_exploring_state({})

    def write_back(self) -> None:
        super().write_back()
        for i, agent in enumerate(self.agents):
            cast(AgentOffPolicy, agent).load_exploring_state(
                {k: v[i].clone() for k, v in self.exploring.items()}
            )

    def update(self, rollout: Transitions, order: torch.Tensor | None = None,
               ) -> dict[str, torch.Tensor]:  # fmt: skip
        """Every member's `update_net` on its part of `rollout` `(T, M, N, ...)`: its buffer
        takes it, its observation normaliser too; then, once learning has started,
        `replay_ratio` gradient steps per env step of one member (`gradient_step`). `order` is
        not read (each batch is drawn from each member's buffer)."""
        t_len, _, n = rollout.rewards.shape
        members = Transitions._make(x.transpose(0, 1) for x in rollout)  # (M, T, N, ...)
        for i, agent in enumerate(self.agents):
            buffer = cast(AgentOffPolicy, agent).buffer
            assert buffer is not None, "vmapped members are learners"
            buffer.add(Transitions._make(x[i] for x in members))
        self.vmapped(_update_normalizers)(self.state, members)
        first = cast(AgentOffPolicy, self.agents[0])
        assert first.buffer is not None and self.config.replay_ratio is not None
        if first.explored < self.config.learning_starts or first.buffer.num_sampleable == 0:
            return {}
        logs: dict[str, torch.Tensor] = {}
        num_updates = max(1, round(self.config.replay_ratio * t_len * n))
        for _ in range(num_updates):
            for name, value in self.gradient_step(self.sample()).items():
                logs[name] = logs.get(name, 0) + value / num_updates
        return logs

    def sample(self) -> Batch:
        """A batch from every member's own buffer, stacked `(M, B, ...)`."""
        batches = [cast(AgentOffPolicy, agent).sample_batch() for agent in self.agents]
        return Batch._make(torch.stack(field) for field in zip(*batches, strict=True))

    def gradient_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Every member's `update_step` on its part of `batch` `(M, B, ...)`, as its stages
        (see the class); returns the logs `(M,)` each."""
        template = cast(AgentOffPolicy, self.template.agent)
        template.updates = self.agents[0].updates  # the agents' schedules read it
        loss, q, _ = self._critic_loss(self.state, batch)
        stepped = [name for name in template.critic_nets if name in self.groups]
        self._step(loss, stepped)
        logs = {"critic_loss": loss.detach(), "q_value": q.detach().flatten(1).mean(1)}
        due = [cast(AgentOffPolicy, agent).should_update_actor(loss[i].detach())
               for i, agent in enumerate(self.agents)]  # fmt: skip
        stepped = list(template.critic_nets) if template.critic_target_due(any(due)) else []
        if any(due):
            losses, actor_logs = self._actor_losses(self.state, batch)
            self._step(sum(losses.values()), list(losses), due)
            logs.update(actor_logs)
            stepped.append("actor")
        self._update_targets(stepped, due)
        for agent in self.agents:
            agent.updates += 1
        self.gradient_steps += 1
        return logs

    @torch.no_grad()
    def _update_targets(self, online: list[str], due: list[bool]) -> None:
        """The target of each network of `online` that has one soft-updated towards it, on the
        agents' `target_update_every` schedule (`AgentOffPolicy.update_targets`); the target
        actor of the members whose actor stepped only."""
        if self.agents[0].updates % self.config.target_update_every:
            return
        tau = self.config.soft_update_tau
        for name in online:
            if f"{name}_target" not in self.template.agent.nets:
                continue  # (a critic kind without targets; the FastTD3 actor's none)
            weight = torch.full((self.m,), tau, device=self.device)
            if name == "actor":
                weight *= torch.tensor(due, device=self.device)
            prefix = f"nets.{name}_target."
            for key, target in self.params.items():
                if key.startswith(prefix):
                    source = self.params[f"nets.{name}." + key[len(prefix) :]]
                    target.lerp_(source, _per_member(weight, target))


def _explore_step(agent: AgentOffPolicy, state: torch.Tensor, exploring: dict,
                  ) -> tuple[torch.Tensor, tuple, dict]:  # fmt: skip
    """The agent's `explore_step` from what it keeps per sub-env, and what it keeps after."""
    agent.load_exploring_state(exploring)
    try:
        action, kept = agent.explore_step(state)
        return action, kept, agent.exploring_state()
    finally:
        agent.load_exploring_state({})  # (nothing of one member's is left on the agent)


def _update_normalizers(agent: AgentOffPolicy, rollout: Transitions) -> torch.Tensor:
    agent.update_normalizers(rollout)
    return rollout.rewards.new_zeros(())  # vmap returns tensors


def _optimizer(agent: AgentBase, name: str):  # noqa: ANN202 - the agent's optimizer
    optimizer = agent.optimizers[name]
    assert optimizer is not None, "vmapped members are learners"
    return optimizer


def member_spec(env: VecEnv, members: int):  # noqa: ANN201 - an EnvSpec
    """The spec one member sees: its block of `env`'s sub-envs."""
    if env.spec.num_envs % members:
        raise ValueError(f"{env.spec.num_envs} sub-envs do not split among {members} members")
    return dataclasses.replace(env.spec, num_envs=env.spec.num_envs // members)


# agent class (`agent_of`) -> its stacked form: one for each agent that declares `member_fields`
# (A2C: PPO's, its own objective in its `ppo_loss`)
VMAPPED: dict[type[AgentBase], type[VmapAgents]] = {
    AgentPPO: VmapPPO,
    AgentPQN: VmapPQN,
    AgentOffPolicy: VmapReplay,
}


def vmapped_form(agent: type[AgentBase]) -> type[VmapAgents]:
    """The stacked form of an agent class: its own, or the nearest base class's."""
    return next(VMAPPED[cls] for cls in agent.__mro__ if cls in VMAPPED)


# --- a slot that trains its claimed members together -----------------------------------------
def member_checkpoint(loop_counters: dict, config: Config, agent: AgentBase) -> dict:
    """A member's state as an ordinary run checkpoint (`TrainLoop.state_dict`'s format): the
    env and evaluator are not kept, so a run resumed from it starts new episodes."""
    from xiaoyarl.train.checkpoint import CHECKPOINT_FORMAT

    agent.last_state = None  # its sub-envs are not saved: exploring starts new episodes
    return {
        "format": CHECKPOINT_FORMAT,
        "config": config.to_dict(),
        "agent": agent.state_dict(),
        "env": None,
        "evaluator": None,
        "episodes": None,
        "counters": {
            "next_eval": 0,
            "next_checkpoint": 0,
            "steps_to_target": None,
            "seconds_to_target": None,
            "process_seconds_to_target": None,
            "last_eval": None,
            **loop_counters,
        },  # fmt: skip
        "rng": {"torch": torch.get_rng_state()},
    }


class VmapSlot(Slot):
    """A slot that claims up to `members` tasks and trains them as one `VmapAgents`."""

    def __init__(self, population, name: str, log) -> None:  # noqa: ANN001
        super().__init__(population, name, log)
        self.batch = population.pop.members

    def run_tasks(self, tasks: list[dict]) -> None:
        from xiaoyarl.envs.build import build_env
        from xiaoyarl.run import agent_class

        names = [t["member"] for t in tasks]
        configs, checkpoints = [], []
        for t in tasks:
            config = self.p.member_config(t["member"], t["seed"], t["hparams"], t["max_steps"])
            device = resolve_device(config.device)
            backend = config.backend
            config = resolve_config(config, is_torch_native(config.env_id, backend), device.type)
            path = self.p.member_dir(t["member"]) / "checkpoint" / "state.pt"
            checkpoints.append(load_plain(path) if path.is_file() else None)
            configs.append(config)
        same_shape(configs)
        first = configs[0]
        # one process trains every member: all cores unless the population sets its threads
        # (measured in BENCHMARKS.md: 16 CartPole members 1.55x faster on 2 threads than on 1)
        torch.set_num_threads(self.p.config.threads or os.cpu_count() or 1)
        m, n, horizon_len = len(tasks), first.num_envs, first.horizon_len
        assert n is not None and horizon_len is not None, "resolve_config sets them"
        seed = first.seed + sum(c["counters"]["total_steps"] for c in checkpoints if c)
        env = build_env(first, m * n, device, backend, seed)
        spec = member_spec(env, m)
        agents, counters = [], []
        for config, checkpoint in zip(configs, checkpoints, strict=True):
            torch.manual_seed(config.seed)  # a new member's initial weights, as `train_agent`
            agent = agent_class(config.algo, spec)(spec, config, device, kit=LeanKit())
            if checkpoint is not None:
                agent.load_state_dict(checkpoint["agent"])
            agents.append(agent)
            counters.append(dict(checkpoint["counters"]) if checkpoint else
                            {"total_steps": 0, "updates": 0, "train_seconds": 0.0,
                             "eval_seconds": 0.0, "best_return": -math.inf})  # fmt: skip
        model = vmapped_form(agent_of(first))(agents)
        state, info = env.reset(seed=seed)
        model.last_state = model.next_observation(state, info)
        start = time.perf_counter()
        rollout = horizon_len * n
        left = max(t["max_steps"] - c["total_steps"] for t, c in zip(tasks, counters, strict=True))
        beat = [time.monotonic()]

        def keep_going() -> bool:
            if time.monotonic() - beat[0] > 2.0:
                self.heartbeat(names)
                beat[0] = time.monotonic()
            return self.stop_signal is None

        steps_before = model.gradient_steps
        done = model.train(env, -(-left // rollout), tasks[0]["seconds"], keep_going)
        env.close()
        if self.stop_signal is not None:  # stopped: the members resume from their checkpoints
            self._release(tasks, None)
            self.log(f"{self.name}: {len(tasks)} vmapped members stopped; they continue from "
                     f"their last checkpoints")  # fmt: skip
            return
        train_seconds = time.perf_counter() - start
        eval_env = build_env(first, m * first.eval_episodes, device, backend, first.seed + 10_000,
                             evaluation=True)  # fmt: skip
        returns = model.evaluate(eval_env, seed=seed + 10_000)
        scores, spreads = returns.mean(1), returns.std(1, unbiased=False)
        eval_env.close()
        model.write_back()
        results = []
        for i, (task, config, agent) in enumerate(zip(tasks, configs, agents, strict=True)):
            c = counters[i]
            folder = self.p.member_dir(task["member"])
            if float(scores[i]) > _best_recorded(folder):  # its best policy, as a run keeps
                save_atomic(policy_state(agent), folder / "actor.pt")
            c.update(total_steps=c["total_steps"] + done * rollout,
                     updates=c["updates"] + model.gradient_steps - steps_before,
                     train_seconds=c["train_seconds"] + train_seconds,
                     best_return=max(c["best_return"], float(scores[i])))  # fmt: skip
            save_atomic(member_checkpoint(c, config, agent), folder / "checkpoint" / "state.pt")
            save_config(config, folder / "config.yaml")
            append_csv_row(folder / "recorder.csv",
                           {"step": c["total_steps"], "time": c["train_seconds"],
                            "eval_mean": float(scores[i]), "eval_std": float(spreads[i])},
                           RECORDER_FIELDS)  # fmt: skip
            results.append({"total_steps": c["total_steps"], "final_eval_mean": float(scores[i])})
        self._release(tasks, results)
        self.log(f"{self.name}: {m} vmapped members, {done * rollout:,} env steps each in "
                 f"{train_seconds:.1f} s: evals {_range(scores)}")  # fmt: skip

    def _release(self, tasks: list[dict], results: list[dict] | None) -> None:
        """Free the claims; record each task's result (None: stopped, not recorded)."""
        with locked(self.p.folder):
            state = self.p.read_state()
            for i, task in enumerate(tasks):
                self._record(state, task["member"])["claim"] = None
                if results is not None:
                    self.p.scheme.finish(state, task, results[i])
            self.p.write_state(state)


def _best_recorded(folder: Path) -> float:
    """The best evaluation in a member folder's `recorder.csv` (its own history, whatever
    checkpoint it was copied from since)."""
    path = folder / "recorder.csv"
    if not path.is_file():
        return -math.inf
    with open(path, newline="") as f:
        return max((float(row["eval_mean"]) for row in csv.DictReader(f)), default=-math.inf)


def _range(scores: torch.Tensor) -> str:
    return f"median {scores.quantile(0.5).item():.2f}, best {scores.max().item():.2f}"
