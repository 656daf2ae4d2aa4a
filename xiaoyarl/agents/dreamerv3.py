"""DreamerV3: Hafner, Pasukonis, Ba and Lillicrap, "Mastering Diverse Domains through World
Models" (2023; Nature 2025), for discrete and continuous actions.

A world model learns from replayed sequences, and an actor and a critic learn from the model's
imagined trajectories alone.

- The world model (an RSSM): observations are embedded (through the library's encoders, vectors
  through symlog first) and a recurrent state `h` (a LayerNorm GRU of 256 units) carries the
  episode so far; the latent state `z` is 32 categorical variables of 32 classes, drawn from
  the posterior `q(z | h, embedding)` while observing and from the prior `p(z | h)` while
  imagining (each mixed with 1% uniform, sampled with straight-through gradients); `h' =
  GRU(h, [z, action])`. Heads on the features `[h, z]`: the decoder (the observation, on the
  symlog scale), the reward (two-hot over 255 points of symlog [-20, 20]) and whether the
  episode continues. Loss: the predictions' + 0.5 KL(sg(posterior) || prior) + 0.1
  KL(posterior || sg(prior)), each KL at least 1 nat (free bits).
- Imagination: from every replayed step's posterior state, 15 steps of the actor's actions
  through the prior. The critic (two-hot over the same points) learns the lambda-returns
  (lambda 0.95) of the predicted rewards and continuation flags, regularised towards the
  predictions of its slow copy (an average of its weights, updated by 0.02 a step). The actor
  ascends the returns by REINFORCE: the advantages divided by the spread of the returns (their
  5-95 percentile range, at least 1, averaged over steps), plus an entropy bonus of 3e-4.
  Each imagined step's losses weigh the discounted chance that the episode lasts to it.

Acting carries `h` per sub-env (zero where an episode begins): the posterior of the
observation, then the actor's action, then the next `h`. So the saved policy (`actor.pt`) is
the model with its actor and keeps that state as a recurrent policy does (`eval`, `record`,
`load_policy`, `export`, whose model takes and returns it).

The settings `Config` has no field for are `DreamerV3Settings`, changed through `world_model`
(e.g. `--set world_model='{imagine_horizon: 10}'`). Defaults: the paper's, with its smallest
model (XS: a GRU of 256 units, one hidden layer of 256 in each network, `net_dims`); batches of
16 sequences of 64 steps; a gradient step for every two env steps (the paper's replay ratio 512
replayed steps per env step); learning rates 1e-4 (the model, `learning_rate`) and 3e-5 (the
actor and the critic, 0.3 of it); gradients clipped at 1000 (the model) and 100
(`clip_grad_norm`: the actor and the critic). Where this departs from the paper: the decoder of
images is an MLP to the flat image on the symlog scale (the paper's: a transposed CNN), the
networks start from torch's initialisation (the reward and value heads at zero, as the paper's),
the return scale averages the clipped range (the paper clips the averaged percentiles), an
episode starts from a zero GRU state (the paper's is learned), and the critic learns from
imagined returns alone (the Nature version also from replayed ones).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from xiaoyarl.agents.memory import Memory
from xiaoyarl.agents.off_policy import OFF_POLICY_FIELDS, AgentOffPolicy, BufferSizes
from xiaoyarl.core.buffer import ReplayBuffer
from xiaoyarl.core.returns import lambda_returns
from xiaoyarl.core.sequence_replay import (
    MemoryTransitions,
    SequenceReplayBuffer,
    Sequences,
    Windows,
)
from xiaoyarl.core.world_models import (
    NormGRUCell,
    RunningScale,
    TwoHot,
    categorical_kl,
    dreamer_mlp,
    latent_probs,
    one_hot_latent,
    refuse_transition_settings,
    sample_index,
    settings_of,
    symlog,
)
from xiaoyarl.errors import ConfigError

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import OptimizerKit
    from xiaoyarl.config import Config
    from xiaoyarl.envs.base import EnvSpec


@dataclasses.dataclass(frozen=True)
class DreamerV3Settings:
    """The paper's settings that `Config` has no field for (its smallest model, XS; the hidden
    widths of its networks are `net_dims`)."""

    deter_dim: int = 256  # the GRU's units
    stoch: int = 32  # categorical latent variables ...
    classes: int = 32  # ... of this many classes each
    unimix: float = 0.01  # of the uniform distribution in every categorical
    free_nats: float = 1.0  # each KL term counts at least this much
    dyn_coef: float = 0.5
    rep_coef: float = 0.1
    num_bins: int = 255  # two-hot rewards and values over symlog [vmin, vmax]
    vmin: float = -20.0
    vmax: float = 20.0
    batch_length: int = 64  # steps of each replayed sequence
    imagine_horizon: int = 15
    return_lambda: float = 0.95
    entropy_coef: float = 3e-4
    return_scale_tau: float = 0.01  # the returns' percentile range, averaged (decay 0.99)
    slow_critic_tau: float = 0.02
    slow_critic_coef: float = 1.0
    actor_critic_lr_scale: float = 0.3  # their learning rate: 3e-5 against the model's 1e-4
    model_clip: float = 1000.0  # the model's gradient norm (the actor's, critic's: clip_grad_norm)
    min_std: float = 0.1  # continuous actions: the actor's std in [min_std, max_std]
    max_std: float = 1.0

    @classmethod
    def of(cls, config: Config) -> DreamerV3Settings:
        """The settings `config.world_model` asks for over the defaults, checked."""
        s = settings_of(cls, config)
        if s.batch_length < 2 or s.imagine_horizon < 1 or min(s.stoch, s.classes) < 2:
            raise ConfigError(
                f"invalid config: world_model needs batch_length >= 2, imagine_horizon >= 1 "
                f"and stoch, classes >= 2, got {s.batch_length}, {s.imagine_horizon}, "
                f"{s.stoch} and {s.classes}."
            )
        return s


class DreamerModel(nn.Module):
    """The world model and the actor (see the module docstring); a saved policy rebuilds it as
    every saved actor, `(width, action_dim, net_dims, norm, **kwargs)`, `norm` the encoder of
    observations and `width` what it returns. As a policy it carries the GRU's state per episode
    through `context(hidden, starts)` (`RecurrentEncoder`'s protocol, one step at a time):
    `forward` is the greedy action (the posterior's and the actor's most likely), `sample` the
    exploring one; after a call `hiddens` `(1, B, deter_dim)` holds the next state."""

    def __init__(self, width: int, action_dim: int, net_dims: list[int], norm: nn.Module,
                 discrete: bool = True, obs_size: int | None = None,
                 symlog_inputs: bool = True, **settings: Any) -> None:  # fmt: skip
        super().__init__()
        self.settings = s = DreamerV3Settings(**settings)
        self.discrete, self.action_dim, self.net_dims = discrete, action_dim, list(net_dims)
        self.obs_size, self.symlog_inputs = obs_size or width, symlog_inputs
        latent, last, feat = s.stoch * s.classes, net_dims[-1], s.deter_dim + s.stoch * s.classes
        self.norm = norm
        self.embed = dreamer_mlp([width, *net_dims])
        self.img_in = dreamer_mlp([latent + action_dim, last])
        self.gru = NormGRUCell(last, s.deter_dim)
        self.prior = dreamer_mlp([s.deter_dim, last], latent)
        self.posterior = dreamer_mlp([s.deter_dim + last, last], latent)
        self.decoder = dreamer_mlp([feat, *net_dims], self.obs_size)
        self.reward = dreamer_mlp([feat, *net_dims], s.num_bins, zero_out=True)
        self.cont = dreamer_mlp([feat, *net_dims], 1)
        self.policy = dreamer_mlp([feat, *net_dims], action_dim * (1 if discrete else 2))
        self.two_hot = TwoHot(s.num_bins, s.vmin, s.vmax)
        self._context: tuple[torch.Tensor, torch.Tensor] | None = None
        self.hiddens: torch.Tensor | None = None
        self.state_dim = s.deter_dim

    def init_kwargs(self) -> dict:
        """The constructor's arguments besides the sizes (`load_policy` rebuilds from them)."""
        settings = dataclasses.asdict(self.settings)
        return {"discrete": self.discrete, "obs_size": self.obs_size,
                "symlog_inputs": self.symlog_inputs, **settings}  # fmt: skip

    # --- the world model ---
    def encode(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.norm(obs).flatten(1).float()
        return self.embed(symlog(x) if self.symlog_inputs else x)

    def obs_target(self, obs: torch.Tensor) -> torch.Tensor:
        """What the decoder predicts of observations: flat, on the symlog scale."""
        return symlog(self.norm(obs).flatten(1).float() if self.symlog_inputs
                      else obs.flatten(1).float())  # fmt: skip

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return latent_probs(logits, self.settings.classes, self.settings.unimix)

    def action_input(self, action: torch.Tensor) -> torch.Tensor:
        """Actions as the model reads them: one-hot vectors of indices, or values in [-1, 1]."""
        if self.discrete:
            return F.one_hot(action.long(), self.action_dim).float()
        return action.clamp(-1, 1)

    def step(self, h: torch.Tensor, z: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The next recurrent state after latent state `z` and the action (as `action_input`)."""
        return self.gru(self.img_in(torch.cat([z, action], -1)), h)

    def observe(self, windows: Windows) -> dict[str, torch.Tensor]:
        """The model along replayed windows `(T, B)`: every window starts from a zero state,
        as does every episode that begins inside it. Returns, for each step, the state it
        reached (`h`, `z`, `feat` `(T, B, ...)`) with its prior's and posterior's probabilities,
        and for each step where a window or an episode begins (`fresh` `(T, B)`) the latent
        state of its own observation (`fresh_feat`, `fresh_post`, `fresh_prior`)."""
        starts = windows.starts.clone()
        starts[0] = True
        steps, batch = starts.shape
        e = self.encode(windows.states).unflatten(0, (steps, batch))
        e_next = self.encode(windows.next_states).unflatten(0, (steps, batch))
        actions = self.action_input(windows.actions).unflatten(0, (steps, batch))
        zeros = e.new_zeros(steps, batch, self.settings.deter_dim)
        fresh_post = self.probs(self.posterior(torch.cat([zeros, e], -1)))  # (T, B, S, C)
        fresh_z = one_hot_latent(fresh_post)
        h = zeros[0]
        z = fresh_z[0]
        hs: list[torch.Tensor] = []
        zs: list[torch.Tensor] = []
        priors: list[torch.Tensor] = []
        posts: list[torch.Tensor] = []
        for t in range(steps):
            if t:  # where an episode begins, its own observation's state (from a zero h)
                begins = starts[t].unsqueeze(-1)
                h = torch.where(begins, zeros[t], hs[-1])
                z = torch.where(begins, fresh_z[t], zs[-1])
            h = self.step(h, z, actions[t])
            post = self.probs(self.posterior(torch.cat([h, e_next[t]], -1)))
            hs.append(h)
            zs.append(one_hot_latent(post))
            priors.append(self.probs(self.prior(h)))
            posts.append(post)
        h_all, z_all = torch.stack(hs), torch.stack(zs)
        fresh_prior = self.probs(self.prior(zeros[:1])).expand_as(fresh_post)
        return {"h": h_all, "z": z_all, "feat": torch.cat([h_all, z_all], -1),
                "prior": torch.stack(priors), "post": torch.stack(posts), "fresh": starts,
                "fresh_feat": torch.cat([zeros, fresh_z], -1), "fresh_post": fresh_post,
                "fresh_prior": fresh_prior}  # fmt: skip

    def kl_losses(self, post: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
        """dyn_coef * max(free, KL(sg(post) || prior)) + rep_coef * max(free, KL(post ||
        sg(prior))), per state."""
        s = self.settings
        dyn = categorical_kl(post.detach(), prior).clamp(min=s.free_nats)
        rep = categorical_kl(post, prior.detach()).clamp(min=s.free_nats)
        return s.dyn_coef * dyn + s.rep_coef * rep

    # --- the actor ---
    def act_dist(self, feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Discrete: the action probabilities (unimix) and None; continuous: the Gaussian's
        mean (tanh) and std in [min_std, max_std]."""
        s, out = self.settings, self.policy(feat)
        if self.discrete:
            return (1 - s.unimix) * F.softmax(out, -1) + s.unimix / self.action_dim, None
        mean, raw = out.chunk(2, -1)
        std = (s.max_std - s.min_std) * torch.sigmoid(raw + 2.0) + s.min_std
        return torch.tanh(mean), std

    def act_sample(self, feat: torch.Tensor) -> torch.Tensor:
        """An action drawn from the actor: an index, or a Gaussian sample (not yet clipped)."""
        mean, std = self.act_dist(feat)
        if std is None:
            return sample_index(mean)
        return mean + std * torch.randn_like(mean)

    def act_mode(self, feat: torch.Tensor) -> torch.Tensor:
        mean, std = self.act_dist(feat)
        return mean.argmax(-1) if std is None else mean

    def logprob_entropy(self, feat: torch.Tensor,
                        action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        """The log-probability of `action` under the actor at `feat`, and the actor's entropy."""
        mean, std = self.act_dist(feat)
        if std is None:
            logp = mean.log()
            chosen = logp.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
            return chosen, -(mean * logp).sum(-1)
        log_std = std.log()
        z = (action - mean) / std
        logprob = (-0.5 * z.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return logprob, (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)

    # --- acting, one step of each episode at a time ---
    def initial(self, batch: int) -> torch.Tensor:
        """Zero recurrent states `(batch, deter_dim)` on the model's device."""
        return torch.zeros(batch, self.state_dim, device=self.two_hot.support.device)

    @contextlib.contextmanager
    def context(self, hidden: torch.Tensor, starts: torch.Tensor) -> Iterator[DreamerModel]:
        """Calls inside continue `hidden` `(B, deter_dim)` by one step (`starts` `(1, B)`)."""
        self._context = (hidden, starts)
        try:
            yield self
        finally:
            self._context = None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self._act(obs, sample=False)

    def sample(self, obs: torch.Tensor) -> torch.Tensor:
        return self._act(obs, sample=True)

    def _act(self, obs: torch.Tensor, sample: bool) -> torch.Tensor:
        if self._context is None:
            raise RuntimeError(
                "DreamerV3's policy carries a recurrent state per episode: call it inside "
                "`model.context(hidden, starts)`, or act through `load_policy(...)`, which keeps it"
            )
        hidden, starts = self._context
        if starts.shape[0] != 1:
            raise ValueError("DreamerV3's policy acts one step of each episode at a time "
                             f"(starts of shape (1, B)), got {tuple(starts.shape)}.")  # fmt: skip
        h = hidden * (~starts[0]).unsqueeze(-1)
        post = self.probs(self.posterior(torch.cat([h, self.encode(obs)], -1)))
        z = one_hot_latent(post, sample)
        feat = torch.cat([h, z], -1)
        action = self.act_sample(feat) if sample else self.act_mode(feat)
        self.hiddens = self.step(h, z, self.action_input(action)).unsqueeze(0)
        return action if self.discrete else action.clamp(-1, 1)


class AgentDreamerV3(Memory, AgentOffPolicy):
    """DreamerV3 for continuous actions (see the module docstring)."""

    if_discrete = False
    config_fields = OFF_POLICY_FIELDS - {"n_step", "per", "per_alpha", "per_beta",
                                         "per_beta_steps", "layer_norm", "target_update_every",
                                         "soft_update_tau", "recurrent", "recurrent_dim",
                                         "sequence_len", "burn_in"} | {"world_model"}  # fmt: skip
    member_fields: ClassVar[frozenset[str]] = frozenset()  # no vmapped form
    tune_space: ClassVar[str | None] = "dreamerv3.yaml"
    rollout_class = MemoryTransitions  # (no hidden state stored: windows start from zero)

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """Four sub-envs, a gradient step per two env steps (the paper's replay ratio), batches
        of 16 sequences, the smallest model's widths and learning rate."""
        length = DreamerV3Settings.of(config).batch_length
        return {
            "num_envs": config.num_envs or 4,
            "horizon_len": 1,
            "batch_size": 16 * length,
            "replay_ratio": 0.5,
            "learning_rate": 1e-4,
            "net_dims": [256],
            "state_norm": False,
            "reward_norm": False,
            "eval_every": 2_000,
        }

    @classmethod
    def check(cls, config: Config) -> None:
        DreamerV3Settings.of(config)
        if config.recurrent:
            raise ConfigError(
                f"invalid config: recurrent={config.recurrent!r}: {config.algo} is recurrent "
                f"already (its world model's GRU carries the episode); remove the setting."
            )
        refuse_transition_settings(config, "learns its values in imagination")

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: OptimizerKit | None = None) -> None:  # fmt: skip
        self.settings = s = DreamerV3Settings.of(config)
        super().__init__(spec, config, device, learner, kit)
        assert config.net_dims is not None, "resolve_config sets net_dims"
        encoder = self.make_encoder()
        vector = len(spec.obs_shape) == 1 and not spec.obs_keys
        self.model = DreamerModel(self.feature_dim, spec.action_dim, config.net_dims, encoder,
                                  discrete=self.if_discrete, obs_size=math.prod(spec.obs_shape),
                                  symlog_inputs=vector,
                                  **dataclasses.asdict(s)).to(device)  # fmt: skip
        self.actor = self.model  # what a saved policy runs: the model and its actor
        feat = s.deter_dim + s.stoch * s.classes
        self.critic = dreamer_mlp([feat, *config.net_dims], s.num_bins, zero_out=True).to(device)
        self.slow_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.return_scale = RunningScale(s.return_scale_tau).to(device)
        self.nets = {"model": self.model, "critic": self.critic, "slow_critic": self.slow_critic,
                     "return_scale": self.return_scale}  # fmt: skip
        model_params = [p for name, p in self.model.named_parameters()
                        if not name.startswith("policy.")]  # fmt: skip
        self.optimizers = {"model": None, "actor": None, "critic": None}
        if learner:
            assert config.learning_rate is not None, "resolve_config sets learning_rate"
            lr, kind, scale = config.learning_rate, config.optimizer, s.actor_critic_lr_scale
            self.optimizers = {
                "model": self.kit.optimizer(kind, model_params, lr),
                "actor": self.kit.optimizer(kind, self.model.policy.parameters(), lr * scale),
                "critic": self.kit.optimizer(kind, self.critic.parameters(), lr * scale),
            }
        # the actor and the critic learn at a fraction of the rate, under a schedule too
        self.learning_rate_scales = dict.fromkeys(("actor", "critic"), s.actor_critic_lr_scale)
        self.hidden = self.model.initial(spec.num_envs)  # each sub-env's recurrent state
        self.starts = torch.ones(spec.num_envs, dtype=torch.bool, device=device)

    # --- replay: sequences of consecutive steps ---
    def buffer_bytes(self, sizes: BufferSizes, obs_bytes: int, stack: int) -> int:
        return SequenceReplayBuffer.bytes_needed(*sizes, obs_bytes, stack)

    def build_buffer(self, sizes: BufferSizes, obs_shape: tuple[int, ...] | None,
                     obs_dtype: torch.dtype, stack: int) -> ReplayBuffer:  # fmt: skip
        return SequenceReplayBuffer(*sizes, self.device, obs_shape, obs_dtype, stack, 1,
                                    self.config.gamma, hidden_dim=0,
                                    sequence_len=self.settings.batch_length, burn_in=0)  # fmt: skip

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        self.starts = terminal | truncate  # these sub-envs' next steps begin episodes
        state, action = kept
        none = torch.zeros(reward.shape[0], 0, device=reward.device)
        return state, action, reward, terminal, truncate, info["final_state"], none

    # --- exploring ---
    def explore_action(self, state: torch.Tensor) -> torch.Tensor:
        with self.model.context(self.hidden, self.starts.unsqueeze(0)):
            action = self.model.sample(state)
        assert self.model.hiddens is not None, "set by the step"
        self.hidden = self.model.hiddens[0]
        return action

    def acting_memory(self) -> DreamerModel:
        return self.model  # differs: the model carries its own state

    # --- learning ---
    def sample_batch(self) -> Windows:  # type: ignore[override]
        """`batch_size // batch_length` sequences of the replay, as flat tensors (a captured
        update copies each into its static input)."""
        sampled = super().sample_batch()
        assert isinstance(sampled, Sequences), "the replay samples windows"
        return Windows.of(sampled)

    def update_step(  # type: ignore[override]
        self, windows: Windows
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        model, s = self.model, self.settings
        model_loss, logs, start = self.world_model_loss(windows)
        self.step_together(model_loss, [self.optimizers["model"]], s.model_clip)
        actor_loss, critic_loss, more = self.actor_critic_losses(*start)
        self.optimizer_steps(actor_loss + critic_loss, (self.optimizers["actor"], model.policy),
                             (self.optimizers["critic"], self.critic))  # fmt: skip
        self.soft_update(self.slow_critic, self.critic, s.slow_critic_tau)
        logs.update(more, actor_loss=actor_loss.detach(), critic_loss=critic_loss.detach())
        return logs, torch.zeros(windows.rewards.shape[0], device=self.device)

    def world_model_loss(
        self, windows: Windows
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], tuple[torch.Tensor, ...]]:
        """The world model's loss on replayed windows, its parts, and where imagination starts:
        every step's posterior state `(T * B, ...)` (detached) and whether its episode goes on."""
        model = self.model
        out = model.observe(windows)
        steps, batch = out["fresh"].shape
        target_next = model.obs_target(windows.next_states).unflatten(0, (steps, batch))
        target_fresh = model.obs_target(windows.states).unflatten(0, (steps, batch))
        recon = (model.decoder(out["feat"]) - target_next).square().sum(-1)
        recon_fresh = (model.decoder(out["fresh_feat"]) - target_fresh).square().sum(-1)
        rewards = windows.rewards.view(steps, batch)
        cont = 1 - windows.terminals.view(steps, batch).float()
        reward = model.two_hot.loss(model.reward(out["feat"]), rewards)
        cont_loss = F.binary_cross_entropy_with_logits(
            model.cont(out["feat"]).squeeze(-1), cont, reduction="none"
        )
        kl = model.kl_losses(out["post"], out["prior"])
        kl_fresh = model.kl_losses(out["fresh_post"], out["fresh_prior"])
        fresh = out["fresh"].float()
        count = steps * batch + fresh.sum()
        loss = ((recon + reward + cont_loss + kl).sum()
                + ((recon_fresh + kl_fresh) * fresh).sum()) / count  # fmt: skip
        logs = {"model_loss": loss.detach(), "decoder_loss": recon.mean().detach(),
                "reward_loss": reward.mean().detach(), "cont_loss": cont_loss.mean().detach(),
                "kl": categorical_kl(out["post"], out["prior"]).mean().detach()}  # fmt: skip
        start = (out["h"].flatten(0, 1).detach(), out["z"].flatten(0, 1).detach(), cont.flatten())
        return loss, logs, start

    def actor_critic_losses(
        self, h: torch.Tensor, z: torch.Tensor, cont0: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The actor's and the critic's losses on trajectories imagined from states `h`, `z`
        `(N, ...)` whose episodes go on where `cont0` `(N,)` is 1."""
        model, s, gamma = self.model, self.settings, self.config.gamma
        with torch.no_grad():
            feats, actions = [torch.cat([h, z], -1)], []
            for _ in range(s.imagine_horizon):
                action = model.act_sample(feats[-1])
                actions.append(action)
                h = model.step(h, z, model.action_input(action))
                z = one_hot_latent(model.probs(model.prior(h)))
                feats.append(torch.cat([h, z], -1))
            feat = torch.stack(feats)  # (H + 1, N, F)
            rewards = model.two_hot.value(model.reward(feat[1:]))  # (H, N)
            cont = (model.cont(feat[1:]).squeeze(-1) > 0).float()  # the predicted flag's mode
            values = model.two_hot.value(self.critic(feat))  # (H + 1, N)
            ended = cont == 0
            returns = lambda_returns(rewards, values[1:], ended, torch.zeros_like(ended), gamma,
                                     s.return_lambda)  # (H, N)  # fmt: skip
            alive = torch.cat([cont0.unsqueeze(0), gamma * cont[:-1]])
            weights = alive.cumprod(0)  # the discounted chance of being alive at each step
            self.return_scale.update(returns)
            advantages = (returns - values[:-1]) / self.return_scale.value
            slow = model.two_hot.value(self.slow_critic(feat[:-1]))
        logprob, entropy = model.logprob_entropy(feat[:-1], torch.stack(actions))
        actor_loss = -(weights * (logprob * advantages + s.entropy_coef * entropy)).mean()
        logits = self.critic(feat[:-1])
        regulariser = s.slow_critic_coef * model.two_hot.loss(logits, slow)
        critic_loss = (weights * (model.two_hot.loss(logits, returns) + regulariser)).mean()
        logs = {"imagined_return": returns[0].mean(), "entropy": entropy.mean().detach(),
                "return_scale": self.return_scale.value.clone()}  # fmt: skip
        return actor_loss, critic_loss, logs


class AgentDreamerV3Discrete(AgentDreamerV3):
    """DreamerV3 for discrete actions."""

    if_discrete = True
