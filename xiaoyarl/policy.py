"""Inference from finished runs: `load_policy(run_dir)`, `load_ensemble(run_dirs)` (several
runs' policies acting as one) and `evaluate(run_dir or run_dirs)`."""

from __future__ import annotations

import contextlib
import importlib
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import nn

from xiaoyarl.config import Config
from xiaoyarl.core.nets import ActorDiscretePPO, RunningNorm
from xiaoyarl.core.off_policy_nets import ActorGumbel, QNet, RecurrentQNet
from xiaoyarl.errors import CheckpointError, ConfigError
from xiaoyarl.train.checkpoint import load_plain

if TYPE_CHECKING:
    from xiaoyarl.agents.multi.recurrent_decomposition import RecurrentGreedy
    from xiaoyarl.core.recurrent import HiddenStates, RecurrentEncoder

# where the actor classes of policies saved before each names its module (2026-11-29) are
SAVED_BEFORE_MODULES = ("xiaoyarl.core.nets", "xiaoyarl.core.off_policy_nets",
                        "xiaoyarl.core.distributional", "xiaoyarl.core.multi_discrete")  # fmt: skip


def actor_class(meta: dict) -> type[nn.Module]:
    """The class of a saved policy's actor: `actor_class` of the module `actor_module` the agent
    built it from (imported where it is not yet: an actor of a user's own algorithm too), so a
    policy rebuilds itself without pickled modules or a table of classes here."""
    modules = [meta["actor_module"]] if "actor_module" in meta else SAVED_BEFORE_MODULES
    return saved_class(meta["actor_class"], modules, "actor")


def saved_class(name: str, modules: Sequence[str], what: str) -> type[nn.Module]:
    """The module class `name` of a policy file, from the first of `modules` that defines it."""
    for module in modules:
        try:
            cls = getattr(importlib.import_module(module), name, None)
        except ImportError as error:
            raise CheckpointError(
                f"the policy's {what} class {name} is defined in {module}, which cannot be "
                f"imported here ({error}); install or put on the path what defines it."
            ) from None
        if isinstance(cls, type) and issubclass(cls, nn.Module):
            return cls
    raise CheckpointError(f"unknown {what} class {name} in policy file.")


