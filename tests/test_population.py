"""Populations: search spaces, the leaderboard under concurrent writers, and whole populations
(generational and tournament) through the CLI, including a member killed mid-run."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from xiaoyarl.errors import ConfigError
from xiaoyarl.population.leaderboard import Leaderboard, locked
from xiaoyarl.population.plots import read_population_csv
from xiaoyarl.population.search_space import SearchSpace


def test_search_space_samples_and_perturbs_within_bounds():
    space = SearchSpace({"learning_rate": {"log_uniform": [1e-6, 1e-1]},
                         "lambda_entropy": {"uniform": [0.0, 0.01]},
                         "gamma": {"choice": [0.9, 0.95, 0.99]}, "horizon_len": 64,
                         "batch_size": {"uniform": [64, 512]}})  # fmt: skip
    rng = random.Random(0)
    values = [space.sample(rng) for _ in range(200)]
    lrs = [v["learning_rate"] for v in values]
    assert min(lrs) >= 1e-6 and max(lrs) <= 1e-1
    assert sum(lr < 1e-3 for lr in lrs) > 80  # log-uniform: 3 of 5 decades below 1e-3
    assert all(v["horizon_len"] == 64 and v["gamma"] in (0.9, 0.95, 0.99) for v in values)
    assert all(isinstance(v["batch_size"], int) for v in values)
    for v in values[:50]:
        w = space.perturb(v, rng, (0.8, 1.2), 0.0)
        ratio = w["learning_rate"] / v["learning_rate"]
        assert 1e-6 <= w["learning_rate"] <= 1e-1
        assert (
            ratio == pytest.approx(0.8)
            or ratio == pytest.approx(1.2)
            or w["learning_rate"] in (1e-6, 1e-1)
        )
        assert w["horizon_len"] == 64


@pytest.mark.parametrize("value, factor, moved", [
    (1, 1.2, 2), (2, 1.2, 3), (2, 0.8, 1), (3, 0.8, 2),  # at least one step
    (10, 1.2, 12), (10, 0.8, 8),  # larger values: times the factor, rounded
    (1, 0.8, 1), (16, 1.2, 16), (20, 0.8, 16),  # at a bound it stays; beyond, it is clamped
])  # fmt: skip
def test_perturbing_a_small_integer_moves_it_at_least_one_step_within_bounds(value, factor, moved):
    space = SearchSpace({"policy_delay": {"uniform": [1, 16]}})
    got = space.perturb({"policy_delay": value}, random.Random(0), (factor,), 0.0)
    assert got["policy_delay"] == moved and isinstance(got["policy_delay"], int)


@pytest.mark.parametrize("spec, words", [
    ({"learning_rat": {"uniform": [0, 1]}}, "unknown config field"),
    ({"seed": 3}, "sets seed itself"),
    ({"learning_rate": {"log_uniform": [0, 1]}}, "low > 0"),
    ({"learning_rate": {"normal": [0, 1]}}, "expected a value"),
    ({"gamma": {"choice": []}}, "non-empty list"),
])  # fmt: skip
def test_search_space_rejects_bad_entries(spec, words):
    with pytest.raises(ConfigError, match=words):
        SearchSpace(spec)


def _writer(folder: str, worker: int, scores: list[float]) -> None:
    board = Leaderboard(Path(folder) / "leaderboard", size=5)
    for i, score in enumerate(scores):
        payload = {"worker": worker, "i": i, "blob": list(range(2000))}
        with locked(Path(folder)):
            board.insert(payload, score, {"member": f"w{worker}", "step": i, "hparams": {}})


@pytest.mark.distributed
def test_leaderboard_stays_consistent_under_concurrent_writers(tmp_path):
    rng = random.Random(1)
    scores = [[rng.uniform(-100, 100) for _ in range(15)] for _ in range(4)]
    context = mp.get_context("spawn")
    writers = [context.Process(target=_writer, args=(str(tmp_path), w, s))
               for w, s in enumerate(scores)]  # fmt: skip
    for p in writers:
        p.start()
    for p in writers:
        p.join(120)
        assert p.exitcode == 0
    board = Leaderboard(tmp_path / "leaderboard", size=5)
    with locked(tmp_path, shared=True):
        entries = board.check()  # every entry's checkpoint loads
        loaded = [board.load(e) for e in entries]
    best = sorted((s for ss in scores for s in ss), reverse=True)[:5]
    assert [e["score"] for e in entries] == pytest.approx(best)
    for entry, payload in zip(entries, loaded, strict=True):
        assert scores[payload["worker"]][payload["i"]] == pytest.approx(entry["score"])
    files = sorted(p.name for p in (tmp_path / "leaderboard").iterdir())
    assert files == sorted([e["file"] for e in entries] + ["board.json"])


def _cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xiaoyarl", "population", *args],
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def _no_member_left(folder: Path) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(folder) in cmd:
                return False
    return True


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_generational_population_exploits_and_explores(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("learning_rate: {log_uniform: [1.0e-5, 1.0e-2]}\n")
    out = tmp_path / "pop"
    result = _cli("ppo", "CartPole-v1", "--members", "2", "--workers", "2", "--max-steps",
                  "6144", "--generation-steps", "2048", "--select-fraction", "0.5",
                  "--search", str(space), "--cwd", str(out), "--target-return", "none",
                  "--summary-json", str(tmp_path / "summary.json"))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = read_population_csv(out)
    trained = [r for r in rows if r["event"] == "trained"]
    exploits = [r for r in rows if r["event"] == "exploit"]
    assert len(trained) == 6  # 2 members x 3 generations
    assert len(exploits) == 2  # one per generation boundary
    for row in exploits:  # the copy's learning rate is the donor's, perturbed
        donor = next(r for r in reversed(rows[: rows.index(row)])
                     if r["event"] == "trained" and r["member"] == row["parent"])  # fmt: skip
        ratio = row["hparams"]["learning_rate"] / donor["hparams"]["learning_rate"]
        assert min(abs(ratio - f) for f in (0.8, 1.2)) < 1e-6 or not 0.5 < ratio < 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["done"] and summary["generations"] == 3
    assert (out / "population.png").is_file()
    assert (out / "leaderboard" / "board.json").is_file()
    for member in ("member-00", "member-01"):
        assert (out / "members" / member / "checkpoint" / "state.pt").is_file()
    assert _no_member_left(out)
    again = _cli("--resume", str(out))  # a finished population resumes to "done" at once
    assert again.returncode == 0, again.stderr[-2000:]


def _member_pids(folder: Path) -> list[int]:
    """Member processes: children of a forkserver whose parent is a slot of `folder`'s."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            ppid = int(next(l.split()[1] for l in status.splitlines() if l.startswith("PPid")))
            parent = Path(f"/proc/{ppid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, StopIteration):
            continue
        if "(zombie)" in status:
            continue  # exited, not yet reaped: killing it would not fail the member
        if "forkserver" in cmd and "forkserver" in parent:
            try:  # the forkserver's parent: a slot of this population
                status = Path(f"/proc/{ppid}/status").read_text()
                slot = int(next(l.split()[1] for l in status.splitlines() if l.startswith("PPid")))
                slot_cmd = Path(f"/proc/{slot}/cmdline").read_bytes().decode(errors="replace")
            except (OSError, StopIteration):
                continue
            if str(folder) in slot_cmd:
                pids.append(int(pid))
    return pids


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_tournament_replaces_a_killed_member_and_keeps_the_leaderboard(tmp_path):
    out = tmp_path / "pop"
    launcher = subprocess.Popen(
        [sys.executable, "-m", "xiaoyarl", "population", "ppo", "CartPole-v1", "--scheme",
         "tournament", "--members", "4", "--workers", "4", "--max-steps", "40000",
         "--pod-steps", "10000",
         "--cwd", str(out), "--target-return", "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out / "leaderboard" / "board.json").exists():
            time.sleep(0.2)  # a first pod inserted: kill a running one
        killed = None
        while time.time() < deadline and killed is None:
            for pid in _member_pids(out):  # a member may finish between listing and kill
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                killed = pid
                break
            time.sleep(0.1)
        assert killed, "no running member process found"
        stdout, stderr = launcher.communicate(timeout=300)
    finally:
        launcher.kill()
    assert launcher.returncode == 0, stderr[-2000:]
    rows = read_population_csv(out)
    assert any(r["event"] == "failed" for r in rows)
    assert any(r["event"] == "from_leaderboard" for r in rows)  # new pods from the board
    with locked(out, shared=True):
        entries = Leaderboard(out / "leaderboard", 4).check()
    assert entries and entries[0]["score"] >= 475  # CartPole's target
    assert _no_member_left(out)


def test_cloud_recipe_launches_the_guides_command():
    """The Kubernetes example parses, and its container runs the populations guide's several-machine
    torchrun command (the cluster and the image build are not run here)."""
    import shlex

    import yaml

    root = Path(__file__).resolve().parents[1]
    docs = list(yaml.safe_load_all((root / "deploy" / "population-job.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "Job")
    assert job["spec"]["completionMode"] == "Indexed"
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    readme = (root / "docs" / "guides" / "populations.md").read_text().replace("\\\n", " ")
    line = next(s for s in readme.splitlines()
                if s.strip().startswith("torchrun") and "xiaoyarl population" in s)  # fmt: skip
    expected = shlex.split(line)
    endpoint = expected.index("--rdzv-endpoint") + 1
    assert command[:endpoint] == expected[:endpoint]
    assert command[endpoint + 1 :] == expected[endpoint + 1 :]
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"} in env
    assert "export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in readme
    dockerfile = (root / "deploy" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["xiaoyarl"]' in dockerfile and "TORCH_INDEX" in dockerfile


@pytest.mark.distributed
@pytest.mark.timeout(600)
def test_generations_measured_in_seconds(tmp_path):
    """`--generation-seconds`: every member trains a few seconds per generation (each ends
    with an evaluation), until the members reach the budget."""
    out = tmp_path / "pop"
    # 0.5 s generations against a budget that takes seconds even on a fast, idle machine (a
    # member trains PPO CartPole at ~20k env steps/s here: 30k steps once fitted in 1.5 s)
    result = _cli("ppo", "CartPole-v1", "--members", "2", "--workers", "2", "--max-steps",
                  "60000", "--generation-seconds", "0.5", "--cwd", str(out), "--target-return",
                  "none")  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [r for r in read_population_csv(out) if r["event"] == "trained"]
    generations = {int(r["generation"]) for r in rows}
    assert len(generations) >= 2  # a 0.5-second generation is shorter than the budget
    for member in ("member-00", "member-01"):
        steps = [r["step"] for r in rows if r["member"] == member]
        assert steps == sorted(steps) and steps[0] < 60000 <= steps[-1]


@pytest.mark.parametrize("option, words", [
    (["--resample-probability", "2"], "resample_probability=2.0; expected a probability"),
    (["--perturb-factors", "0.5", "-1"], "perturb_factors=.*expected positive factors"),
])  # fmt: skip
def test_bad_explore_options_get_a_clear_error(tmp_path, option, words, cli):
    result = cli("population", "ppo", "CartPole-v1", "--cwd", str(tmp_path / "pop"), *option)
    assert result.returncode != 0
    assert re.search(words, result.stderr), result.stderr[-2000:]
    assert not (tmp_path / "pop").exists()  # refused before anything was written
