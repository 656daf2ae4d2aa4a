"""Several learners over torch.distributed: K processes ("ranks") train one agent together.

Launch with torch's own launcher, on one machine or several:

    torchrun --nproc_per_node K -m xiaoyarl train ALGO ENV ...
    torchrun --nnodes 2 --nproc_per_node K --rdzv-backend c10d --rdzv-endpoint HOST:PORT \\
        -m xiaoyarl train ALGO ENV ...          # the same command on every machine
    xiaoyarl train ALGO ENV --learners K       # one machine: launches the K ranks itself

Data parallelism, as one process with K times the sub-envs:
- Each rank steps its own vectorized envs (seeded apart) with its own exploration randomness
  and, off-policy, fills its own replay buffer (a shard of the whole).
- Every rank starts from rank 0's weights. After every backward pass the gradients are
  averaged over the ranks (one all-reduce of the flattened gradients), so the weights stay
  identical. Statistics an update takes over its batch are taken over all ranks' batches:
  observation and reward normalisers, PPO's advantage normalisation. The update's random
  numbers (PPO's mini-batch order, SAC's and TD3's noise, REDQ's critic subsets) come from a
  random state the ranks share, drawn for the union of their batches, each rank keeping its
  part. Choices an update makes from its data are made alike on every rank, from statistics
  of the union (ModSAC's actor schedule reads the critic loss averaged over the ranks; the
  H-term starts once every rank's trajectories suffice, and draws its windows from each
  rank's own generator, `agents/hterm.py`). So K ranks compute the update of one process on
  the union of their data (tested to 1e-6 for PPO and SAC), with `batch_size` transitions
  per rank per mini-batch or gradient step: the effective batch is K x batch_size.
- Gloo on a CPU, NCCL on GPUs (one per rank: `cuda:LOCAL_RANK`). CUDA graphs are not used.
- Rank 0 evaluates, prints, and writes the run folder (recorder, learning curve, `actor.pt`,
  `checkpoint/state.pt`, atomically, as one process does); each other rank writes what is its
  own (replay shard, env state, exploration randomness) to `checkpoint/rank<R>.pt` at the same
  steps. `--resume` restarts every rank from them. Env steps are counted over all ranks.
- A rank that dies ends the job: torch's launcher stops the others and names the failed rank
  (`--learners` says it in one line). `torchrun --max-restarts R` starts the ranks again, and
  they resume from the last checkpoint by themselves.
"""

from __future__ import annotations

import datetime
import os
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from xiaoyarl.agents import AgentBase
from xiaoyarl.core import nets, off_policy_nets
from xiaoyarl.core.reduce import MiniBatches
from xiaoyarl.errors import XiaoyaError
from xiaoyarl.train.checkpoint import load_plain, save_atomic
from xiaoyarl.train.loop import TrainLoop

if TYPE_CHECKING:
    from xiaoyarl.agents.protocols import Steps

# Stop reasons in the order of precedence when ranks disagree (the largest code wins).
STOP_REASONS = ("max_steps", "target", "callback", "stop_file", "diverged", "SIGTERM", "SIGINT")
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=5)  # a hung rank ends the job after this


class LearnerError(XiaoyaError):
    """A learner rank failed or the ranks lost contact."""


def rank_from_environment() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) when this process is a rank of a torch.distributed job
    of several ranks (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK), else None."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world < 2 or "RANK" not in os.environ:
        return None
    return int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0"))


