"""Vmapped populations: members of one shape trained as one stacked model on one device.

With `--population-backend vmap` a slot claims a batch of the population's tasks (every member
of a generation, or a batch of tournament pods) and trains them together. The members' agents
are ordinary `AgentPPO`s; their weights, normaliser statistics and Adam moments are stacked
along a leading member axis (`torch.func.stack_module_state`), and every call of a network
method is one `torch.func.vmap` of `functional_call` over the members. Each member acts in its
own block of sub-envs of one vectorized env (sub-envs `m * N ... (m + 1) * N - 1` are member
m's). The update is `AgentPPO.ppo_update`'s, per member: its own reward scaling, advantages and
their normalisation, mini-batch order, gradient clipping and Adam step with its own learning
rate. So a GPU trains hundreds of small agents in about the time of one.

At the end of a segment every member's state is written back into its agent and saved as an
ordinary run checkpoint in its member folder, so the schemes (`population.py`) rank, copy and
explore them exactly as they do the member processes' checkpoints.

Per-member hyper-parameters (`PER_MEMBER`, searchable): learning_rate, ratio_clip,
lambda_entropy, clip_grad_norm. Every other setting is the same for all members.
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
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from xiaoyarl.agents.ppo import AgentPPO, Rollout
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.config import Config
from xiaoyarl.core.returns import clipped_surrogate, compute_gae
from xiaoyarl.envs import is_torch_native
from xiaoyarl.envs.base import VecEnv
from xiaoyarl.errors import ConfigError
from xiaoyarl.population.leaderboard import locked
from xiaoyarl.population.schemes import PER_MEMBER
from xiaoyarl.population.slots import Slot
from xiaoyarl.train.checkpoint import load_plain, save_atomic
from xiaoyarl.train.evaluator import RECORDER_FIELDS, run_episodes
from xiaoyarl.train.loggers import append_csv_row

LOG_NAMES = ("actor_loss", "critic_loss", "entropy", "approx_kl", "clip_fraction")
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-5  # as the agents' optimizers (`AgentBase.make_optimizer`)


def same_shape(configs: list[Config]) -> None:
    """Members of one vmapped batch may differ only in `PER_MEMBER`, seed and run folder."""
    skip = set(PER_MEMBER) | {"seed", "cwd", "max_steps"}
    first = {k: v for k, v in configs[0].to_dict().items() if k not in skip}
    for config in configs[1:]:
        now = {k: v for k, v in config.to_dict().items() if k not in skip}
        diff = sorted(k for k in first if first[k] != now[k])
        if diff:
            shared = ", ".join(PER_MEMBER)
            raise ConfigError(
                f"vmapped members must share every setting but {shared}; these differ: "
                f"{', '.join(diff)}."
            )


class _Stack(nn.Module):
    """One member's networks; `forward(fn, *args)` is `fn(nets, *args)`, so that any method of
    the networks runs through `functional_call` on the stacked weights."""

    def __init__(self, nets: dict[str, nn.Module]) -> None:
        super().__init__()
        self.nets = nn.ModuleDict(nets)

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(self.nets, *args)


def _gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows `idx` `(M, B)` of each member's `x` `(M, L, ...)`: `(M, B, ...)`."""
    rows = torch.arange(x.shape[0], device=x.device).unsqueeze(1)
    return x[rows, idx]


