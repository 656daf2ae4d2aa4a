"""Checkpoints: bit-exact resume in a fresh process, kill -9, corruption, stop file, signals."""

import signal
import time

import pytest
import torch
from helpers import TINY, cli, popen

from xiaoyarl import CheckpointError, load_policy
from xiaoyarl.train.checkpoint import load_plain, save_atomic


def assert_same(a, b, path="state"):
    """Recursively assert two checkpoint trees are identical (tensors bit for bit)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, path
        assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            assert_same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


# off-policy runs learn from step 128, so the second half trains from a partly filled buffer
OFF_POLICY = [
    "--num-envs",
    "4",
    "--threads",
    "1",
    "--eval-episodes",
    "2",
    "--set",
    "learning_starts=128",
    "--set",
    "batch_size=32",
    "--set",
    "net_dims=[32]",
]


@pytest.mark.parametrize(
    ("algo", "env_id", "extra"),
    [
        ("ppo", "CartPole-v1", TINY),
        ("sac", "Pendulum-v1", OFF_POLICY),
        ("dqn", "CartPole-v1", [*OFF_POLICY, "--set", "per=true"]),
    ],
)
def test_resume_in_fresh_process_is_bit_exact(tmp_path, algo, env_id, extra):
    """Train 2N steps straight vs N, save, resume in a new process, N more: identical state
    (networks, optimizers, normalizers, counters, RNG, env and, off-policy, the replay buffer
    with its position and priorities)."""
    common = ["train", algo, env_id, *extra, "--eval-every", "256",
              "--set", "checkpoint_every=100000"]  # fmt: skip
    straight = cli(*common, "--max-steps", "1024", "--cwd", str(tmp_path / "a"))
    assert straight.returncode == 0, straight.stderr
    first = cli(*common, "--max-steps", "512", "--cwd", str(tmp_path / "b"))
    assert first.returncode == 0, first.stderr
    resumed = cli(*common, "--max-steps", "1024", "--cwd", str(tmp_path / "b"), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step 512" in resumed.stdout

    a = load_plain(tmp_path / "a" / "checkpoint" / "state.pt")
    b = load_plain(tmp_path / "b" / "checkpoint" / "state.pt")
    assert a["counters"]["total_steps"] == b["counters"]["total_steps"] == 1024
    if algo != "ppo":
        assert a["agent"]["buffer"] is not None and a["agent"]["counters"]["updates"] > 0
    assert_same(a["agent"], b["agent"], "agent")  # networks, optimizers, normalizers, last state
    assert_same(a["env"], b["env"], "env")
    assert_same(a["rng"], b["rng"], "rng")


def test_kill_9_leaves_a_loadable_checkpoint_and_resume_continues(tmp_path):
    run = tmp_path / "run"
    args = ["train", "ppo", "CartPole-v1", *TINY, "--cwd", str(run), "--eval-every", "2048",
            "--set", "checkpoint_every=256", "--target-return", "1e9"]  # fmt: skip
    ckpt = run / "checkpoint" / "state.pt"
    for delay in (0.0, 0.37):  # kill right after the first checkpoint, and a little later
        proc = popen(*args, "--max-steps", "10000000", *(["--resume"] if ckpt.exists() else []))
        deadline = time.monotonic() + 60
        while not ckpt.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        state = load_plain(ckpt)  # never half-written
        assert state["counters"]["total_steps"] > 0

    step = state["counters"]["total_steps"]
    done = cli(*args, "--max-steps", str(step + 512), "--resume")
    assert done.returncode == 0, done.stderr
    assert f"resumed from step {step}" in done.stdout
    assert load_plain(ckpt)["counters"]["total_steps"] == step + 512


def test_corrupted_or_truncated_checkpoint_gives_clear_error(tmp_path):
    run = tmp_path / "run"
    args = ["train", "ppo", "CartPole-v1", *TINY, "--cwd", str(run), "--max-steps", "256"]
    assert cli(*args).returncode == 0
    ckpt = run / "checkpoint" / "state.pt"
    data = ckpt.read_bytes()
    for broken in (data[: len(data) // 2], b"not a checkpoint at all"):
        ckpt.write_bytes(broken)
        result = cli(*args, "--resume")
        assert result.returncode == 2
        assert "corrupted" in result.stderr and "Traceback" not in result.stderr
        with pytest.raises(CheckpointError, match="cannot be read"):
            load_plain(ckpt)


def test_existing_run_needs_resume_and_resume_needs_a_checkpoint(tmp_path):
    run = tmp_path / "run"
    args = ["train", "ppo", "CartPole-v1", *TINY, "--cwd", str(run), "--max-steps", "256"]
    missing = cli(*args, "--resume")
    assert missing.returncode == 2 and "no checkpoint" in missing.stderr
    assert not run.exists()
    assert cli(*args).returncode == 0
    again = cli(*args)
    assert again.returncode == 2 and "--resume" in again.stderr
    changed = cli(*args, "--resume", "--set", "gamma=0.9")
    assert changed.returncode == 2 and "gamma: checkpoint 0.99, now 0.9" in changed.stderr


def test_stop_file_and_sigint_end_training_with_a_checkpoint(tmp_path):
    for how in ("stop_file", "SIGINT", "SIGTERM"):
        run = tmp_path / how
        proc = popen("train", "ppo", "CartPole-v1", *TINY, "--cwd", str(run),
                     "--max-steps", "10000000", "--target-return", "1e9")  # fmt: skip
        deadline = time.monotonic() + 60
        while not (run / "config.yaml").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        if how == "stop_file":
            (run / "stop").touch()
        else:
            proc.send_signal(getattr(signal, how))
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == {"stop_file": 0, "SIGINT": 130, "SIGTERM": 143}[how], err
        assert f"stopped by {how}" in out
        state = load_plain(run / "checkpoint" / "state.pt")
        assert state["counters"]["total_steps"] > 0
        assert not (run / "stop").exists()


def test_save_atomic_keeps_old_file_when_write_fails(tmp_path):
    path = tmp_path / "x.pt"
    save_atomic({"v": torch.tensor([1.0])}, path)
    with pytest.raises(Exception):  # noqa: B017 - an unpicklable object fails mid-write
        save_atomic({"v": lambda: 0}, path)
    assert torch.equal(load_plain(path)["v"], torch.tensor([1.0]))


def test_load_policy_acts_on_numpy_and_torch_batches(tmp_path):
    import numpy as np

    for env_id, discrete in (("CartPole-v1", True), ("Pendulum-v1", False)):
        run = tmp_path / env_id
        result = cli("train", "ppo", env_id, *TINY, "--cwd", str(run), "--max-steps", "512",
                     "--eval-every", "256")  # fmt: skip
        assert result.returncode == 0, result.stderr
        policy = load_policy(run)
        dim = 4 if discrete else 3
        batch = policy(np.zeros((5, dim), dtype=np.float32))
        single = policy(torch.zeros(dim))
        assert isinstance(batch, np.ndarray) and isinstance(single, torch.Tensor)
        if discrete:
            assert batch.shape == (5,) and batch.dtype == np.int64
        else:  # rescaled to Pendulum's torque bounds [-2, 2]
            assert batch.shape == (5, 1) and np.all(np.abs(batch) <= 2.0)
        with pytest.raises(ValueError, match="observations of shape"):
            policy(np.zeros((5, dim + 1)))
        evaluated = cli("eval", str(run), "--episodes", "3")
        assert evaluated.returncode == 0 and "eval over 3 episodes" in evaluated.stdout
