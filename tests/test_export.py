"""`export_policy`: ONNX and TorchScript models that act exactly like the run's `Policy`."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest
import torch

from xiaoyarl import CheckpointError, ConfigError, XiaoyaError, load_policy
from xiaoyarl.export import FORMATS, export_policy
from xiaoyarl.train.checkpoint import load_plain

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")

# the three tiny runs, plus the Pendulum PPO run edited to saturate its actions (output layer
# scaled up) into asymmetric bounds [-0.5, 3]: the exported clamp to [-1, 1] and the rescale
# are exercised (on Pendulum's symmetric [-2, 2], `2 * action` would pass for the rescale)
CASES = ["ppo-CartPole", "ppo-Pendulum", "td3-Pendulum", "ppo-Pendulum-saturated"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_run):
    """Run folder by case name (one copy per test module, so exports do not collide)."""
    folder = tmp_path_factory.mktemp("export")
    out = {}
    for name in CASES[:3]:
        out[name] = folder / name
        shutil.copytree(tiny_run(name), out[name])
    for name in ("ppo-CartPole", "ppo-Pendulum"):  # a real observation normaliser to carry
        meta = load_plain(out[name] / "actor.pt", what="policy file")
        assert meta["state_norm"] and meta["actor"]["norm.mean"].abs().min() > 0
    saturated = folder / CASES[3]
    shutil.copytree(out["ppo-Pendulum"], saturated)
    meta = load_plain(saturated / "actor.pt", what="policy file")
    meta["actor"]["net.4.weight"] *= 1e4  # last Linear of [state_dim, 64, 64, action_dim]
    meta["action_low"], meta["action_high"] = (-0.5,), (3.0,)
    torch.save(meta, saturated / "actor.pt")
    out[CASES[3]] = saturated
    return out


def observations(state_dim: int, batch: int, seed: int) -> np.ndarray:
    """Raw observations of mixed magnitudes, 1e-2 to 1e4: many beyond the normaliser's clip."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.integers(-2, 5, size=(batch, state_dim))
    return (rng.standard_normal((batch, state_dim)) * scale).astype(np.float32)


def assert_acts_like(policy, run_model, case: str) -> None:
    """`run_model(obs) -> actions` (numpy) equals `policy(obs)` for batches of 1, 7 and 64."""
    for batch in (1, 7, 64):
        obs = observations(policy.state_dim, batch, seed=batch)
        expected = policy(obs)
        action = run_model(obs)
        assert action.shape == expected.shape
        if policy.if_discrete:
            assert action.dtype == np.int64 and expected.shape == (batch,)
            np.testing.assert_array_equal(action, expected)
        else:
            assert action.dtype == np.float32 and expected.shape == (batch, 1)
            np.testing.assert_allclose(action, expected, rtol=1e-5, atol=1e-5)
            low, high = policy.meta["action_low"][0], policy.meta["action_high"][0]
            assert np.all((low <= action) & (action <= high))
    # the comparison is not vacuous: the actions vary, and saturate where meant to
    if policy.if_discrete:
        assert set(np.unique(expected)) == {0, 1}
    else:
        assert np.ptp(expected) > 1e-4
    if case.endswith("saturated"):
        assert np.any(expected == 3.0) and np.any(expected == -0.5)


@pytest.mark.parametrize("case", CASES)
def test_onnx_model_acts_like_the_policy(runs, case):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    run = runs[case]
    actor_bytes = (run / "actor.pt").read_bytes()
    path = export_policy(run)
    assert path == run / "policy.onnx"
    assert (run / "actor.pt").read_bytes() == actor_bytes
    leftovers = [p.name for p in run.iterdir() if p.name.startswith(".") or p.suffix == ".data"]
    assert leftovers == []  # weights inside the one file, no partial file left
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs"]
    assert session.get_inputs()[0].type == "tensor(float)"

    def run_model(obs):
        return session.run(["action"], {"obs": obs})[0]

    assert_acts_like(load_policy(run), run_model, case)


@pytest.mark.parametrize("case", CASES)
def test_torchscript_model_acts_like_the_policy(runs, case):
    run = runs[case]
    path = export_policy(run, fmt="torchscript")
    assert path == run / "policy.torchscript.pt"
    model = torch.jit.load(str(path))

    def run_model(obs):
        with torch.no_grad():
            return model(torch.from_numpy(obs)).numpy()

    assert_acts_like(load_policy(run), run_model, case)


def test_export_to_a_chosen_file_in_a_new_folder(runs, tmp_path):
    out = tmp_path / "deploy" / "cartpole.pt"
    assert export_policy(runs["ppo-CartPole"], out, fmt="torchscript") == out
    obs = observations(4, 5, seed=0)
    expected = load_policy(runs["ppo-CartPole"])(obs)
    np.testing.assert_array_equal(torch.jit.load(str(out))(torch.from_numpy(obs)), expected)


def test_export_errors_are_clear(runs, tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match="does not exist"):
        export_policy(tmp_path / "no-such-run", fmt="torchscript")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no policy file"):
        export_policy(tmp_path / "empty", fmt="torchscript")
    with pytest.raises(ConfigError, match="unknown export format 'tflite'.*onnx, torchscript"):
        export_policy(runs["ppo-CartPole"], fmt="tflite")
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # as if not installed
    with pytest.raises(XiaoyaError, match=r"onnxscript.*pip install -e '\.\[export\]'"):
        export_policy(runs["ppo-CartPole"], tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_a_recurrent_policy_is_refused_in_one_line(tiny_run):
    """Its hidden state does not fit a single-step model file: one clear line, in both formats
    (ONNX showed PyTorch's exporter boilerplate, TorchScript a 62-line traceback)."""
    run = tiny_run("ppo-gru-CartPoleNoVelocity")
    assert load_policy(run).recurrent and not load_policy(tiny_run("ppo-CartPole")).recurrent
    for fmt in ("onnx", "torchscript"):
        with pytest.raises(ConfigError, match="is recurrent: it keeps a hidden state") as e:
            export_policy(run, fmt=fmt)
        assert "\n" not in str(e.value)
        assert not (run / FORMATS[fmt]).exists()
