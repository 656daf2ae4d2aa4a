"""Several learners over torch.distributed (2 gloo ranks on the CPU): the data-parallel update
equals one process's update on the union of the data, runs through the command line, resume,
a killed rank, two launchers meeting at a rendezvous, and model fusion."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from xiaoyarl import Config, load_policy
from xiaoyarl.agents import make_agent as build_agent
from xiaoyarl.agents.settings import resolve_config
from xiaoyarl.core.buffer import Batch
from xiaoyarl.envs import make_env
from xiaoyarl.train.checkpoint import load_plain

T, N, B = 8, 4, 8  # steps, sub-envs and batch size per rank
SHARED_SEED = 123  # the update's shared random state


def make_agent(algo: str, num_envs: int, batch_size: int):
    env_id = "Pendulum-v1"
    config = resolve_config(Config(algo=algo, env_id=env_id, num_envs=num_envs, horizon_len=T,
                    batch_size=batch_size, net_dims=[16, 16], learning_starts=0,
                    buffer_size=1024), batched=True)  # fmt: skip
    spec = make_env(env_id, num_envs).spec
    torch.manual_seed(0)
    return build_agent(algo, spec, config, torch.device("cpu"))


def union_data(algo: str):
    """A fixed PPO rollout of 2N sub-envs, or a SAC batch of 2B transitions."""
    from xiaoyarl.agents.ppo import Rollout

    g = torch.Generator().manual_seed(5)
    if algo == "ppo":
        flags = torch.rand(T, 2 * N, generator=g)
        return Rollout(
            states=torch.randn(T, 2 * N, 3, generator=g) * 3,
            actions=torch.randn(T, 2 * N, 1, generator=g),
            logprobs=torch.randn(T, 2 * N, generator=g) - 1,
            rewards=torch.randn(T, 2 * N, generator=g) * 5,
            terminals=flags < 0.1, truncates=(flags > 0.1) & (flags < 0.2),
            next_states=torch.randn(T, 2 * N, 3, generator=g) * 3,
        )  # fmt: skip
    return Batch(
        states=torch.randn(2 * B, 3, generator=g),
        actions=torch.rand(2 * B, 1, generator=g) * 2 - 1,
        rewards=torch.randn(2 * B, generator=g), terminals=torch.rand(2 * B, generator=g) < 0.2,
        next_states=torch.randn(2 * B, 3, generator=g), indices=torch.arange(2 * B),
        weights=torch.ones(2 * B), discounts=torch.full((2 * B,), 0.99),
    )  # fmt: skip


def part(algo: str, data, rank: int):
    if algo == "ppo":
        return type(data)(*(None if t is None else t[:, rank * N : (rank + 1) * N] for t in data))
    return type(data)(*(t[rank * B : (rank + 1) * B] for t in data))


def update(agent, algo: str, data) -> None:
    if algo == "ppo":
        agent.update_net(data)
    else:
        for _ in range(3):  # three gradient steps: critic, actor, temperature, targets
            agent.run_update(agent.update_step, data)
            agent.updates += 1


def _rank_main(rank: int, algo: str, store: str, out: str) -> None:
    from xiaoyarl.scale.distributed import DataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    agent = make_agent(algo, N, B)
    data_parallel = DataParallel(rank, 2, torch.device("cpu"), SHARED_SEED)
    data_parallel.attach(agent)
    torch.manual_seed(100 + rank)  # each rank explores with its own randomness
    update(agent, algo, part(algo, union_data(algo), rank))
    torch.save({name: net.state_dict() for name, net in agent.nets.items()}, f"{out}{rank}.pt")
    dist.destroy_process_group()


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_two_ranks_compute_the_update_of_one_process_on_the_union(tmp_path, algo):
    mp.start_processes(_rank_main, args=(algo, str(tmp_path / "store"), str(tmp_path / "rank")),
                       nprocs=2, start_method="spawn")  # fmt: skip
    single = make_agent(algo, 2 * N, 2 * B)  # one process, all the data, the same batches
    torch.set_rng_state(torch.Generator().manual_seed(SHARED_SEED).get_state())
    update(single, algo, union_data(algo))
    want = {name: net.state_dict() for name, net in single.nets.items()}
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        for name, state in want.items():
            for key, value in state.items():
                if (name, key) == ("reward", "returns"):  # each sub-env's running return
                    value = value[rank * N : (rank + 1) * N]
                if value.is_floating_point():
                    torch.testing.assert_close(got[name][key], value, rtol=0, atol=1e-6,
                                               msg=f"rank {rank} {name}.{key}")  # fmt: skip
    moved = make_agent(algo, N, B).nets["actor"].state_dict()
    assert any(not torch.equal(moved[k], v) for k, v in want["actor"].items())  # it did learn


TINY = ["--num-envs", "4", "--set", "horizon_len=16", "--eval-episodes", "2",
        "--target-return", "none"]  # fmt: skip


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_learners_through_the_cli_with_bit_exact_resume(tmp_path, cli):
    common = ["train", "ppo", "CartPole-v1", "--learners", "2", *TINY, "--eval-every", "256"]
    straight = cli(*common, "--max-steps", "512", "--cwd", str(tmp_path / "a"),
                   "--summary-json", str(tmp_path / "a.json"))  # fmt: skip
    assert straight.returncode == 0, straight.stderr
    summary = json.loads((tmp_path / "a.json").read_text())
    assert summary["world_size"] == 2 and summary["total_steps"] == 512  # both ranks' steps
    assert "2 learners x 4 envs" in straight.stdout
    assert (tmp_path / "a" / "checkpoint" / "rank1.pt").is_file()
    first = cli(*common, "--max-steps", "256", "--cwd", str(tmp_path / "b"))
    assert first.returncode == 0, first.stderr
    resumed = cli(*common, "--max-steps", "512", "--resume", str(tmp_path / "b"))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step 256" in resumed.stdout
    a = load_plain(tmp_path / "a" / "checkpoint" / "state.pt")
    b = load_plain(tmp_path / "b" / "checkpoint" / "state.pt")
    for name, state in a["agent"]["nets"].items():
        for key, value in state.items():
            assert torch.equal(value, b["agent"]["nets"][name][key]), f"{name}.{key}"
    shard_a = load_plain(tmp_path / "a" / "checkpoint" / "rank1.pt")
    shard_b = load_plain(tmp_path / "b" / "checkpoint" / "rank1.pt")
    assert torch.equal(shard_a["agent"]["last_state"], shard_b["agent"]["last_state"])


def _children(tag: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if f"XIAOYARL_TEST_TAG={tag}".encode() in (proc / "environ").read_bytes():
                if (proc / "stat").read_text().split(") ", 1)[1][0] != "Z":
                    pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _rank_pid(tag: str, rank: int) -> int | None:
    for pid in _children(tag):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ and b"LOCAL_RANK=" + str(rank).encode() in environ:
            return pid
    return None


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_a_killed_rank_ends_the_job_naming_it_and_resume_continues(tmp_path, cli):
    tag = uuid.uuid4().hex
    run = tmp_path / "run"
    args = [sys.executable, "-m", "xiaoyarl", "train", "ppo", "CartPole-v1", "--learners", "2",
            *TINY, "--max-steps", "100000000", "--eval-every", "100000000", "--cwd", str(run),
            "--set", "checkpoint_every=1024"]  # fmt: skip
    env = {**os.environ, "XIAOYARL_TEST_TAG": tag}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (run / "checkpoint" / "rank1.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        victim = _rank_pid(tag, 1)
        assert victim is not None, "rank 1 not found"
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - killed < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            for pid in _children(tag):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 2, err
    assert "learner rank 1" in err and "signal 9" in err
    deadline = time.monotonic() + 10
    while _children(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _children(tag), "processes left running"
    step = load_plain(run / "checkpoint" / "state.pt")["counters"]["total_steps"]
    resumed = cli("train", "ppo", "CartPole-v1", "--learners", "2", *TINY, "--max-steps",
                  str(step + 256), "--resume", str(run))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed from step {step}" in resumed.stdout


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_torchrun_restarts_a_failed_job_from_the_last_checkpoint(tmp_path):
    """`torchrun --max-restarts 1`: a rank killed once, the job comes back and resumes."""
    tag = uuid.uuid4().hex
    run = tmp_path / "run"
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
            "2", "--max-restarts", "1", "--monitor-interval", "0.1", "-m", "xiaoyarl", "train",
            "ppo", "CartPole-v1", *TINY, "--max-steps", "8192", "--eval-every", "100000000",
            "--cwd", str(run), "--set", "checkpoint_every=1024"]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "XIAOYARL_TEST_TAG": tag})  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (run / "checkpoint" / "rank1.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        victim = _rank_pid(tag, 1)
        assert victim is not None, "rank 1 not found"
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        for pid in [proc.pid] * (proc.poll() is None) + _children(tag):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 0, err[-3000:]
    assert "resumed from step" in out
    assert load_plain(run / "checkpoint" / "state.pt")["counters"]["total_steps"] == 8192


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_two_launchers_meet_at_a_rendezvous_and_train_one_agent(tmp_path):
    """The several-machines recipe, on one machine: two `torchrun --nnodes 2` launchers."""
    port = _free_port()
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        uuid.uuid4().hex,
        "-m",
        "xiaoyarl",
        "train",
        "ppo",
        "CartPole-v1",
        *TINY,
        "--max-steps",
        "512",
        "--eval-every",
        "256",
        "--cwd",
        str(tmp_path / "run"),
        "--summary-json",
        str(tmp_path / "s.json"),
    ]
    nodes = [subprocess.Popen(launcher, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]  # fmt: skip
    outs = [node.communicate(timeout=180) for node in nodes]
    for node, (_, err) in zip(nodes, outs, strict=True):
        assert node.returncode == 0, err[-3000:]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["world_size"] == 2 and summary["total_steps"] == 512


def test_fusing_copies_of_one_agent_gives_it_back_exactly():
    from xiaoyarl.scale.fusion import fuse_agent_states

    agent = make_agent("sac", N, B)
    g = torch.Generator().manual_seed(0)
    for net in agent.nets.values():  # optimizer state exists after a step; weights are odd
        for p in net.parameters():
            p.data.add_(torch.randn(p.shape, generator=g) / 3)
    agent.run_update(agent.update_step, part("sac", union_data("sac"), 0))
    state = agent.state_dict()
    fused = fuse_agent_states([state, state, state], weights=[0.2, 0.3, 0.5])
    for name, net_state in state["nets"].items():
        for key, value in net_state.items():
            assert torch.equal(fused["nets"][name][key], value), f"{name}.{key}"
    for name, opt in state["optimizers"].items():
        for index, slots in opt["state"].items():
            for slot, value in slots.items():
                assert torch.equal(fused["optimizers"][name]["state"][index][slot], value)


def test_fusing_three_seeds_gives_a_run_that_loads_evaluates_and_resumes(tmp_path, cli):
    from xiaoyarl import train_agent

    runs = []
    for seed in range(3):
        run = tmp_path / f"seed{seed}"
        config = Config(algo="ppo", env_id="CartPole-v1", num_envs=16, horizon_len=16,
                        eval_episodes=2, max_steps=1024, seed=seed, cwd=str(run))  # fmt: skip
        train_agent(config, log=None)
        runs.append(str(run))
    fused = tmp_path / "fused"
    made = cli("fuse", *runs, "--out", str(fused))
    assert made.returncode == 0, made.stderr
    states = [load_plain(Path(r) / "checkpoint" / "state.pt")["agent"]["nets"] for r in runs]
    got = load_plain(fused / "checkpoint" / "state.pt")["agent"]["nets"]
    weight = states[0]["actor"]["net.0.weight"]
    mean = sum(s["actor"]["net.0.weight"].double() for s in states) / 3
    torch.testing.assert_close(got["actor"]["net.0.weight"], mean.float())
    assert not torch.equal(got["actor"]["net.0.weight"], weight)
    policy = load_policy(fused)
    torch.testing.assert_close(policy.actor.state_dict()["net.0.weight"], mean.float())
    evaluated = cli("eval", str(fused), "--episodes", "3")
    assert evaluated.returncode == 0 and "eval over 3 episodes" in evaluated.stdout
    resumed = cli("train", "ppo", "CartPole-v1", "--max-steps", "2048", "--resume", str(fused))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step 1024" in resumed.stdout
