"""TD-MPC2: Hansen, Su and Wang, "TD-MPC2: Scalable, Robust World Models for Continuous
Control", ICLR 2024; following its PyTorch reference implementation (the authors' repository).

A model-based agent for continuous actions. Observations are encoded into latent states `z`
(SimNorm: groups of 8 entries, each a softmax); in that latent space it learns
- the dynamics `z' = d(z, a)`, trained for consistency with the encoding of the next
  observation (no decoder: the model predicts only what matters for rewards and values);
- the reward `R(z, a)` and an ensemble of Q-functions `Q(z, a)`, each a categorical
  prediction over 101 points of the symlog scale (discrete regression, `core/world_models.py`);
- a termination predictor (episodic tasks end; the model learns where, from the env's
  terminal flags; it stays near 0 where episodes never end);
- a Gaussian policy prior `pi(z)` (squashed by tanh), trained to maximise the Q-values,
  scaled by their running 5-95 percentile spread, plus a small entropy bonus.

A gradient step replays windows of `horizon + 1` consecutive steps: it encodes the first
observation, rolls the dynamics out through the stored actions, and weighs each step's
consistency, reward, value and termination losses by `rho ** t` (the paper's weights:
consistency 20, reward 0.1, value 0.1, termination 1). The TD targets bootstrap from the
target Q-functions (the minimum of two of them) at the policy prior's action.

Acting plans with MPPI in latent space (batched over the sub-envs): `num_samples` action
sequences of `horizon` steps, `num_pi_trajs` of them from the policy prior and the rest from a
Gaussian, are scored by the model (discounted predicted rewards, then the Q-value of the last
state), and the Gaussian is refitted to the best `num_elites`, weighted by `exp(temperature *
value)`, `iterations` times. The first action of one elite sequence (drawn by its weight) is
taken, with the final std as exploration noise while training. Each sub-env's plan starts from
its previous plan, shifted by a step (zeros at an episode's start).

Training begins with `learning_starts` env steps of random actions, then as many gradient
steps at once on that seed data (the paper's pretraining), then `replay_ratio` per env step.

The settings of the paper that `Config` has no field for are `TDMPC2Settings`, changed through
`world_model` (e.g. `--set world_model='{horizon: 5}'`); the rest are the algorithm preset's
(`xiaoyarl/configs/model_based/tdmpc2.yaml`: the paper's learning rate, tau, gradient clip,
batch of 256 windows and its smallest model's widths, [384, 384]). Where this departs from the
reference: the discount is the config's `gamma` (the paper derives it from the episode length,
as the task presets do); the encoder's learning rate is 0.3 times the model's through an
optimizer of its own (the reference: a parameter group), both clipped together.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from xiaoyarl.agents.off_policy import OFF_POLICY_FIELDS, AgentOffPolicy, BufferSizes
from xiaoyarl.core.buffer import ReplayBuffer
from xiaoyarl.core.nets import gaussian_logprob
from xiaoyarl.core.sequence_replay import (
    MemoryTransitions,
    SequenceReplayBuffer,
    Sequences,
    Windows,
)
from xiaoyarl.core.world_models import (
    RunningScale,
    SimNorm,
    TwoHot,
    normed_mlp,
    refuse_transition_settings,
    settings_of,
)
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit
    from xiaoyarl.config import Config
    from xiaoyarl.envs.base import EnvSpec


@dataclasses.dataclass(frozen=True)
class TDMPC2Settings:
    """The paper's settings that `Config` has no field for (its defaults: the reference's, with
    its smallest model, "1M": latent states of 128, an encoder of one hidden layer of 256, 2
    Q-functions; the hidden widths of the other networks are `net_dims`)."""

    latent_dim: int = 128
    enc_dim: int = 256
    num_q: int = 2
    simnorm_dim: int = 8
    dropout: float = 0.01  # on the Q-functions' first layer
    num_bins: int = 101  # discrete regression of rewards and values, over symlog [vmin, vmax]
    vmin: float = -10.0
    vmax: float = 10.0
    log_std_min: float = -10.0
    log_std_max: float = 2.0
    consistency_coef: float = 20.0
    reward_coef: float = 0.1
    value_coef: float = 0.1
    termination_coef: float = 1.0
    rho: float = 0.5  # a loss of step t of a window weighs rho ** t
    entropy_coef: float = 1e-4
    enc_lr_scale: float = 0.3
    horizon: int = 3
    iterations: int = 6
    num_samples: int = 512
    num_elites: int = 64
    num_pi_trajs: int = 24
    temperature: float = 0.5
    min_std: float = 0.05
    max_std: float = 2.0

    @classmethod
    def of(cls, config: Config) -> TDMPC2Settings:
        """The settings `config.world_model` asks for over the defaults, checked."""
        settings = settings_of(cls, config)
        if not 0 < settings.num_pi_trajs < settings.num_samples or not (
            0 < settings.num_elites <= settings.num_samples
        ):
            raise ConfigError(
                f"invalid config: world_model needs 0 < num_pi_trajs < num_samples and "
                f"0 < num_elites <= num_samples, got num_pi_trajs={settings.num_pi_trajs}, "
                f"num_elites={settings.num_elites}, num_samples={settings.num_samples}."
            )
        if (
            settings.horizon < 1
            or settings.iterations < 1
            or settings.latent_dim % (settings.simnorm_dim)
        ):
            raise ConfigError(
                f"invalid config: world_model needs horizon >= 1, iterations >= 1 and a "
                f"latent_dim that simnorm_dim divides, got {settings.horizon}, "
                f"{settings.iterations}, {settings.latent_dim} and {settings.simnorm_dim}."
            )
        return settings


class WorldModel(nn.Module):
    """TD-MPC2's networks and its planner: `forward(state)` plans the greedy action of each
    state (MPPI without a previous plan to start from), so a saved policy plans as the agent
    does. Built as every saved actor is: `(width, action_dim, net_dims, norm, **settings)`,
    `norm` the encoder of observations (`make_encoder`) and `width` what it returns."""

    def __init__(self, width: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 gamma: float = 0.99, **settings: float) -> None:  # fmt: skip
        super().__init__()
        self.settings = s = TDMPC2Settings(**settings)  # type: ignore[arg-type]
        self.gamma, self.action_dim, self.net_dims = gamma, action_dim, list(net_dims)
        latent, hidden = s.latent_dim, list(net_dims)
        self.norm = norm
        self.encoder = normed_mlp([width, s.enc_dim, latent], SimNorm(s.simnorm_dim))
        self.dynamics = normed_mlp([latent + action_dim, *hidden, latent], SimNorm(s.simnorm_dim))
        self.reward = normed_mlp([latent + action_dim, *hidden, s.num_bins])
        self.termination = normed_mlp([latent, *hidden, 1])
        self.pi = normed_mlp([latent, *hidden, 2 * action_dim])
        self.qs = nn.ModuleList(
            normed_mlp([latent + action_dim, *hidden, s.num_bins], dropout=s.dropout)
            for _ in range(s.num_q)
        )
        for head in (self.reward, *self.qs):  # predictions start at 0 (the reference's init)
            nn.init.zeros_(head[-1].weight)
        self.two_hot = TwoHot(s.num_bins, s.vmin, s.vmax)

    def init_kwargs(self) -> dict:
        """The constructor's arguments besides the sizes (`load_policy` rebuilds from them)."""
        return {"gamma": self.gamma, **dataclasses.asdict(self.settings)}

    # --- the model ---
    def encode(self, state: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.norm(state))

    def next(self, z: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.dynamics(torch.cat([z, action], -1))

    def predicted_reward(self, z: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.two_hot.value(self.reward(torch.cat([z, action], -1)))

    def q_logits(self, z: torch.Tensor, action: torch.Tensor, qs: nn.ModuleList | None = None,
                 detach: bool = False) -> torch.Tensor:  # fmt: skip
        """The logits `(num_q, ..., num_bins)` of every Q-function (of `qs`: the targets), with
        their weights held fixed where `detach` (gradients reach the inputs only)."""
        za = torch.cat([z, action], -1)
        nets = self.qs if qs is None else qs
        if detach:
            return torch.stack([
                torch.func.functional_call(q, {k: v.detach() for k, v in q.named_parameters()},
                                           (za,))
                for q in nets
            ])  # fmt: skip
        return torch.stack([q(za) for q in nets])

    def q_value(self, z: torch.Tensor, action: torch.Tensor, reduce: str = "avg",
                qs: nn.ModuleList | None = None, detach: bool = False) -> torch.Tensor:  # fmt: skip
        """The minimum ("min") or mean ("avg") of the values of two Q-functions drawn at
        random (all of them where there are two)."""
        logits = self.q_logits(z, action, qs, detach)
        if logits.shape[0] > 2:  # (a random order by sorting draws: capturable, as randperm is not)
            logits = logits[torch.rand(logits.shape[0], device=logits.device).argsort()[:2]]
        values = self.two_hot.value(logits)
        return values.min(0).values if reduce == "min" else values.mean(0)

    def policy(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A sample of the policy prior (tanh-squashed), its mean action, and its entropy bonus
        as the reference scales it: minus the log-density of the Gaussian sample before the
        squash, times the action width."""
        s = self.settings
        mean, raw = self.pi(z).chunk(2, -1)
        log_std = s.log_std_min + 0.5 * (s.log_std_max - s.log_std_min) * (torch.tanh(raw) + 1)
        noise = torch.randn_like(mean)
        logprob = gaussian_logprob(noise, log_std).sum(-1)
        action = torch.tanh(mean + noise * log_std.exp())
        return action, torch.tanh(mean), -logprob * self.action_dim

    # --- planning ---
    @torch.no_grad()
    def plan(self, state: torch.Tensor, previous: torch.Tensor | None = None,
             explore: bool = False) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """MPPI for a batch of states `(N, ...)`: the actions `(N, A)` and the plan's means
        `(H, N, A)` (to start the next step's plan from); `previous` `(H, N, A)`: each sub-env's
        last plan, already shifted a step (None: zeros). `explore` adds the final std as noise."""
        s, n, a_dim = self.settings, state.shape[0], self.action_dim
        horizon, samples, from_pi = s.horizon, s.num_samples, s.num_pi_trajs
        z = self.encode(state)
        pi_actions = torch.empty(horizon, n, from_pi, a_dim, device=z.device)
        z_pi = z.unsqueeze(1).expand(n, from_pi, -1)
        for t in range(horizon):
            pi_actions[t] = self.policy(z_pi)[0]
            if t < horizon - 1:
                z_pi = self.next(z_pi, pi_actions[t])
        z = z.unsqueeze(1).expand(n, samples, -1)
        mean = torch.zeros(horizon, n, a_dim, device=z.device) if previous is None else previous
        std = torch.full((horizon, n, a_dim), s.max_std, device=z.device)
        actions = torch.empty(horizon, n, samples, a_dim, device=z.device)
        actions[:, :, :from_pi] = pi_actions
        for _ in range(s.iterations):
            noise = torch.randn(horizon, n, samples - from_pi, a_dim, device=z.device)
            actions[:, :, from_pi:] = (mean.unsqueeze(2) + std.unsqueeze(2) * noise).clamp(-1, 1)
            value = self.trajectory_value(z, actions).nan_to_num(0)  # (N, S)
            elite_value, elite = value.topk(s.num_elites, -1)  # (N, K)
            elite_actions = actions.gather(2, elite[None, :, :, None].expand(horizon, -1, -1,
                                                                              a_dim))  # fmt: skip
            score = torch.softmax(s.temperature * elite_value, -1)  # (N, K), rows sum to 1
            weights = score[None, :, :, None]
            mean = (weights * elite_actions).sum(2)
            std = (weights * (elite_actions - mean.unsqueeze(2)).square()).sum(2).sqrt()
            std = std.clamp(s.min_std, s.max_std)
        pick = torch.multinomial(score, 1)  # (N, 1): one elite sequence, drawn by its weight
        action = elite_actions[0].gather(1, pick[:, :, None].expand(-1, 1, a_dim)).squeeze(1)
        if explore:
            action = action + std[0] * torch.randn_like(action)
        return action.clamp(-1, 1), mean

    def trajectory_value(self, z: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """The value `(N, S)` of action sequences `(H, N, S, A)` from latent states `(N, S, L)`:
        the discounted predicted rewards until a predicted termination, then the discounted
        Q-value of the last state at the policy prior's action."""
        value = torch.zeros(z.shape[:-1], device=z.device)
        alive = torch.ones_like(value)
        discount = 1.0
        for action in actions:
            value = value + discount * alive * self.predicted_reward(z, action)
            z = self.next(z, action)
            discount *= self.gamma
            ended = torch.sigmoid(self.termination(z).squeeze(-1)) > 0.5
            alive = alive * ~ended
        return value + discount * alive * self.q_value(z, self.policy(z)[0])

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.plan(state)[0]


class PlanningPolicy:
    """The agent's evaluation policy: plans for a batch of sub-envs, each step's plan starting
    from the last one shifted a step, afresh after `reset()` (a new episode batch)."""

    def __init__(self, model: WorldModel) -> None:
        self.model = model
        self.mean: torch.Tensor | None = None

    def reset(self) -> None:
        self.mean = None

    def __call__(self, state: torch.Tensor) -> torch.Tensor:
        previous = None if self.mean is None else shifted(self.mean)
        action, self.mean = self.model.plan(state, previous)
        return action


def shifted(mean: torch.Tensor) -> torch.Tensor:
    """A plan's means `(H, N, A)` one step on: each step's the next's, the last step 0."""
    return torch.cat([mean[1:], torch.zeros_like(mean[:1])])


class AgentTDMPC2(AgentOffPolicy):
    """TD-MPC2 (see the module docstring)."""

    if_discrete = False
    action_reason = "it plans with Gaussian samples of continuous action sequences (MPPI)"
    config_fields = OFF_POLICY_FIELDS - {"n_step", "per", "per_alpha", "per_beta",
                                         "per_beta_steps", "layer_norm", "target_update_every",
                                         "recurrent", "recurrent_dim", "sequence_len",
                                         "burn_in"} | {"world_model"}  # fmt: skip
    member_fields: ClassVar[frozenset[str]] = frozenset()  # no vmapped form
    tune_space: ClassVar[str | None] = "tdmpc2.yaml"
    rollout_class = MemoryTransitions  # (with no hidden state: windows of steps are replayed)

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """One sub-env (the paper's), one gradient step per env step; batches of 256 windows
        of `horizon` steps; the smallest model's widths."""
        horizon = TDMPC2Settings.of(config).horizon
        return {
            "num_envs": config.num_envs or 1,
            "horizon_len": 1,
            "batch_size": 256 * horizon,
            "replay_ratio": 1.0,
            "learning_rate": 3e-4,
            "net_dims": [384, 384],
            "state_norm": False,
            "reward_norm": False,
            "eval_every": 2_000,
        }

    @classmethod
    def check(cls, config: Config) -> None:
        TDMPC2Settings.of(config)
        if config.recurrent:
            raise ConfigError(
                f"invalid config: recurrent={config.recurrent!r}: {config.algo} has no recurrent "
                f"form (its latent state encodes one observation); stack frames, or train sac "
                f"with recurrent={config.recurrent!r}."
            )
        refuse_transition_settings(config, "bootstraps every step of them")

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        self.settings = TDMPC2Settings.of(config)
        super().__init__(spec, config, device, learner, kit)
        assert config.net_dims is not None, "resolve_config sets net_dims"
        encoder = self.make_encoder()
        settings = dataclasses.asdict(self.settings)
        self.model = WorldModel(self.feature_dim, spec.action_dim, config.net_dims, encoder,
                                config.gamma, **settings).to(device)  # fmt: skip
        self.actor = self.model  # what a saved policy runs: the planner
        self.q_target = copy.deepcopy(self.model.qs).requires_grad_(False).eval()
        self.scale = RunningScale(config.soft_update_tau).to(device)
        self.nets = {"model": self.model, "q_target": self.q_target, "scale": self.scale}
        model = self.model.eval()  # (dropout) trained in train mode, acting in eval mode
        encoder_params = [*model.norm.parameters(), *model.encoder.parameters()]
        rest = [p for net in (model.dynamics, model.reward, model.termination, model.qs)
                for p in net.parameters()]  # fmt: skip
        self.optimizers = {"encoder": None, "model": None, "pi": self.make_optimizer(model.pi)}
        if learner:
            assert config.learning_rate is not None, "resolve_config sets learning_rate"
            lr, kind = config.learning_rate, config.optimizer
            self.optimizers["encoder"] = self.kit.optimizer(
                kind, encoder_params, lr * self.settings.enc_lr_scale
            )
            self.optimizers["model"] = self.kit.optimizer(kind, rest, lr)
        # the encoder learns at a fraction of the rate, under a schedule too (`train/schedules.py`)
        self.learning_rate_scales = {"encoder": self.settings.enc_lr_scale}
        self._plan: torch.Tensor | None = None  # each sub-env's last plan `(H, N, A)`
        self._fresh = torch.ones(spec.num_envs, dtype=torch.bool, device=device)

    # --- replay: windows of consecutive steps ---
    def build_buffer(self, sizes: BufferSizes, obs_shape: tuple[int, ...] | None,
                     obs_dtype: torch.dtype, stack: int) -> ReplayBuffer:  # fmt: skip
        return SequenceReplayBuffer(*sizes, self.device, obs_shape, obs_dtype, stack, 1,
                                    self.config.gamma, hidden_dim=0,
                                    sequence_len=self.settings.horizon, burn_in=0)  # fmt: skip

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        self._fresh = terminal | truncate  # these sub-envs plan afresh at their next step
        state, action = kept
        none = torch.zeros(reward.shape[0], 0, device=reward.device)
        return state, action, reward, terminal, truncate, info["final_state"], none

    # --- exploring ---
    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        previous = None
        if self._plan is not None and self._plan.shape[1] == state.shape[0]:
            previous = shifted(self._plan) * ~self._fresh[None, :, None]
        action, self._plan = self.model.plan(state, previous, explore=True)
        return action

    def evaluation_policy(self) -> PlanningPolicy:
        return PlanningPolicy(self.model)

    # --- checkpoints: each sub-env's last plan too, so that a resume continues exactly ---
    def state_dict(self) -> dict:
        return {**super().state_dict(), "plan": self._plan_state()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self._load_plan_state(state["plan"])

    def sub_env_state(self) -> dict:
        return {**super().sub_env_state(), "plan": self._plan_state()}

    def load_sub_env_state(self, state: dict) -> None:
        super().load_sub_env_state(state)
        self._load_plan_state(state["plan"])

    def _plan_state(self) -> dict:
        return {"mean": self._plan, "fresh": self._fresh}

    def _load_plan_state(self, state: dict) -> None:
        mean = state["mean"]
        self._plan = None if mean is None else mean.to(self.device)
        self._fresh = state["fresh"].to(self.device)

    # --- learning ---
    def sample_batch(self) -> Windows:  # type: ignore[override]
        """`batch_size // horizon` windows of the sequence replay, as flat tensors (a captured
        update copies each into its static input)."""
        sampled = super().sample_batch()
        assert isinstance(sampled, Sequences), "the replay samples windows"
        return Windows.of(sampled)

    def gradient_steps(self, new_steps: int) -> int:
        # differs: the first update pretrains on the seed data, a step per seed step
        if self.updates == 0:
            new_steps = self.explored
        return super().gradient_steps(new_steps)

    def update_step(  # type: ignore[override]
        self, steps: Windows
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        s, model, cfg = self.settings, self.model, self.config
        horizon = s.horizon
        size = steps.rewards.shape[0] // horizon  # windows
        actions = steps.actions.view(horizon, size, -1)
        rewards = steps.rewards.view(horizon, size)
        terminals = steps.terminals.view(horizon, size).float()
        # a window's steps after an episode ended belong to the next one: not rolled out into
        valid = (steps.starts.cumsum(0) == 0).float()
        weights = s.rho ** torch.arange(horizon, device=self.device, dtype=torch.float32)
        with torch.no_grad():
            next_z = model.encode(steps.next_states).view(horizon, size, -1)
            next_action = model.policy(next_z)[0]
            bootstrap = model.q_value(next_z, next_action, "min", self.q_target)
            targets = rewards + cfg.gamma * (1 - terminals) * bootstrap
        model.train()
        z = model.encode(steps.states[:size])  # each window's first step
        zs = [z]
        consistency = torch.zeros((), device=self.device)
        for t in range(horizon):
            z = model.next(z, actions[t])
            error = (z - next_z[t]).square().mean(-1)
            consistency = consistency + weights[t] * (error * valid[t]).mean()
            zs.append(z)
        latent = torch.stack(zs[:-1])  # (H, B, L)
        reward_loss = model.two_hot.loss(model.reward(torch.cat([latent, actions], -1)), rewards)
        value_loss = model.two_hot.loss(model.q_logits(latent, actions), targets).mean(0)
        ended = model.termination(torch.stack(zs[1:])).squeeze(-1)
        termination = F.binary_cross_entropy_with_logits(ended, terminals, reduction="none")
        per_step = torch.stack([(loss * valid).mean(1) for loss in (reward_loss, value_loss,
                                                                   termination)])  # fmt: skip
        reward_loss, value_loss = (per_step[:2] * weights).sum(1) / horizon
        termination_loss = per_step[2].mean()
        consistency = consistency / horizon
        loss = (s.consistency_coef * consistency + s.reward_coef * reward_loss
                + s.value_coef * value_loss + s.termination_coef * termination_loss)  # fmt: skip
        self.step_together(
            loss, [self.optimizers["encoder"], self.optimizers["model"]], cfg.clip_grad_norm
        )  # (the reference clips them together)
        pi_loss = self._update_policy(torch.stack(zs).detach(), valid)
        model.eval()
        self.soft_update(self.q_target, model.qs, cfg.soft_update_tau)
        logs = {"consistency_loss": consistency.detach(), "reward_loss": reward_loss.detach(),
                "value_loss": value_loss.detach(), "termination_loss": termination_loss.detach(),
                "pi_loss": pi_loss, "pi_scale": self.scale.value.clone()}  # fmt: skip
        return logs, torch.zeros(steps.rewards.shape[0], device=self.device)

    def _update_policy(self, zs: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The policy prior's step on the rolled-out latent states `(H + 1, B, L)`: it ascends
        the Q-values (the Q-functions' weights held fixed) divided by their running spread, plus
        the entropy bonus, each step weighed by `rho ** t`."""
        s, model = self.settings, self.model
        action, _, entropy = model.policy(zs)
        values = model.q_value(zs, action, "avg", detach=True)
        self.scale.update(values[0])
        values = self.scale(values)
        mask = torch.cat([torch.ones_like(valid[:1]), valid])  # (H + 1, B)
        weights = s.rho ** torch.arange(zs.shape[0], device=self.device, dtype=torch.float32)
        per_step = (-(s.entropy_coef * entropy + values) * mask).mean(1)
        loss = (per_step * weights).mean()
        self.optimizer_step(self.optimizers["pi"], model.pi, loss)
        return loss.detach()
