"""Several learners on different data take the same decisions (2 gloo ranks on the CPU):
ModSAC's actor schedule, and the H-term, which must never move the random state the ranks
share while one rank's trajectory buffer fills faster than the other's."""

import datetime

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from xiaoyarl import Config
from xiaoyarl.agents import make_agent as build_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.core.buffer import Transitions
from xiaoyarl.envs import make_env

SHARED_SEED = 123  # the update's shared random state


def make_agent(algo: str, **fields):
    config = resolve_config(Config(algo=algo, env_id="Pendulum-v1", num_envs=2, net_dims=[8, 8],
                    learning_starts=0, buffer_size=256, **fields), batched=True)  # fmt: skip
    spec = make_env("Pendulum-v1", 2).spec
    torch.manual_seed(0)
    return build_agent(algo, spec, config, torch.device("cpu"))


def rollout(start: torch.Tensor, horizon: int, generator: torch.Generator,
            reward_scale: float, terminal_at: int | None = None) -> Transitions:  # fmt: skip
    """Random steps of 2 sub-envs `(horizon, 2, ...)` from the states `start` `(2, 3)` (where
    the previous rollout ended), whose episodes end at step `terminal_at` (None: they go on)."""
    states = torch.cat([start[None], torch.randn(horizon, 2, 3, generator=generator)])
    terminals = torch.zeros(horizon, 2, dtype=torch.bool)
    if terminal_at is not None:
        terminals[terminal_at] = True
    return Transitions(
        states=states[:-1], actions=torch.rand(horizon, 2, 1, generator=generator) * 2 - 1,
        rewards=torch.randn(horizon, 2, generator=generator) * reward_scale,
        terminals=terminals, truncates=torch.zeros(horizon, 2, dtype=torch.bool),
        next_states=states[1:],
    )  # fmt: skip


def _join(rank: int, store: str):
    from xiaoyarl.scale.distributed import DataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))  # fmt: skip
    return DataParallel(rank, 2, torch.device("cpu"), SHARED_SEED)


def _modsac_rank(rank: int, store: str, out: str) -> None:
    data_parallel = _join(rank, store)
    agent = make_agent("modsac", horizon_len=25, batch_size=8)
    data_parallel.attach(agent)
    torch.manual_seed(100 + rank)  # each rank samples its own replay with its own randomness
    g = torch.Generator().manual_seed(rank)
    # rank 0's critic fits its near-zero rewards at once; rank 1's large ones it does not
    agent.update_net(rollout(torch.zeros(2, 3), 25, g, 0.01 if rank == 0 else 30.0))
    assert agent.critic_updates == 50  # one rollout of 25 x 2 env steps: 50 gradient steps
    torch.save({"actor": agent.actor.state_dict(), "actor_updates": agent.actor_updates,
                "critic_loss_avg": agent.critic_loss_avg}, f"{out}{rank}.pt")  # fmt: skip
    dist.destroy_process_group()


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_modsac_ranks_on_different_data_step_the_actor_alike(tmp_path):
    mp.start_processes(_modsac_rank, args=(str(tmp_path / "store"), str(tmp_path / "rank")),
                       nprocs=2, start_method="spawn")  # fmt: skip
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert ranks[0]["critic_loss_avg"] == ranks[1]["critic_loss_avg"]
    assert ranks[0]["actor_updates"] == ranks[1]["actor_updates"] < 50  # the schedule held back
    for key, value in ranks[0]["actor"].items():
        assert torch.equal(value, ranks[1]["actor"][key]), key


def _h_term_rank(rank: int, store: str, out: str) -> None:
    data_parallel = _join(rank, store)
    agent = make_agent("sac", horizon_len=5, batch_size=8, h_term=True, h_term_k=2,
                       h_term_start=4)  # fmt: skip
    data_parallel.attach(agent)
    torch.manual_seed(100 + rank)
    g = torch.Generator().manual_seed(rank)
    ready, active, start = [], [], torch.zeros(2, 3)
    for i in range(100):  # 100 rollouts of 5 x 2 env steps: 1,000 gradient steps
        # rank 0's episodes last 5 steps; rank 1's first ones end in rollout 50
        data = rollout(start, 5, g, 1.0, terminal_at=4 if rank == 0 or i >= 49 else None)
        agent.update_net(data)
        start = data.next_states[-1]
        ready.append(agent.auxiliary.kept_states >= agent.auxiliary.start)
        active.append(agent.auxiliary.active)
    assert agent.updates == 1000
    torch.save({"shared": data_parallel.shared_cpu, "ready": ready,
                "active": active}, f"{out}{rank}.pt")  # fmt: skip
    dist.destroy_process_group()


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_h_term_keeps_the_ranks_shared_random_state_alike(tmp_path):
    mp.start_processes(_h_term_rank, args=(str(tmp_path / "store"), str(tmp_path / "rank")),
                       nprocs=2, start_method="spawn")  # fmt: skip
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1)]
    assert ranks[0]["ready"][0] and not ranks[1]["ready"][48]  # rank 0's buffer filled first
    assert ranks[0]["active"] == ranks[1]["active"]  # it starts on both ranks together,
    assert not any(ranks[0]["active"][:49]) and ranks[0]["active"][-1]  # once both are ready
    assert torch.equal(ranks[0]["shared"], ranks[1]["shared"]), "the shared generators drifted"