class Policy:
    """A trained policy. `predict(obs, deterministic=True)` (or calling the policy) takes a batch
    of observations `(batch, state_dim)` or a single one `(state_dim,)`, numpy or torch, and
    returns actions in the env's own units: int64 indices for discrete envs, values within the
    action bounds for continuous ones; numpy in gives numpy out. `deterministic=False` acts as
    the agent explores: a sample of a stochastic policy (PPO, A2C, SAC), Gaussian noise of
    `explore_noise_std` on a deterministic one (DDPG, TD3), epsilon-greedy with the final
    `explore_rate` for Q-learning (DQN family)."""

    obs_shape: tuple[int, ...]
    memory: RecurrentEncoder | None
    hiddens: HiddenStates | None

    def __init__(self, meta: dict, device: str | torch.device = "cpu") -> None:
        self._bind(meta, device)
        actor = actor_class(meta)
        norm = RunningNorm(meta["state_dim"], meta["state_norm"], meta.get("state_norm_clip", 10.0))
        encoder: nn.Module = norm
        self.obs_keys = meta.get("obs_keys")  # Dict observations: how they are packed
        image = len(self.obs_shape) > 1 or self.obs_keys
        if image or meta.get("encoder", "auto") not in ("auto", "mlp"):
            from xiaoyarl.core.encoders import make_encoder  # images: not loaded for vectors

            layer_norm = meta.get("encoder_layer_norm", False)
            encoder = make_encoder(meta["encoder"], self, norm, layer_norm)
        # what the agent put around that encoder, innermost first (`encoder_wrappers`)
        wrappers = meta.get("encoder_wrappers")
        for wrapper in _saved_before_wrappers(meta, actor) if wrappers is None else wrappers:
            wrap = saved_class(wrapper["class"], [wrapper["module"]], "encoder")
            encoder = wrap(encoder, **wrapper["kwargs"])
            if hasattr(encoder, "context"):  # a memory: hidden states carried between calls
                from xiaoyarl.core.recurrent import HiddenStates

                self.memory = cast("RecurrentEncoder", encoder)
                self.hiddens = HiddenStates(self.memory.initial)
        width = int(encoder.out_dim)  # type: ignore[arg-type]
        nvec = meta.get("action_nvec")  # multi-discrete actions: each component's choices
        extra = {} if nvec is None else {"nvec": tuple(nvec)}
        extra.update(meta.get("actor_kwargs", _saved_before_kwargs(meta)))
        net_dims = meta["net_dims"]
        if issubclass(actor, RecurrentQNet) and "hidden_dim" not in extra:
            *net_dims, extra["hidden_dim"] = net_dims  # saved with agent_rnn: the last, the GRU's
        self.actor = actor(width, meta["action_dim"], net_dims, encoder, **extra)
        self.actor.load_state_dict(meta["actor"])
        self.actor.to(self.device).eval()
        if hasattr(self.actor, "context"):  # an actor that carries its own state (DreamerV3's)
            from xiaoyarl.core.recurrent import HiddenStates

            self.memory = cast("RecurrentEncoder", self.actor)
            self.hiddens = HiddenStates(self.memory.initial)

    def _bind(self, meta: dict, device: str | torch.device) -> None:
        """What `predict` needs besides the actions: the env's shapes and action bounds."""
        self.meta = meta
        self.device = torch.device(device)
        self.masked = bool(meta.get("action_mask"))  # the env's info says the allowed actions
        self.memory = None  # a recurrent policy's encoder, and its hidden states
        self.hiddens = None
        self.state_dim = meta["state_dim"]
        # one observation's shape and dtype (runs saved before images were read: a vector)
        self.obs_shape = tuple(meta.get("obs_shape", (self.state_dim,)))
        self.obs_dtype = getattr(torch, meta.get("obs_dtype", "float32"))
        self.channels_last = meta.get("channels_last")  # images: the env's layout, if it said
        self.if_discrete = meta["if_discrete"]
        parts = meta.get("action_parts")  # a Dict or Tuple action space (`envs/actions.py`)
        self.action_parts = None if parts is None else tuple(tuple(p) for p in parts)
        if not self.if_discrete:
            self.low = torch.tensor(meta["action_low"], device=self.device)
            self.high = torch.tensor(meta["action_high"], device=self.device)

    @torch.no_grad()
    def act_normalized(self, state: torch.Tensor) -> torch.Tensor:
        """Deterministic action as agents see it (continuous in [-1, 1]) for a torch batch
        `(batch, state_dim)` on `self.device`."""
        with self._remembering(state.shape[0]):
            return self.actor(state)

    @contextlib.contextmanager
    def _remembering(self, batch: int) -> Iterator[None]:
        """A recurrent policy: continue each of the `batch` episodes from its hidden state (new
        ones after `reset()`, or for a new batch size), and keep the next one."""
        if self.memory is None or self.hiddens is None:
            yield
            return
        with self.hiddens.continued(self.memory, batch):
            yield

    @torch.no_grad()
    def sample_normalized(self, state: torch.Tensor) -> torch.Tensor:
        """Exploring action as agents see it (see the class docstring) for a torch batch."""
        with self._remembering(state.shape[0]):
            return self._sample(state)

    def _sample(self, state: torch.Tensor, avail: torch.Tensor | None = None) -> torch.Tensor:
        """The actor's exploring action for rows it reads (`agents/acting.py`)."""
        from xiaoyarl.agents.acting import sampled_action

        explore_rate = self.meta.get("explore_rate", Config.explore_rate)
        noise_std = self.meta.get("explore_noise_std", Config.explore_noise_std)
        return sampled_action(self.actor, state, avail, explore_rate=explore_rate,
                              noise_std=noise_std)  # fmt: skip

    @torch.no_grad()
    def masked_action(self, state: torch.Tensor, mask: torch.Tensor,
                      deterministic: bool) -> torch.Tensor:  # fmt: skip
        """An allowed action per row of `state`, `mask` `(batch, A)` bool: the best one, or
        (`deterministic=False`) as the agent explores."""
        from xiaoyarl.agents.acting import masked_greedy

        actor: Any = self.actor
        if reads_mask(getattr(actor, "norm", None)):  # [observation, mask] rows (masked DQNs)
            state = torch.cat([state, mask.float()], dim=-1)
        with self._remembering(state.shape[0]):
            if not deterministic:
                return self._sample(state, mask)
            if isinstance(actor, QNet):  # the best allowed action
                return masked_greedy(actor.q_values(state), mask)
            return actor(state, mask)  # PPO, A2C: the masked categorical policy

    def predict(
        self,
        obs: np.ndarray | torch.Tensor | dict,
        deterministic: bool = True,
        action_mask: np.ndarray | torch.Tensor | None = None,
    ) -> np.ndarray | torch.Tensor:
        """Actions for one observation or a batch, in the env's own units (see the class; a
        Dict or Tuple action space's as a dict or tuple of its parts' actions); a Dict env's
        observations as the env gives them (a dict of arrays; a Tuple env's, a tuple of
        arrays) or packed. A policy of an env with action masks takes the allowed
        actions, `action_mask` `(A,)` or `(batch, A)` bool, and picks among them (all allowed
        where not given)."""
        if isinstance(obs, tuple):  # a Tuple env's: keyed "0", "1", ... (as the adapter keys it)
            obs = {str(i): value for i, value in enumerate(obs)}
        if isinstance(obs, dict):
            obs = self._pack(obs)
        is_numpy = not isinstance(obs, torch.Tensor)
        state = torch.as_tensor(np.asarray(obs) if is_numpy else obs, dtype=self.obs_dtype)
        shape, rank = self.obs_shape, len(self.obs_shape)
        single = state.dim() == rank
        if tuple(state.shape[-rank:]) != shape or state.dim() > rank + 1:
            batch = ", ".join(map(str, ("batch", *shape)))
            raise ValueError(
                f"policy expects observations of shape ({batch}) or {shape}, got "
                f"{tuple(state.shape)}."
            )
        state = state.to(self.device).reshape(-1, *shape)
        if self.masked:
            mask = torch.ones(state.shape[0], self.meta["action_dim"], dtype=torch.bool,
                              device=self.device) if action_mask is None else torch.as_tensor(
                np.asarray(action_mask) if is_numpy else action_mask, dtype=torch.bool
            ).to(self.device).reshape(state.shape[0], -1)  # fmt: skip
            action = self.masked_action(state, mask, deterministic)
        elif deterministic:
            action = self.act_normalized(state)
        else:
            action = self.sample_normalized(state)
        if self.action_parts is not None:  # a Dict or Tuple action space: its structure
            return self._structured(action, single, is_numpy)
        if not self.if_discrete:
            action = self.low + (action + 1.0) * 0.5 * (self.high - self.low)
        if single:
            action = action[0]
        return action.cpu().numpy() if is_numpy else action

    def _structured(self, action: torch.Tensor, single: bool, is_numpy: bool) -> Any:
        """Actions as agents see them `(batch, K + C)` -> the env's Dict or Tuple of its parts'
        actions in its own units (`envs/actions.py`): discrete ones from each part's start,
        continuous ones within the bounds."""
        from xiaoyarl.envs.actions import nest, split  # structured actions only

        parts = self.action_parts
        assert parts is not None, "a policy of a Dict or Tuple action space"
        values = split(parts, *self.discrete_continuous(action))
        values = [v[0] if single else v for v in values]
        return nest(parts, [v.cpu().numpy() if is_numpy else v for v in values])

    def discrete_continuous(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Actions as agents see them `(batch, K + C)` -> the discrete choices int64 `(batch,
        K)` and the continuous values in the env's units `(batch, C)` (None where it has
        none)."""
        k = len(self.meta["action_nvec"] or ())
        bounds = None if self.if_discrete else (self.low, self.high)
        return discrete_continuous(action, k, bounds)

    def _pack(self, obs: dict) -> np.ndarray:
        """A Dict observation (or a batch of them) as the env adapter packs it
        (`pack_observation`)."""
        if not self.obs_keys:
            raise ValueError("this policy was not trained on Dict or Tuple observations; pass "
                             "arrays.")  # fmt: skip
        key, shape, kind = self.obs_keys[0]
        single = np.asarray(obs[key]).ndim == (0 if kind == "onehot" else len(shape))
        values = [torch.as_tensor(np.asarray(obs[key])) for key, _, _ in self.obs_keys]
        packed = pack_observation([v.unsqueeze(0) if single else v for v in values], self.obs_keys)
        return packed[0].numpy() if single else packed.numpy()

    def vec_policy(self, deterministic: bool = True) -> Callable[..., torch.Tensor]:
        """The policy as the evaluator steps its run's `VecEnv` with it: `(state[, mask]) ->
        actions` as agents see them (continuous ones in [-1, 1]), the best or
        (`deterministic=False`) as the agent explores; masks where the env gives them."""

        @torch.no_grad()
        def act(state: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
            if self.masked and mask is not None:
                return self.masked_action(state, mask, deterministic)
            return self.act_normalized(state) if deterministic else self.sample_normalized(state)

        return act

    def __call__(self, obs: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """`predict(obs, deterministic=True)`."""
        return self.predict(obs, deterministic=True)

    def reset(self) -> None:
        """Forget what a recurrent policy remembers of the episodes so far (feed-forward
        policies remember nothing): the next `predict` starts new episodes."""
        if self.hiddens is not None:
            self.hiddens.reset()

    def step(
        self,
        obs: np.ndarray | torch.Tensor | dict,
        state: np.ndarray | torch.Tensor | None = None,
        episode_start: np.ndarray | torch.Tensor | None = None,
        deterministic: bool = True,
        **predict_kwargs: Any,
    ) -> tuple[np.ndarray | torch.Tensor, np.ndarray | torch.Tensor | None]:
        """`predict` with the recurrent state carried by the caller (SB3's `predict(obs, state,
        episode_start)`): actions for a batch of observations, and the state after them
        (`predict`'s other arguments as keywords: `action_mask`, a multi-agent policy's `avail`).
        `state` `(batch, state_dim)`: None, zeros (new episodes); `episode_start` `(batch,)`
        bool: the episodes that start at this step (their state is zeroed first). The state is
        None for a feed-forward policy; numpy in, numpy out."""
        carried = self.carried()
        if carried is None:
            return self.predict(obs, deterministic, **predict_kwargs), None
        hiddens, shape = carried
        carry_state(hiddens, state, episode_start, shape, self.device)
        action = self.predict(obs, deterministic, **predict_kwargs)
        assert hiddens.value is not None, "set by the recurrent network's step"
        hidden = hiddens.value.clone().view(-1, *shape)
        return action, hidden if isinstance(obs, torch.Tensor) else hidden.cpu().numpy()

    def carried(self) -> tuple[HiddenStates, tuple[int, ...]] | None:
        """A recurrent policy's hidden states and the shape of one batch row of them (None for
        a feed-forward policy)."""
        if self.memory is None or self.hiddens is None:
            return None
        return self.hiddens, (self.memory.state_dim,)

    @property
    def recurrent(self) -> bool:
        """Whether the policy keeps a hidden state from step to step (`recurrent`, agent_rnn)."""
        return self.memory is not None


def reads_mask(encoder: Any) -> bool:
    """Whether an encoder, or one it wraps (`inner`: inside a memory), reads `[observation,
    mask]` rows (`reads_mask`: the masked DQN family's)."""
    while encoder is not None:
        if getattr(encoder, "reads_mask", False):
            return True
        encoder = getattr(encoder, "inner", None)
    return False


def discrete_continuous(action: torch.Tensor, k: int,
                        bounds: tuple[torch.Tensor, torch.Tensor] | None,
                        ) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """Actions as agents see them `(batch, K + C)` -> the K discrete choices int64 and the C
    continuous values rescaled from [-1, 1] to `bounds` (low, high) (None: no continuous part,
    the K components as they are)."""
    if bounds is None:
        return action, None
    low, high = bounds
    return action[:, :k].round().long(), low + (action[:, k:] + 1.0) * 0.5 * (high - low)


def carry_state(hiddens: HiddenStates, state: np.ndarray | torch.Tensor | None,
                episode_start: np.ndarray | torch.Tensor | None, shape: tuple[int, ...],
                device: torch.device) -> None:  # fmt: skip
    """Set `hiddens` to the state a caller carries, `(batch, *shape)` as `step` returned it (None:
    new episodes), zeroed where `episode_start` `(batch,)` bool begins an episode."""
    hiddens.reset()
    if state is None:
        return
    hidden = torch.as_tensor(state if isinstance(state, torch.Tensor) else np.asarray(state))
    if tuple(hidden.shape[1:]) != shape or hidden.dim() != len(shape) + 1:
        raise ValueError(
            f"state must have shape (batch, {', '.join(map(str, shape))}), what `step` "
            f"returned (None for new episodes), got {tuple(hidden.shape)}."
        )
    batch = hidden.shape[0]
    hiddens.keep(hidden.to(device, torch.float32).reshape(-1, shape[-1]))
    if episode_start is not None:
        starts = torch.as_tensor(episode_start if isinstance(episode_start, torch.Tensor)
                                 else np.asarray(episode_start))  # fmt: skip
        per_row = math.prod(shape[:-1])  # sequences per batch row (a multi-agent policy's agents)
        hiddens.restart(starts.to(device, torch.bool).reshape(batch).repeat_interleave(per_row))


def pack_observation(values: Sequence[torch.Tensor], obs_keys: Sequence[tuple]) -> torch.Tensor:
    """A batch of Dict observations, one tensor `(batch, *shape)` per key of `obs_keys`
    (`EnvSpec.obs_keys`), as the env adapter packs them: side by side, each flattened, a
    Discrete one's one-hot, float32 `(batch, state_dim)`."""
    parts = []
    for value, (_, shape, kind) in zip(values, obs_keys, strict=True):
        if kind == "onehot":
            value = nn.functional.one_hot(value.long(), shape[0])
        parts.append(value.reshape(value.shape[0], -1).float())
    return torch.cat(parts, dim=1)


class MultiAgentPolicy(Policy):
    """A trained multi-agent policy (one network shared by the agents, each observation with
    its agent id). `predict(obs, deterministic=True, avail=None)` takes the agents'
    observations of one env `(A, O)` or of a batch of envs `(batch, A, O)`, numpy or torch, and
    optional action masks `(..., A, U)`, and returns their actions `(A,)` / `(batch, A)` (or with
    a last axis `U` of values within the action bounds, for continuous actions). A recurrent
    policy (`recurrent`) keeps its agents' hidden states from one call to the next: call it
    once per step of the same episodes, and `reset()` when they start anew; or carry them
    yourself with `step`."""

    def __init__(self, meta: dict, device: str | torch.device = "cpu") -> None:
        super().__init__(meta, device)
        self.num_agents, self.obs_dim = meta["num_agents"], meta["obs_dim"]
        self._greedy: RecurrentGreedy | None = None
        # VDN / QMIX with agent_rnn: hidden states from call to call
        if isinstance(self.actor, RecurrentQNet):
            from xiaoyarl.agents.multi.recurrent_decomposition import RecurrentGreedy

            self._greedy = RecurrentGreedy(self.actor)

    def reset(self) -> None:
        """Recurrent policies: forget the hidden states (call it when the episodes restart)."""
        super().reset()
        if self._greedy is not None:
            self._greedy.reset()

    @property
    def recurrent(self) -> bool:
        """Whether the agents keep hidden states from step to step (`recurrent`)."""
        return self._greedy is not None or self.memory is not None

    def carried(self) -> tuple[HiddenStates, tuple[int, ...]] | None:
        """The agents' hidden states, `(batch, num_agents, H)` a step (`recurrent`)."""
        if self._greedy is not None:  # VDN's and QMIX's recurrent Q-networks
            return self._greedy.hiddens, (self.num_agents, self._greedy.qnet.state_width)
        if self.memory is None or self.hiddens is None:
            return None
        return self.hiddens, (self.num_agents, self.memory.state_dim)

    def _joint(self, obs: torch.Tensor, avail: torch.Tensor | None, sample: bool) -> torch.Tensor:
        """Actions as agents see them `(E, A[, U])` for a torch batch `(E, A, O)` on the device."""
        from xiaoyarl.agents.multi.common import with_agent_ids

        if self._greedy is not None:  # recurrent: greedy, or epsilon-greedy when sampling
            self._greedy.explore_rate = self.meta.get("explore_rate", Config.explore_rate) * sample
            return self._greedy(obs, avail)
        x = with_agent_ids(obs).flatten(0, 1)
        masks = None if avail is None else avail.flatten(0, 1)
        with self._remembering(x.shape[0]):  # a memory: one hidden state per (env, agent)
            action = self._rows(x, masks, sample)
        return action.view(*obs.shape[:2], *action.shape[1:])

    def _rows(self, x: torch.Tensor, masks: torch.Tensor | None, sample: bool) -> torch.Tensor:
        """Actions for the agents' rows `(E * A, O + A)` (with their ids) and masks."""
        if sample:
            return self._sample(x, masks)
        if isinstance(self.actor, QNet | ActorGumbel):  # the best available action
            actor: Any = self.actor
            scores = actor.q_values(x) if isinstance(actor, QNet) else actor.logits(x)
            if masks is not None:
                scores = scores.masked_fill(~masks, -torch.inf)
            return scores.argmax(-1)
        if isinstance(self.actor, ActorDiscretePPO):
            return self.actor(x, masks)
        return self.actor(x)

    @torch.no_grad()
    def act_normalized(self, obs: torch.Tensor, avail: torch.Tensor | None = None):
        """Every agent's greedy action, in the networks' units (`[-1, 1]` when continuous)."""
        return self._joint(obs, avail, sample=False)

    def vec_policy(self, deterministic: bool = True) -> Callable[..., torch.Tensor]:
        """`(obs (E, A, O)[, avail]) -> joint actions` as agents see them (see `Policy`)."""
        return torch.no_grad()(lambda obs, avail=None: self._joint(obs, avail, not deterministic))

    def predict(
        self,
        obs: np.ndarray | torch.Tensor | dict,
        deterministic: bool = True,
        avail: np.ndarray | torch.Tensor | None = None,
    ) -> np.ndarray | torch.Tensor:
        """Joint actions for observations `(batch, num_agents, obs_dim)` (or one `(num_agents,
        obs_dim)`), in the env's units: numpy in, numpy out; `avail` masks unavailable actions."""
        if isinstance(obs, dict):
            raise ValueError("multi-agent policies take the agents' observations as an array.")
        is_numpy = not isinstance(obs, torch.Tensor)
        x = torch.as_tensor(np.asarray(obs) if is_numpy else obs, dtype=torch.float32)
        single = x.dim() == 2
        if x.shape[-2:] != (self.num_agents, self.obs_dim) or x.dim() > 3:
            raise ValueError(
                f"policy expects observations of shape (batch, {self.num_agents}, "
                f"{self.obs_dim}) or ({self.num_agents}, {self.obs_dim}), got {tuple(x.shape)}."
            )
        x = x.to(self.device).reshape(-1, self.num_agents, self.obs_dim)
        masks = None
        if avail is not None:
            masks = torch.as_tensor(np.asarray(avail)).to(self.device, torch.bool)
            masks = masks.reshape(x.shape[0], self.num_agents, -1)
        with torch.no_grad():
            action = self._joint(x, masks, sample=not deterministic)
        if not self.if_discrete:
            action = self.low + (action + 1.0) * 0.5 * (self.high - self.low)
        if single:
            action = action[0]
        return action.cpu().numpy() if is_numpy else action


def _saved_before_wrappers(meta: dict, actor: type[nn.Module]) -> list[dict]:
    """The wrappers around the encoder of a policy saved before they were (`encoder_wrappers`):
    a recurrent memory (`recurrent`, `recurrent_dim`), the masked DQN family's slice."""
    wrappers = []
    if meta.get("recurrent"):
        memory = {"hidden_dim": meta["recurrent_dim"], "kind": meta["recurrent"]}
        wrappers.append({"module": "xiaoyarl.core.recurrent", "class": "RecurrentEncoder",
                         "kwargs": memory})  # fmt: skip
    if meta.get("action_mask") and issubclass(actor, QNet):  # read [observation, mask] rows
        wrappers.append({"module": "xiaoyarl.agents.masked", "class": "MaskSlice",
                         "kwargs": {"obs_dim": meta["state_dim"]}})  # fmt: skip
    return wrappers


def _saved_before_kwargs(meta: dict) -> dict:
    """The actor's constructor arguments of a policy saved before they were (`actor_kwargs`):
    none, or a C51 network's atoms and support, read from its weights."""
    support = meta["actor"].get("support")
    if support is None:
        return {}
    return {"layer_norm": False, "num_atoms": len(support), "v_min": float(support[0]),
            "v_max": float(support[-1])}  # fmt: skip


def load_policy(run_dir: str | Path, device: str | torch.device = "cpu") -> Policy:
    """The best policy a run saved (`run_dir/actor.pt`), ready for inference (a
    `MultiAgentPolicy` for a multi-agent run)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"run folder {run_dir} does not exist.")
    meta = load_plain(run_dir / "actor.pt", what="policy file")
    return (MultiAgentPolicy if "num_agents" in meta else Policy)(meta, device)


class PolicyEnsemble(Policy):
    """Several trained policies of one env acting as one (an averaged policy, for seeds or
    population members trained apart). Deterministic actions: the mean of the members'
    actions for continuous envs (each in [-1, 1] as agents see them, so the mean is too), the
    members' majority vote for discrete ones (a tie goes to the first member's choice when it
    is among the tied, else to the lowest index). `deterministic=False`: each observation is
    acted on by one member drawn at random, exploring as that member does. Unlike
    `xiaoyarl fuse`, which averages parameters into one network (sound for agents that share
    an ancestry, as a population's do), this averages what the networks do, so the members
    may have been trained from different seeds. Single-agent, feed-forward policies only."""

    def __init__(self, members: Sequence[Policy], names: Sequence[str] | None = None) -> None:
        names = list(names) if names is not None else [f"policy {i}" for i in range(len(members))]
        if not members:
            raise ConfigError("an ensemble needs at least one policy.")
        for member, name in zip(members, names, strict=True):
            if isinstance(member, MultiAgentPolicy | PolicyEnsemble):
                raise ConfigError(
                    f"{name}: ensembles take single-agent policies (not a multi-agent policy or "
                    "another ensemble)."
                )
        first = members[0]
        for member, name in zip(members[1:], names[1:], strict=True):
            differ = [key for key in ("env_id", "state_dim", "action_dim", "if_discrete",
                                      "action_low", "action_high")
                      if member.meta.get(key) != first.meta.get(key)]  # fmt: skip
            if differ:
                raise ConfigError(
                    f"{name} and {names[0]} act in different envs ({', '.join(differ)} differ): "
                    "an ensemble's members must share the env."
                )
        self.members = list(members)
        self._bind(first.meta, first.device)  # no actor of its own: the members act

    @torch.no_grad()
    def act_normalized(self, state: torch.Tensor) -> torch.Tensor:
        """The ensemble's action in the networks' units: the members' mean, or majority vote."""
        actions = torch.stack([m.act_normalized(state) for m in self.members])  # (K, batch, ...)
        if not self.if_discrete:  # in float64: K copies of one policy give its action exactly
            return actions.double().mean(0).to(actions.dtype)
        n = self.meta["action_dim"]
        votes = torch.nn.functional.one_hot(actions.long(), n).sum(0).float()
        votes += 0.5 * torch.nn.functional.one_hot(actions[0].long(), n)  # ties: the first's
        return votes.argmax(-1)

    @torch.no_grad()
    def sample_normalized(self, state: torch.Tensor) -> torch.Tensor:
        """One randomly chosen member's sampled action per observation."""
        actions = torch.stack([m.sample_normalized(state) for m in self.members])
        pick = torch.randint(len(self.members), (state.shape[0],), device=state.device)
        return actions[pick, torch.arange(state.shape[0], device=state.device)]


def load_ensemble(
    run_dirs: Sequence[str | Path], device: str | torch.device = "cpu"
) -> PolicyEnsemble:
    """The best policies of several runs of one env, acting as one (`PolicyEnsemble`)."""
    if isinstance(run_dirs, str | Path):
        raise ConfigError("load_ensemble takes a list of run folders; use load_policy for one.")
    members = [load_policy(run_dir, device) for run_dir in run_dirs]
    return PolicyEnsemble(members, [str(run_dir) for run_dir in run_dirs])


def evaluate(
    run_dir: str | Path | Sequence[str | Path],
    episodes: int = 10,
    seed: int = 12_345,
    deterministic: bool | None = None,
) -> dict:
    """Score a run's best policy on `episodes` fresh episodes of its env (same backend), or,
    given several run folders, their ensemble (`load_ensemble`) on the first run's env; with
    the best actions, or (`deterministic=False`) sampled as the agent explores; None: as the
    (first) run evaluated (its `eval_deterministic`).

    Returns {"mean", "std", "returns"}; episodes run as parallel sub-envs."""
    from xiaoyarl.agents.settings import load_saved_config  # the agents: a run's own config
    from xiaoyarl.envs.build import build_env
    from xiaoyarl.train.evaluator import run_episodes

    run_dirs = [Path(run_dir)] if isinstance(run_dir, str | Path) else [Path(d) for d in run_dir]
    if not run_dirs:
        raise ConfigError("evaluate needs at least one run folder.")
    policy = load_policy(run_dirs[0]) if len(run_dirs) == 1 else load_ensemble(run_dirs)
    configs = []
    for folder in run_dirs:
        config_path = folder / "config.yaml"
        if not config_path.is_file():
            raise CheckpointError(f"{folder} has no config.yaml: it is not a xiaoyarl run folder.")
        configs.append(load_saved_config(config_path))
    config = configs[0]
    for folder, other in zip(run_dirs[1:], configs[1:], strict=True):
        if (other.env_id, other.env_kwargs) != (config.env_id, config.env_kwargs):
            raise ConfigError(
                f"{folder} was trained on {other.env_id} {other.env_kwargs or ''} and "
                f"{run_dirs[0]} on {config.env_id} {config.env_kwargs or ''}: an ensemble is "
                "evaluated on one env."
            )
    with build_env(config, episodes, torch.device("cpu"), config.backend, seed,
                   evaluation=True) as env:  # fmt: skip
        policy.reset()
        if deterministic is None:
            deterministic = config.eval_deterministic
        returns = run_episodes(env, policy.vec_policy(deterministic), seed=seed)
    return {
        "mean": returns.mean().item(),
        "std": returns.std(unbiased=False).item(),
        "returns": returns.tolist(),
    }