def _per_member(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`(M,)` values shaped to broadcast against a stacked tensor `(M, ...)`."""
    return value.view(-1, *([1] * (like.dim() - 1)))


def _member_losses(
    nets: nn.ModuleDict,
    states: torch.Tensor,
    actions: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    ratio_clip: torch.Tensor,
    lambda_entropy: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One member's mini-batch loss, as in `AgentPPO.ppo_update`, and its logged values."""
    logprob, entropy = nets["actor"].get_logprob_entropy(states, actions)
    log_ratio = logprob - old_logprobs
    ratio = log_ratio.exp()
    objective = clipped_surrogate(ratio, advantages, ratio_clip).mean()
    actor_loss = -(objective + lambda_entropy * entropy.mean())
    critic_loss = 0.5 * (nets["critic"](states) - returns).square().mean()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipped = ((ratio - 1).abs() > ratio_clip).float().mean()
        logs = torch.stack([actor_loss, critic_loss, entropy.mean(), approx_kl, clipped])
    return actor_loss + critic_loss, logs


class VmapPPO:
    """M `AgentPPO`s of one shape, stacked: explore, update and evaluate them together.

    `agents` keep their own (unstacked) state until `write_back`; `last_state` `(M * N, S)` is
    where exploring resumes, for the env of `M * N` sub-envs."""

    def __init__(self, agents: list[AgentPPO]) -> None:
        self.agents = agents
        self.m = len(agents)
        first = agents[0]
        self.config = first.config
        self.device = first.device
        self.num_envs = first.spec.num_envs  # per member
        self.convert_action = first.actor.convert_action_for_env
        self.template = copy.deepcopy(_Stack(first.nets))
        params, buffers = stack_module_state([_Stack(a.nets) for a in agents])
        # networks share the state normaliser: every name of a shared tensor is given to
        # `functional_call` (untied), which then restores each of them afterwards
        canonical = {id(v): k for k, v in self.template.named_buffers()}
        self.aliases = {k: canonical[id(v)]
                        for k, v in self.template.named_buffers(remove_duplicate=False)
                        if k != canonical[id(v)]}  # fmt: skip
        self.params: dict[str, torch.Tensor] = params
        self.buffers: dict[str, torch.Tensor] = buffers
        self.groups = {name: [k for k in params if k.startswith(f"nets.{name}.")]
                       for name in ("actor", "critic")}  # fmt: skip
        self.hparams = {
            name: torch.tensor([float(getattr(a.config, name)) for a in agents],
                               device=self.device)
            for name in PER_MEMBER
        }  # fmt: skip
        self.adam: dict[str, dict[str, torch.Tensor]] = {}
        self.steps = {name: torch.zeros(self.m, dtype=torch.float32, device=self.device)
                      for name in self.groups}  # fmt: skip
        self._load_optimizers()
        self.last_state: torch.Tensor | None = None

    # --- stacking ----------------------------------------------------------------------------
    def _load_optimizers(self) -> None:
        """Stack the agents' Adam moments and step counts (zeros where an agent has none yet)."""
        for name, keys in self.groups.items():
            for k in keys:
                zeros = torch.zeros_like(self.params[k])
                self.adam[k] = {"exp_avg": zeros, "exp_avg_sq": zeros.clone()}
            for i, agent in enumerate(self.agents):
                state = agent.optimizers[name].state_dict()["state"]
                for j, k in enumerate(keys):
                    if j in state:
                        self.adam[k]["exp_avg"][i] = state[j]["exp_avg"]
                        self.adam[k]["exp_avg_sq"][i] = state[j]["exp_avg_sq"]
                        self.steps[name][i] = state[j]["step"]

    def write_back(self) -> None:
        """Copy each member's slice of the stacked state into its agent (weights, normaliser
        statistics, Adam moments and steps, where it explores from)."""
        for i, agent in enumerate(self.agents):
            member = _Stack(agent.nets)
            with torch.no_grad():
                for k, v in member.named_parameters():
                    v.copy_(self.params[k][i])
                for k, v in member.named_buffers():
                    v.copy_(self.buffers[k][i])
            for name, keys in self.groups.items():
                optimizer = agent.optimizers[name]
                saved = optimizer.state_dict()
                saved["state"] = {
                    j: {"step": self.steps[name][i].clone(),
                        "exp_avg": self.adam[k]["exp_avg"][i].clone(),
                        "exp_avg_sq": self.adam[k]["exp_avg_sq"][i].clone()}
                    for j, k in enumerate(keys)
                }  # fmt: skip
                saved["param_groups"][0]["lr"] = agent.config.learning_rate
                optimizer.load_state_dict(saved)
            if self.last_state is not None:
                n = self.num_envs
                agent.last_state = self.last_state[i * n : (i + 1) * n].clone()

    def vmapped(self, fn: Callable[..., Any], randomness: str = "error") -> Callable[..., Any]:
        """`fn(nets, *args)` for every member at once: `(state, *args) -> outputs`, where each
        of `args` and outputs has the member axis first."""

        def call(state: dict[str, torch.Tensor], *args: Any) -> Any:
            state = {**state, **{k: state[c] for k, c in self.aliases.items()}}
            return functional_call(self.template, state, (fn, *args), tie_weights=False)

        return vmap(call, randomness=randomness)

    @property
    def state(self) -> dict[str, torch.Tensor]:
        return {**self.params, **self.buffers}

    # --- acting ------------------------------------------------------------------------------
    @torch.no_grad()
    def explore_env(self, env: VecEnv, horizon_len: int) -> Rollout:
        """A rollout `(T, M, N, ...)` of every member in its own sub-envs, as
        `AgentPPO.explore_env`."""
        m, n = self.m, self.num_envs
        get_action = self.vmapped(lambda nets, s: nets["actor"].get_action(s), "different")
        columns: dict[str, list[torch.Tensor]] = {f: [] for f in Rollout._fields}
        state = self.last_state
        for _ in range(horizon_len):
            action, logprob = get_action(self.state, state.view(m, n, -1))
            next_state, reward, terminal, truncate, info = env.step(
                self.convert_action(action.flatten(0, 1))
            )
            for name, value in (("states", state), ("actions", action.flatten(0, 1)),
                                ("logprobs", logprob.flatten()), ("rewards", reward),
                                ("terminals", terminal), ("truncates", truncate),
                                ("next_states", info["final_state"])):  # fmt: skip
                columns[name].append(value.view(m, n, *value.shape[1:]))
            state = next_state
        self.last_state = state
        return Rollout(**{f: torch.stack(c) for f, c in columns.items() if c})

    @torch.no_grad()
    def evaluate(self, env: VecEnv, seed: int | None = None) -> torch.Tensor:
        """Returns `(M, K)` of each member's deterministic policy, one episode in each of its
        block of `env`'s sub-envs (`env` has M * K sub-envs)."""
        act = self.vmapped(lambda nets, s: nets["actor"](s))

        def policy(state: torch.Tensor) -> torch.Tensor:
            return act(self.state, state.view(self.m, -1, state.shape[-1])).flatten(0, 1)

        return run_episodes(env, policy, seed=seed).view(self.m, -1)

    # --- the update --------------------------------------------------------------------------
    def update(
        self, rollout: Rollout, order: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """Every member's `ppo_update` on its part of `rollout` `(T, M, N, ...)`; returns the
        logged losses `(M,)` each. `order` `(M, L)`: each member's mini-batch order (indices
        into its `T * N` transitions, time-major); None draws a permutation per member."""
        cfg = self.config
        t_len, m, n = rollout.rewards.shape
        size = t_len * n

        def per_member(x: torch.Tensor) -> torch.Tensor:  # (T, M, N, ...) -> (M, T * N, ...)
            return x.transpose(0, 1).reshape(m, size, *x.shape[3:])

        with torch.no_grad():
            dones = rollout.terminals | rollout.truncates
            scale = self.vmapped(lambda nets, r, d: nets["reward"](r, d))
            rewards = scale(self.state, rollout.rewards.transpose(0, 1), dones.transpose(0, 1))
            value = self.vmapped(lambda nets, s: nets["critic"](s))
            values = value(self.state, per_member(rollout.states)).view(m, t_len, n)
            next_values = value(self.state, per_member(rollout.next_states)).view(m, t_len, n)
            advantages = compute_gae(rewards.transpose(0, 1), values.transpose(0, 1),
                                     next_values.transpose(0, 1), rollout.terminals,
                                     rollout.truncates, cfg.gamma, cfg.lambda_gae_adv)  # fmt: skip
            returns = per_member(advantages) + values.reshape(m, size)
            advantages = per_member(advantages)
            mean, std = advantages.mean(1, keepdim=True), advantages.std(1, keepdim=True)
            advantages = (advantages - mean) / (std + 1e-8)
        states, actions = per_member(rollout.states), per_member(rollout.actions)
        old_logprobs = per_member(rollout.logprobs)

        batch_size = min(cfg.batch_size, size)
        num_updates = max(1, int(cfg.repeat_times * size / batch_size))
        if order is None:
            num_perms = -(-num_updates * batch_size // size)
            order = torch.cat([torch.rand(m, size, device=self.device).argsort(1)
                               for _ in range(num_perms)], dim=1)  # fmt: skip
        losses = self.vmapped(_member_losses)
        logs = torch.zeros(m, len(LOG_NAMES), device=self.device)
        for i in range(num_updates):
            idx = order[:, i * batch_size : (i + 1) * batch_size]
            loss, step_logs = losses(
                self.state, _gather(states, idx), _gather(actions, idx),
                _gather(old_logprobs, idx), _gather(advantages, idx), _gather(returns, idx),
                self.hparams["ratio_clip"], self.hparams["lambda_entropy"],
            )  # fmt: skip
            grads = torch.autograd.grad(loss.sum(), list(self.params.values()))
            self._adam_steps(dict(zip(self.params, grads, strict=True)))
            logs += step_logs

        def merge(nets: nn.ModuleDict, s: torch.Tensor) -> torch.Tensor:
            nets["actor"].norm.update(s)  # updates the (stacked) statistics in place
            return s.new_zeros(())

        norm_update = self.vmapped(merge)
        norm_update(self.state, states)  # after the update, as `AgentPPO.update_state_norms`
        for agent in self.agents:
            agent.explored += size
        return dict(zip(LOG_NAMES, (logs / num_updates).unbind(1), strict=True))

    @torch.no_grad()
    def _adam_steps(self, grads: dict[str, torch.Tensor]) -> None:
        """Per network and member: clip the global gradient norm to the member's
        `clip_grad_norm` (`optim.clip_grad_norm`), then Adam with its learning rate."""
        beta1, beta2 = ADAM_BETAS
        lr = self.hparams["learning_rate"]
        for name, keys in self.groups.items():
            norms = torch.stack([grads[k].flatten(1).norm(dim=1) for k in keys])  # (P, M)
            total = torch.linalg.vector_norm(norms, dim=0)
            scale = (self.hparams["clip_grad_norm"] / (total + 1e-6)).clamp(max=1.0)
            self.steps[name] += 1
            step = self.steps[name].double()  # bias corrections in double, as torch's kernel
            step_size = (lr.double() / (1 - beta1**step)).to(lr.dtype)
            root_correction = (1 - beta2**step).sqrt().to(lr.dtype)
            for k in keys:
                grad = grads[k] * _per_member(scale, grads[k])
                exp_avg, exp_avg_sq = self.adam[k]["exp_avg"], self.adam[k]["exp_avg_sq"]
                exp_avg.lerp_(grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.sqrt() / _per_member(root_correction, grad) + ADAM_EPS
                self.params[k].sub_(_per_member(step_size, grad) * exp_avg / denom)

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
        done = 0
        while done < rollouts if seconds is None else time.perf_counter() < deadline:
            if not keep_going():
                break
            self.update(self.explore_env(env, self.config.horizon_len))
            done += 1
        return done


def member_spec(env: VecEnv, members: int):  # noqa: ANN201 - an EnvSpec
    """The spec one member sees: its block of `env`'s sub-envs."""
    if env.spec.num_envs % members:
        raise ValueError(f"{env.spec.num_envs} sub-envs do not split among {members} members")
    return dataclasses.replace(env.spec, num_envs=env.spec.num_envs // members)


# --- a slot that trains its claimed members together -----------------------------------------
def member_checkpoint(loop_counters: dict, config: Config, agent: AgentPPO) -> dict:
    """A member's state as an ordinary run checkpoint (`TrainLoop.state_dict`'s format): the
    env and evaluator are not kept, so a run resumed from it starts new episodes."""
    from xiaoyarl.train.loop import CHECKPOINT_FORMAT

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
    """A slot that claims up to `members` tasks and trains them as one `VmapPPO`."""

    def __init__(self, population, name: str, log) -> None:  # noqa: ANN001
        super().__init__(population, name, log)
        self.batch = population.pop.members

    def run_tasks(self, tasks: list[dict]) -> None:
        from xiaoyarl.run import agent_class, build_env, resolve_device

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
        m, n = len(tasks), first.num_envs
        seed = first.seed + sum(c["counters"]["total_steps"] for c in checkpoints if c)
        env = build_env(first, m * n, device, backend, seed)
        spec = member_spec(env, m)
        agents, counters = [], []
        for config, checkpoint in zip(configs, checkpoints, strict=True):
            torch.manual_seed(config.seed)  # a new member's initial weights, as `train_agent`
            agent = agent_class(config.algo, spec)(spec, config, device)
            if checkpoint is not None:
                agent.load_state_dict(checkpoint["agent"])
            agents.append(agent)
            counters.append(dict(checkpoint["counters"]) if checkpoint else
                            {"total_steps": 0, "updates": 0, "train_seconds": 0.0,
                             "eval_seconds": 0.0, "best_return": -math.inf})  # fmt: skip
        model = VmapPPO(agents)
        state, _ = env.reset(seed=seed)
        model.last_state = state
        start = time.perf_counter()
        rollout = first.horizon_len * n
        left = max(t["max_steps"] - c["total_steps"] for t, c in zip(tasks, counters, strict=True))
        beat = [time.monotonic()]

        def keep_going() -> bool:
            if time.monotonic() - beat[0] > 2.0:
                self.heartbeat(names)
                beat[0] = time.monotonic()
            return self.stop_signal is None

        done = model.train(env, -(-left // rollout), tasks[0]["seconds"], keep_going)
        env.close()
        if self.stop_signal is not None:  # stopped: the members resume from their checkpoints
            self._release(tasks, None)
            self.log(f"{self.name}: {len(tasks)} vmapped members stopped; they continue from "
                     f"their last checkpoints")  # fmt: skip
            return
        train_seconds = time.perf_counter() - start
        eval_env = build_env(first, m * first.eval_episodes, device, backend, first.seed + 10_000)
        returns = model.evaluate(eval_env, seed=seed + 10_000)
        scores, spreads = returns.mean(1), returns.std(1, unbiased=False)
        eval_env.close()
        model.write_back()
        results = []
        for i, (task, config, agent) in enumerate(zip(tasks, configs, agents, strict=True)):
            c = counters[i]
            folder = self.p.member_dir(task["member"])
            if float(scores[i]) > _best_recorded(folder):  # its best policy, as a run keeps
                save_atomic(agent.policy_state(), folder / "actor.pt")
            c.update(total_steps=c["total_steps"] + done * rollout,
                     updates=c["updates"] + done * _updates_per_rollout(config, rollout),
                     train_seconds=c["train_seconds"] + train_seconds,
                     best_return=max(c["best_return"], float(scores[i])))  # fmt: skip
            save_atomic(member_checkpoint(c, config, agent), folder / "checkpoint" / "state.pt")
            config.save(folder / "config.yaml")
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


def _updates_per_rollout(config: Config, rollout: int) -> int:
    batch_size = min(config.batch_size, rollout)
    return max(1, int(config.repeat_times * rollout / batch_size))


def _range(scores: torch.Tensor) -> str:
    return f"median {scores.quantile(0.5).item():.2f}, best {scores.max().item():.2f}"
