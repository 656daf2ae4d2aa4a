"""`AgentBase`: what every agent shares (optimizer step, checkpoint state, policy export)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.core.reduce import Local

if TYPE_CHECKING:
    from xiaoyarl.agents import protocols
    from xiaoyarl.config import Config
    from xiaoyarl.core.encoders import Encoder
    from xiaoyarl.envs.base import EnvSpec, VecEnv
    from xiaoyarl.envs.multi.base import MultiAgentEnvSpec


class TorchKit:
    """Adam (its fused kernel) and gradient clipping as torch gives them: what an agent steps
    with unless the layer that builds it supplies another kit; the trainer gives
    `core.optim.LeanKit` (the same arithmetic, less Python around it)."""

    def optimizer(self, kind: str, params: Iterable[nn.Parameter], lr: float,
                  weight_decay: float = 0.0) -> protocols.Optimizer:  # fmt: skip
        """torch's AdamW (fused), with the eps the agents use: Adam's arithmetic, bit for bit,
        where `weight_decay` is 0; or (`kind` "radam") torch's RAdam, as `core/optim.py`'s."""
        if kind == "radam":  # (its decay decoupled: none where weight_decay is 0)
            return torch.optim.RAdam(params, lr, weight_decay=weight_decay,
                                     decoupled_weight_decay=True)  # fmt: skip
        return torch.optim.AdamW(params, lr=lr, eps=1e-5, weight_decay=weight_decay, fused=True)

    def clip_grad_norm(self, params: list[nn.Parameter], max_norm: float) -> None:
        """Clip the gradients of `params` to a total norm of `max_norm`, in place."""
        nn.utils.clip_grad_norm_(params, max_norm, foreach=True)


class Eager:
    """Runs each update as it is."""

    def __call__(self, update: Callable[[Any], Any], inputs: Any) -> Any:
        """Run `update(inputs)` as it is, eagerly."""
        return update(inputs)

    def reset(self) -> None:
        """Nothing to forget: an eager update keeps no state."""


class AgentBase:
    """An agent owns its networks, optimizers and normalizers, explores a `VecEnv` and updates.

    Subclasses set `if_off_policy` and `if_discrete` and implement `explore_env` and
    `update_net` (off-policy agents get both from `AgentOffPolicy`). Networks that make up the
    training state are listed in `self.nets`, optimizers in `self.optimizers`; `state_dict`
    saves both and the state the next rollout starts from.

    Three things are supplied from above and default to one plain process: `reducer`, the
    whole-batch statistics of an update (`core/reduce.py`); `update_runner`, how an update is
    run; `auxiliary`, an extra term of the actor's loss.
    """

    if_off_policy: ClassVar[bool]
    if_discrete: ClassVar[bool]
    if_multi_agent: ClassVar[bool] = False  # acts in multi-agent envs (`agents/multi/`)
    # Why an algorithm with agents of one kind of action only (`if_discrete`) cannot take the
    # other: the mathematics it rests on, which the registry's refusal and the docs' matrix state.
    action_reason: ClassVar[str] = ""
    # Why it cannot take multi-discrete actions, where an agent of discrete actions cannot.
    multi_discrete_reason: ClassVar[str] = ""
    # Why it cannot take hybrid actions (discrete and continuous parts), where an agent of
    # continuous actions cannot.
    hybrid_reason: ClassVar[str] = ""
    # The algorithm-specific Config fields this agent reads (others of that kind it ignores, and
    # setting them gets a warning); general fields (gamma, net_dims, ...) are not listed.
    config_fields: ClassVar[frozenset[str]] = frozenset()
    # What the layers above read instead of algorithm names: whether the H-term add-on extends
    # this agent's actor (`agents/hterm.py`), its default search space under `configs/tune/`,
    # the settings each member of a vmapped population may have its own value of (none: no
    # vmapped form).
    takes_h_term: ClassVar[bool] = False
    tune_space: ClassVar[str | None] = None
    member_fields: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, spec: EnvSpec, config: Config, device: torch.device, learner: bool = True,
                 kit: protocols.OptimizerKit | None = None) -> None:  # fmt: skip
        if spec.if_discrete != self.if_discrete:
            kind = "discrete" if spec.if_discrete else "continuous"
            raise ValueError(f"{type(self).__name__} cannot act in the {kind} env {spec.name}")
        self.spec = spec
        # the spec of the env the agent acts in (a multi-agent agent's is its `multi_spec`; its
        # `spec` is one agent's view of it)
        self.env_spec: EnvSpec | MultiAgentEnvSpec = getattr(self, "multi_spec", spec)
        self.config = config
        self.device = device
        self.nets: dict[str, nn.Module] = {}
        # None each in an acting-only copy
        self.optimizers: dict[str, protocols.Optimizer | None] = {}
        self.last_state: torch.Tensor | None = None  # (num_envs, state_dim): exploring resumes here
        # the running observation normaliser every network of the agent applies to its input
        # (state_norm None, not yet resolved, has always meant off); vectors only: the encoders
        # of other shapes scale uint8 images to [0, 1] (`make_encoder`)
        normalise = bool(config.state_norm) and len(spec.obs_shape) == 1
        self.state_norm = RunningNorm(spec.state_dim, normalise, config.state_norm_clip).to(device)
        self.actor: nn.Module  # the policy; `actor(state)` is the deterministic action in [-1, 1]
        self.explored = 0  # env steps taken so far (summed over sub-envs)
        self.updates = 0  # gradient steps taken so far (off-policy)
        # learner=False: an acting-only copy (the parallel runner's workers and evaluator), with
        # no replay buffer and no optimizers
        self.learner = learner
        self.kit = kit or TorchKit()  # how optimizers are built and gradients clipped
        self.reducer: protocols.Reducer = Local()
        self.update_runner: protocols.UpdateRunner = Eager()
        self.auxiliary: protocols.AuxiliaryLoss | None = None

    def make_encoder(self, layer_norm: bool = False) -> Encoder | RunningNorm:
        """The encoder a new network reads its observations through (`core/encoders.py`): for
        vectors the shared `state_norm` itself; for images a new CNN on the agent's device
        (with LayerNorm where `layer_norm`). Sets `feature_dim`, the width of what it returns."""
        encoder: Encoder | RunningNorm = self.state_norm
        vector = len(self.spec.obs_shape) == 1 and not self.spec.obs_keys
        if not vector or self.config.encoder not in ("auto", "mlp"):
            from xiaoyarl.core.encoders import make_encoder  # not loaded where all are vectors

            encoder = make_encoder(self.config.encoder, self.spec, self.state_norm, layer_norm)
        self.feature_dim = encoder.out_dim
        return encoder.to(self.device)

    # --- exploring: one loop for every agent ---
    # the time-major data `explore_env` returns (a NamedTuple class)
    rollout_class: ClassVar[Callable[..., protocols.Steps]]

    @torch.no_grad()
    def explore_env(self, env: VecEnv, horizon_len: int) -> protocols.Steps:
        """Step `env` for `horizon_len` steps from `self.last_state`; return the time-major
        rollout: what `record` kept of each step, stacked (`rollout_class`)."""
        state = self.last_state
        assert state is not None, "the runner sets last_state (`observe`) before exploring"
        steps = []
        for _ in range(horizon_len):
            action, kept = self.explore_step(state)
            next_state, reward, terminal, truncate, info = env.step(action)
            steps.append(self.record(kept, reward, terminal, truncate, info))
            state = self.next_observation(next_state, info)
            self.explored += env.spec.num_envs
        self.last_state = state
        return self.rollout_class(*(torch.stack(column) for column in zip(*steps, strict=True)))

    # --- what an algorithm implements ---
    def explore_step(self, state: torch.Tensor) -> tuple[torch.Tensor, tuple]:
        """The env action for a batch of states `(num_envs, ...)`, and what `record` keeps of
        this step (the state, the action as learnt from, its log-probability, ...)."""
        raise NotImplementedError

    def record(self, kept: tuple, reward: torch.Tensor, terminal: torch.Tensor,
               truncate: torch.Tensor, info: dict) -> tuple[torch.Tensor, ...]:  # fmt: skip
        """One step's fields of `rollout_class`, from what `explore_step` kept and what the
        env returned (`info["final_state"]`: the state the step reached, before any reset)."""
        raise NotImplementedError

    def update_net(self, rollout: Any) -> dict[str, torch.Tensor]:
        """Learn from a rollout (of the agent's own `rollout_class`, which each agent's
        signature names); return the update's named scalars (its losses)."""
        raise NotImplementedError

    def update_cycle(self) -> int | None:
        """The number of updates (off-policy: gradient steps) after which their Python-side
        choices (which networks they update) repeat; None when an update's choices depend on
        values read back from the device."""
        return 1

    def explore_logprob(self, states: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """log-density `(n,)` of stored actions under the exploring policy (agents that give
        it can take an auxiliary actor loss such as the H-term)."""
        raise NotImplementedError

    @classmethod
    def check(cls, config: Config) -> None:
        """Refuse, with a `ConfigError` naming the field and what to do, what this algorithm
        cannot train with `config` (`agents/settings.py` runs it after the checks of fields)."""

    @classmethod
    def defaults(cls, config: Config, batched: bool, device_type: str) -> dict:
        """This algorithm's values for the fields of `config` left at None (num_envs,
        horizon_len, batch_size, ...), for a batched env or not, on device type "cpu" or
        "cuda" (`agents/settings.py` applies them)."""
        raise NotImplementedError(f"{cls.__name__} gives no defaults")

    def observe(self, state: torch.Tensor, info: dict) -> torch.Tensor:
        """What exploring resumes from (`last_state`) after a reset that returned `state` and
        `info` (agents that remember across steps start afresh here)."""
        return self.next_observation(state, info)

    def next_observation(self, state: torch.Tensor, info: dict) -> torch.Tensor:
        """What the next exploring step acts on, from the state and info an env returned: the
        state itself (multi-agent agents also keep the global state and masks)."""
        return state

    # --- the auxiliary loss, when one is plugged in ---
    def observe_auxiliary(self, rollout: protocols.Steps) -> None:
        """Show the auxiliary loss the rollout (it may keep its episodes)."""
        if self.auxiliary is not None:
            self.auxiliary.observe(rollout, self.reducer)

    def auxiliary_loss(self) -> tuple[torch.Tensor | float, dict[str, torch.Tensor]]:
        """The auxiliary term of the actor's loss and its log (0 and nothing without one)."""
        if self.auxiliary is None:
            return 0.0, {}
        return self.auxiliary.loss(self.explore_logprob)

    # --- shared mechanics ---
    def run_update(self, update: Callable[[Any], Any], inputs: Any) -> Any:
        """`update(inputs)`, run by `update_runner`."""
        return self.update_runner(update, inputs)

    def make_optimizer(self, net: nn.Module, decay: bool = True) -> protocols.Optimizer | None:
        """The config's `optimizer` (Adam, or RAdam) over the net's parameters, as the agent's
        `kit` builds it, with the config's `weight_decay` unless `decay` is False (AdamW's
        decoupled decay); None for an acting-only copy."""
        if not self.learner:
            return None
        lr, decay_by = self.config.learning_rate, self.config.weight_decay if decay else 0.0
        assert lr is not None, "resolve_config sets learning_rate"
        return self.kit.optimizer(self.config.optimizer, net.parameters(), lr, decay_by)

    def optimizer_step(self, optimizer: protocols.Optimizer | None, net: nn.Module,
                       loss: torch.Tensor) -> None:  # fmt: skip
        """Backward, clip the global gradient norm to `clip_grad_norm`, and step."""
        self.optimizer_steps(loss, (optimizer, net))

    def optimizer_steps(self, loss: torch.Tensor,
                        *pairs: tuple[protocols.Optimizer | None, nn.Module]) -> None:  # fmt: skip
        """One backward pass through `loss`, a sum of losses of networks that share no
        parameters, then per network: clip its gradient norm to `clip_grad_norm` and step its
        optimizer. The same update as one `optimizer_step` per network, with one autograd pass.
        The gradients are the whole batch's (`reducer`)."""
        optimizers = [optimizer for optimizer, _ in pairs if optimizer is not None]
        assert len(optimizers) == len(pairs), "an acting-only copy (learner=False) never updates"
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.reducer.average_gradients([o.param_groups[0]["params"] for o in optimizers])
        for optimizer in optimizers:
            self.kit.clip_grad_norm(optimizer.param_groups[0]["params"], self.config.clip_grad_norm)
            optimizer.step()

    @torch.no_grad()
    def act(self, state: torch.Tensor) -> torch.Tensor:
        """Deterministic env action for a batch of states `(batch, state_dim)`."""
        return self.actor(state)

    def acting_nets(self) -> dict[str, nn.Module]:
        """The networks exploring runs, by name in `nets` (a runner's worker processes keep
        copies of them, with the learner's newest weights): the actor."""
        return {"actor": self.actor}

    def evaluation_policy(self) -> Callable[..., torch.Tensor]:
        """The policy the evaluator runs: `act`, or where `eval_deterministic` is false the
        actor's exploring action; a recurrent agent's keeps hidden states between steps and has
        a `reset()` for each new episode batch."""
        if self.config.eval_deterministic:
            return self.act
        from xiaoyarl.agents.acting import sampling_policy  # loaded only where it samples

        return sampling_policy(self.actor, self.config)

    # --- checkpoint state (`agents/state.py`: loaded where a run keeps its state) ---
    def state_dict(self) -> dict:
        """The agent's whole training state as plain data (tensors, dicts, numbers): its
        networks, optimizers, counters, where exploring resumes and its auxiliary loss's."""
        from xiaoyarl.agents.state import training_state

        return training_state(self)

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned: networks, optimizers, where exploring resumes."""
        from xiaoyarl.agents.state import load_training_state

        load_training_state(self, state)

    def sub_env_state(self) -> dict:
        """The part of the training state that belongs to this agent's own sub-envs: where
        exploring resumes (and what several learners keep per learner)."""
        from xiaoyarl.agents.state import sub_env_state

        return sub_env_state(self)

    def load_sub_env_state(self, state: dict) -> None:
        """Restore what `sub_env_state` returned (the last observation of each sub-env)."""
        from xiaoyarl.agents.state import load_sub_env_state

        load_sub_env_state(self, state)