def restarted_by_launcher() -> bool:
    """Whether torchrun restarted this job after a failure (`--max-restarts`)."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0


class DataParallel:
    """This rank's part in a data-parallel group: the collectives an update needs."""

    def __init__(self, rank: int, world_size: int, device: torch.device, seed: int) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device
        generator = torch.Generator().manual_seed(seed)
        self.shared_cpu = generator.get_state()  # the update's random state, alike on all ranks
        self.shared_cuda = None
        if device.type == "cuda":
            self.shared_cuda = torch.Generator(device=device).manual_seed(seed).get_state()
        off_policy_nets.DATA_SHARD[:] = [rank, world_size]

    # --- randomness ---
    @contextmanager
    def shared_random(self) -> Iterator[None]:
        """Run a block (an update) on the ranks' shared random state, then return to this
        rank's own (its exploration)."""
        own_cpu = torch.get_rng_state()
        torch.set_rng_state(self.shared_cpu)
        own_cuda = None
        if self.shared_cuda is not None:
            own_cuda = torch.cuda.get_rng_state(self.device)
            torch.cuda.set_rng_state(self.shared_cuda, self.device)
        try:
            yield
        finally:
            self.shared_cpu = torch.get_rng_state()
            torch.set_rng_state(own_cpu)
            if own_cuda is not None:
                self.shared_cuda = torch.cuda.get_rng_state(self.device)
                torch.cuda.set_rng_state(own_cuda, self.device)

    # --- collectives of an update ---
    def average_gradients(self, groups: Sequence[Sequence[torch.nn.Parameter]]) -> None:
        """Replace every gradient by its mean over the ranks: one all-reduce of all of them,
        flattened (a missing gradient counts as zeros, so every rank sends the same layout)."""
        params = [p for group in groups for p in group]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world_size
        offset = 0
        for p, g in zip(params, grads, strict=True):
            p.grad = flat[offset : offset + g.numel()].view_as(g)
            offset += g.numel()

    def average(self, x: torch.Tensor) -> torch.Tensor:
        """The mean over the ranks of `x` (a statistic of each rank's batch, such as its loss):
        the union's, alike on every rank, for decisions every rank must take alike."""
        total = x.detach().clone()
        dist.all_reduce(total)
        return total / self.world_size

    def every(self, flag: bool) -> bool:
        """Whether `flag` holds on every rank (so that all switch something on together)."""
        value = torch.tensor([int(flag)], device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MIN)
        return bool(value.item())

    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Mean `(dim,)`, population variance `(dim,)` and size of the union of every rank's
        batch `x` `(batch, dim)` (all ranks hold batches of the same size)."""
        n = x.shape[0] * self.world_size
        sums = torch.cat([x.double().sum(0), x.double().square().sum(0)])
        dist.all_reduce(sums)
        mean = sums[: x.shape[1]] / n
        var = (sums[x.shape[1] :] / n - mean.square()).clamp(min=0)
        return mean.to(x.dtype), var.to(x.dtype), float(n)

    def mean_std(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and (unbiased) standard deviation of the union of every rank's values `x`."""
        n = x.numel() * self.world_size
        sums = torch.stack([x.double().sum(), x.double().square().sum()])
        dist.all_reduce(sums)
        mean = sums[0] / n
        var = (sums[1] - n * mean.square()) / max(n - 1, 1)
        return mean.to(x.dtype), var.clamp(min=0).sqrt().to(x.dtype)

    def local_part(self, indices: torch.Tensor, num_envs: int) -> torch.Tensor:
        """The entries of `indices` into the union of the ranks' time-major rollouts that are
        this rank's, as indices into its own rollout. The union puts the ranks' sub-envs side by
        side: union index t * (K * N) + r * N + n is rank r's local index t * N + n."""
        width = self.world_size * num_envs
        column = indices % width
        mine = column // num_envs == self.rank
        return (indices[mine] // width) * num_envs + column[mine] % num_envs

    def minibatches(
        self, size: int, num_envs: int, batch_size: int, repeat_times: float, device: torch.device
    ) -> MiniBatches:
        """The mini-batches one process would cut from the union of the ranks' rollouts, with
        `batch_size` transitions per rank each: drawn from the union with one permutation the
        ranks share (`shared_random`), each rank keeping its own transitions; a mini-batch's
        mean is this rank's share of the union's, so that the averaged gradient is the union's."""
        world = self.world_size
        union = size * world
        batch_size = min(batch_size, size)  # per rank
        step = batch_size * world
        num_updates = max(1, int(repeat_times * union / step))
        num_perms = -(-num_updates * step // union)
        order = torch.cat([torch.randperm(union, device=device) for _ in range(num_perms)])
        indices = [self.local_part(order[i * step : (i + 1) * step], num_envs)
                   for i in range(num_updates)]  # fmt: skip
        return MiniBatches(indices, lambda x: x.sum() / batch_size)

    # --- an update as a whole ---
    def __call__(self, update: Callable[[Any], Any], inputs: Any) -> Any:
        """Run an agent's update on the ranks' shared random state (the agent's update runner)."""
        with self.shared_random():
            return update(inputs)

    def reset(self) -> None:
        """Nothing captured to forget when the agent's state is replaced."""

    def attach(self, agent: AgentBase) -> None:
        """Share `agent`'s updates with the other ranks: its whole-batch statistics (advantage
        statistics, mini-batches, averaged gradients, normaliser moments) are taken over every
        rank's data, and its updates draw their random numbers alike on every rank. Each rank's
        auxiliary objective (the H-term) draws from a stream of its own."""
        agent.reducer = self
        agent.update_runner = self
        for net in agent.nets.values():
            for module in net.modules():
                if isinstance(module, nets.RunningNorm):
                    module.moments = self.moments
        agent.state_norm.moments = self.moments
        if agent.auxiliary is not None:
            agent.auxiliary.join(agent.config.seed, self.rank)

    def share(self, agent: AgentBase) -> None:
        """Make `agent` this rank's part of the job: rank 0's weights (`broadcast_agent`), its
        updates shared (`attach`)."""
        self.broadcast_agent(agent)
        self.attach(agent)

    # --- keeping the ranks together ---
    def broadcast_agent(self, agent: AgentBase) -> None:
        """Every network's parameters and buffers from rank 0, on every rank."""
        with torch.no_grad():
            for net in agent.nets.values():
                for tensor in net.state_dict().values():
                    dist.broadcast(tensor, src=0)

    def agree(self, stop_reason: str) -> str:
        """The stop reason of the rank with the strongest one (any rank's signal stops all)."""
        code = torch.tensor([STOP_REASONS.index(stop_reason)], device=self.device)
        dist.all_reduce(code, op=dist.ReduceOp.MAX)
        return STOP_REASONS[int(code.item())]

    def state_dict(self) -> dict:
        state = {"shared_cpu": self.shared_cpu}
        if self.shared_cuda is not None:
            state["shared_cuda"] = self.shared_cuda
        return state

    def load_state_dict(self, state: dict) -> None:
        self.shared_cpu = state["shared_cpu"]
        if self.shared_cuda is not None and "shared_cuda" in state:
            self.shared_cuda = state["shared_cuda"]


def start(device: torch.device, rank: int, world: int, seed: int) -> DataParallel:
    """Join the torch.distributed job (gloo on a CPU, NCCL on GPUs) through the store the
    launcher gives (MASTER_ADDR:MASTER_PORT), under a key prefix of its own for each restart:
    after `--max-restarts` brought the job back, the store may still hold the addresses the
    dead ranks published, and a new rank must not try to connect to them."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        store: dist.Store = dist.TCPStore(
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
            is_master=rank == 0 and not agent_store, timeout=COLLECTIVE_TIMEOUT,
        )  # fmt: skip
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        store = dist.PrefixStore(f"xiaoyarl/attempt-{attempt}", store)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                timeout=COLLECTIVE_TIMEOUT)  # fmt: skip
    return DataParallel(rank, world, device, seed + 7919)


def stop() -> None:
    """Leave the job (after the last collective)."""
    if dist.is_initialized():
        dist.destroy_process_group()
    off_policy_nets.DATA_SHARD[:] = [0, 1]


class DistributedLoop(TrainLoop):
    """`TrainLoop` for one rank: env steps counted over all ranks, stops agreed by all,
    evaluation and the run folder on rank 0, each rank's own state in its checkpoint shard."""

    def __init__(self, *args: Any, data_parallel: DataParallel, **kwargs: Any) -> None:
        # `args`, `kwargs`: TrainLoop's own
        super().__init__(*args, **kwargs)
        self.dp = data_parallel
        self.main = data_parallel.rank == 0
        self.shard_path = self.ckpt_path.parent / f"rank{data_parallel.rank}.pt"

    def count_steps(self, rollout: Steps) -> int:
        return rollout.rewards.numel() * self.dp.world_size

    def collect(self) -> Steps:
        rollout = super().collect()
        # schedules (learning_starts, epsilon) count the env steps of all ranks
        self.agent.explored += rollout.rewards.numel() * (self.dp.world_size - 1)
        return rollout

    def agree_on_stop(self, stop_reason: str) -> str:
        return self.dp.agree(stop_reason)

    def request_evaluation(self, final: bool = False) -> None:
        if self.main:
            super().request_evaluation(final)

    def truncate_records(self, step: int) -> None:
        if self.main:
            super().truncate_records(step)

    def close_evaluator(self) -> None:
        if self.main:
            super().close_evaluator()

    def evaluator_state(self) -> dict | None:
        return super().evaluator_state() if self.main else None

    def load_evaluator_state(self, state: dict | None) -> None:
        if self.main and state is not None:
            super().load_evaluator_state(state)

    # --- checkpoints: the main one on rank 0, every rank's own part in its shard ---
    def state_dict(self) -> dict:
        state = super().state_dict()
        state["data_parallel"] = self.dp.state_dict()
        state["world_size"] = self.dp.world_size
        return state

    def shard_state(self) -> dict:
        """What only this rank knows: its replay shard, envs, exploration randomness."""
        return {
            "total_steps": self.total_steps,
            "agent": self.agent.sub_env_state(),
            "env": self.env.state_dict(),
            "episodes": self.episodes.state_dict(),
            "rng": torch.get_rng_state(),
            "cuda_rng": (torch.cuda.get_rng_state(self.agent.device)
                         if self.agent.device.type == "cuda" else None),
        }  # fmt: skip

    def save(self, state: dict | None = None) -> None:
        if self.main:
            super().save(state)
        else:
            save_atomic(self.shard_state(), self.shard_path)
            self.saved_step = self.total_steps

    def load(self, checkpoint: dict) -> None:
        super().load(checkpoint)  # the shared state (and rank 0's own)
        if "data_parallel" in checkpoint:
            self.dp.load_state_dict(checkpoint["data_parallel"])
        if self.main:
            return
        shard = load_plain(self.shard_path) if self.shard_path.is_file() else None
        if shard is None or shard["total_steps"] != self.total_steps:
            # no shard of this step (another number of ranks, or a crash between the writes):
            # this rank's envs start new episodes; its replay buffer (and running returns)
            # start as a copy of rank 0's
            self.reset_envs()
            self.episodes.reset()
            return
        self.agent.load_sub_env_state(shard["agent"])
        if shard["env"]:
            self.env.load_state_dict(shard["env"])
        else:
            self.reset_envs()
        self.episodes.load_state_dict(shard["episodes"])
        torch.set_rng_state(shard["rng"])
        if shard["cuda_rng"] is not None and self.agent.device.type == "cuda":
            torch.cuda.set_rng_state(shard["cuda_rng"], self.agent.device)

    def reset_envs(self) -> None:
        """This rank's envs start new episodes (seeded by step and rank)."""
        seed = self.config.seed + self.total_steps + 1000 * self.dp.rank
        state, info = self.env.reset(seed=seed)
        self.agent.last_state = self.agent.observe(state, info)

    def save_after_failure(self, error: BaseException) -> str:
        if self.main:
            return super().save_after_failure(error)
        return f"learner rank {self.dp.rank} stopped by {type(error).__name__}."

    def summary(self, stop_reason: str) -> dict:
        summary = super().summary(stop_reason)
        summary["world_size"] = self.dp.world_size
        return summary


def launch_local(argv: Sequence[str], learners: int) -> int:
    """Run `xiaoyarl ARGV` as `learners` ranks on this machine through torch's launcher (as
    `torchrun --standalone --nproc_per_node LEARNERS -m xiaoyarl ARGV` would); return the exit
    status, naming the rank that failed if one did."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=learners, run_id=uuid.uuid4().hex,
        rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0, monitor_interval=0.1,
    )  # fmt: skip
    try:
        elastic_launch(config, entrypoint=sys.executable)("-m", "xiaoyarl", *argv)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()  # the others were stopped because of it
        how = f"exit code {failure.exitcode}"
        if failure.exitcode < 0:
            how = f"signal {-failure.exitcode}"
        raise LearnerError(
            f"learner rank {rank} (pid {failure.pid}) failed with {how}; the other ranks "
            f"were stopped. The run folder keeps its last checkpoint: continue with --resume."
        ) from None
    return 0


def shard_files(run_dir: Path) -> list[Path]:
    """The other ranks' checkpoint shards in a run folder."""
    return sorted((run_dir / "checkpoint").glob("rank*.pt"))
