"""`export_policy`: ONNX and TorchScript models that act exactly like the run's `Policy`."""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest
import torch

from xiaoyarl import CheckpointError, Config, ConfigError, XiaoyaError, load_policy
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


# runs whose exported models take more than a vector: a recurrent policy's state (GRU, LSTM; of
# on-policy agents and of a replay agent), uint8 images, a Dict env's keys; short runs (only a
# saved policy is needed)
SHORT = {"seed": 0, "threads": 1, "eval_episodes": 2, "max_steps": 512, "eval_every": 256}
MODEL_RUNS = {
    "a2c-lstm": {"algo": "a2c", "env_id": "CartPoleNoVelocity-v1", "recurrent": "lstm",
                 "recurrent_dim": 8, "num_envs": 8},
    "d3qn-lstm": {"algo": "d3qn", "env_id": "CartPoleNoVelocity-v1", "recurrent": "lstm",
                  "recurrent_dim": 8, "num_envs": 4, "learning_starts": 128, "batch_size": 32},
    "ppo-pixels": {"algo": "ppo", "env_id": "pixel_envs:BrightSide-v0", "num_envs": 4,
                   "horizon_len": 32},
    "ppo-dict": {"algo": "ppo", "env_id": "pixel_envs:BrightSideDict-v0", "num_envs": 4,
                 "horizon_len": 32, "env_kwargs": {"obs_keys": ["image", "cue", "steps"]}},
    # multi-agent: feed-forward and recurrent agents, discrete and continuous actions
    "vdn": {"algo": "vdn", "env_id": "SpreadDiscrete-v0", "num_envs": 2,
            "learning_starts": 128, "batch_size": 16},
    "qmix-gru": {"algo": "qmix", "env_id": "SpreadDiscrete-v0", "num_envs": 2,
                 "recurrent": "gru", "recurrent_dim": 8, "learning_starts": 128,
                 "batch_size": 4},
    "mappo": {"algo": "mappo", "env_id": "SpreadContinuous-v0", "num_envs": 2,
              "horizon_len": 32, "batch_size": 64},
    "mappo-gru": {"algo": "mappo", "env_id": "SpreadContinuous-v0", "num_envs": 2,
                  "recurrent": "gru", "recurrent_dim": 8, "horizon_len": 32, "batch_size": 64},
    "maddpg-lstm": {"algo": "maddpg", "env_id": "SpreadDiscrete-v0", "num_envs": 2,
                    "recurrent": "lstm", "recurrent_dim": 8, "learning_starts": 128,
                    "batch_size": 4},
}  # fmt: skip


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory, tiny_run):
    """Run folder by name: MODEL_RUNS trained here, and the tiny recurrent PPO run (GRU)."""
    from xiaoyarl import train_agent
    from xiaoyarl.config_io import config_from_dict

    folder = tmp_path_factory.mktemp("model_runs")
    out = {"ppo-gru": folder / "ppo-gru", "ppo-minatar": folder / "ppo-minatar"}
    shutil.copytree(tiny_run("ppo-gru-CartPoleNoVelocity"), out["ppo-gru"])
    shutil.copytree(tiny_run("ppo-MinAtar-Breakout"), out["ppo-minatar"])
    threads = torch.get_num_threads()
    for name, fields in MODEL_RUNS.items():
        out[name] = folder / name
        train_agent(config_from_dict({**SHORT, **fields, "cwd": str(out[name])}), log=None)
    torch.set_num_threads(threads)
    # a short run's actions barely depend on the image: a random output layer makes them do so
    for name in ("ppo-pixels", "ppo-dict"):
        meta = load_plain(out[name] / "actor.pt", what="policy file")
        generator = torch.Generator().manual_seed(0)
        meta["actor"]["net.4.weight"] = torch.randn(2, 64, generator=generator)
        torch.save(meta, out[name] / "actor.pt")
    return out


def exported(run, fmt: str):
    """`model(**inputs) -> outputs` (numpy) of the run's policy exported as `fmt`, and the
    model's input names."""
    path = export_policy(run, fmt=fmt)
    if fmt == "torchscript":
        model = torch.jit.load(str(path))

        def call(**inputs):
            with torch.no_grad():
                out = model(*(torch.from_numpy(np.asarray(v)) for v in inputs.values()))
            return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]

        return call, None
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return (lambda **inputs: session.run(None, {k: np.asarray(v) for k, v in inputs.items()}),
            names)  # fmt: skip


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["ppo-gru", "a2c-lstm", "d3qn-lstm"])
def test_a_recurrent_policy_exports_with_its_state_in_and_out(model_runs, name, fmt):
    """Over whole episodes of the env, the exported model, its state carried by the caller and
    zeroed where an episode starts, acts as `load_policy`'s policy: its explicit-state `step`
    (two episodes, the second started by `episode_start`) and its own memory (`predict`, the
    first episode from `reset`)."""
    from xiaoyarl.envs import make_env

    run_model, names = exported(model_runs[name], fmt)
    if names is not None:
        assert names == ["obs", "state", "episode_start"]
    policy, remembering = load_policy(model_runs[name]), load_policy(model_runs[name])
    assert policy.recurrent
    width = policy.memory.state_dim
    assert width == (8 if name == "ppo-gru" else 16)  # an LSTM's h and c side by side
    env = make_env("CartPoleNoVelocity-v1", 1, seed=3)
    obs = env.reset(seed=3)[0].numpy()
    state, model_state = None, np.zeros((1, width), np.float32)
    start, episodes, steps, first_episode = np.ones(1, bool), 0, 0, True
    while episodes < 2:
        action, state = policy.step(obs, state, start)
        model_action, model_state = run_model(obs=obs, state=model_state, episode_start=start)
        np.testing.assert_array_equal(model_action, action)
        np.testing.assert_allclose(model_state, state, rtol=1e-5, atol=1e-6)
        if first_episode:
            np.testing.assert_array_equal(remembering.predict(obs), action)
        obs, _, terminal, truncate, _ = env.step(torch.as_tensor(action))
        obs, start = obs.numpy(), (terminal | truncate).numpy()
        steps += 1
        if start[0]:
            episodes, first_episode = episodes + 1, False
    assert steps > 2 * 2 and np.abs(model_state).max() > 0  # the state is not vacuous


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["vdn", "qmix-gru", "mappo", "mappo-gru", "maddpg-lstm"])
def test_a_multi_agent_policy_exports_taking_the_agents_observations(model_runs, name, fmt):
    """Over whole episodes of three envs, the exported model takes the agents' observations of
    each env `(batch, A, O)` (their ids are added inside) and acts as `load_policy`'s policy; a
    recurrent one's agents' states are carried by the caller and zeroed where an episode
    starts, as `step` does."""
    from xiaoyarl.envs.multi.registry import make_multi_agent_env

    run_model, names = exported(model_runs[name], fmt)
    policy = load_policy(model_runs[name])
    if names is not None:
        assert names == (["obs", "state", "episode_start"] if policy.recurrent else ["obs"])
    env = make_multi_agent_env(policy.meta["env_id"], 3, seed=5)
    obs = env.reset(seed=5)[0].numpy()
    state, start, episodes = None, np.ones(3, bool), 0
    while episodes < 2:
        action, state_after = policy.step(obs, state, start)
        if policy.recurrent:
            fed = np.zeros_like(state_after) if state is None else state
            model_action, model_state = run_model(obs=obs, state=fed, episode_start=start)
            np.testing.assert_allclose(model_state, state_after, rtol=1e-5, atol=1e-6)
        else:
            (model_action,) = run_model(obs=obs)
        assert model_action.shape == action.shape and action.shape[:2] == (3, policy.num_agents)
        np.testing.assert_allclose(model_action, action, rtol=1e-5, atol=1e-5)
        state = state_after
        obs, _, terminal, truncate, _ = env.step(torch.as_tensor(action))
        obs, start = obs.numpy(), (terminal | truncate).numpy()
        episodes += int(start.all())


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_image_policy_exports_taking_the_envs_uint8_images(model_runs, fmt):
    run_model, names = exported(model_runs["ppo-pixels"], fmt)
    if names is not None:  # ONNX: its input is the env's (batch, 8, 8, 3) uint8 images
        ort = pytest.importorskip("onnxruntime")
        (obs,) = ort.InferenceSession(str(model_runs["ppo-pixels"] / FORMATS[fmt])).get_inputs()
        assert (obs.name, obs.type, obs.shape[1:]) == ("obs", "tensor(uint8)", [8, 8, 3])
    policy = load_policy(model_runs["ppo-pixels"])
    images = np.random.default_rng(0).integers(0, 256, (16, 8, 8, 3), dtype=np.uint8)
    (action,) = run_model(obs=images)
    np.testing.assert_array_equal(action, policy.predict(images))
    assert len(np.unique(action)) == 2  # the comparison is not vacuous


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_dict_policy_exports_taking_the_envs_keys_as_named_inputs(model_runs, fmt):
    run_model, names = exported(model_runs["ppo-dict"], fmt)
    if names is not None:
        assert names == ["cue", "image", "steps"]
    policy = load_policy(model_runs["ppo-dict"])
    rng = np.random.default_rng(0)
    obs = {"cue": rng.random((32, 1), dtype=np.float32),
           "image": rng.integers(0, 256, (32, 8, 8, 3), dtype=np.uint8),
           "steps": rng.integers(0, 10, 32)}  # fmt: skip
    (action,) = run_model(**obs)
    np.testing.assert_array_equal(action, policy.predict(obs))
    assert len(np.unique(action)) == 2


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_minatar_policy_exported_acts_as_the_policy_over_whole_episodes(model_runs, fmt):
    """The exported model takes the torch-native MinAtar env's own observations (its boolean
    channels, as the `minatar` package gives them) and, step after step over whole episodes,
    picks `load_policy`'s actions."""
    from xiaoyarl.envs import make_env

    run_model, names = exported(model_runs["ppo-minatar"], fmt)
    if names is not None:
        ort = pytest.importorskip("onnxruntime")
        path = str(model_runs["ppo-minatar"] / FORMATS[fmt])
        (obs_input,) = ort.InferenceSession(path).get_inputs()
        assert (obs_input.type, obs_input.shape[1:]) == ("tensor(bool)", [4, 10, 10])
    policy = load_policy(model_runs["ppo-minatar"])
    env = make_env("MinAtar/Breakout-v1", 1, seed=5)
    obs = env.reset(seed=5)[0].numpy()
    episodes, steps, actions = 0, 0, set()
    while True:
        (model_action,) = run_model(obs=obs)
        action = policy.predict(obs)
        np.testing.assert_array_equal(model_action, action)
        actions.update(action.tolist())
        obs, _, terminal, truncate, _ = env.step(torch.as_tensor(action))
        obs, steps = obs.numpy(), steps + 1
        if (terminal | truncate)[0]:  # (the env starts the next one itself)
            episodes += 1
            if episodes >= 2 and steps >= 60:  # whole episodes, at least 60 steps in all
                break
    assert len(actions) > 1  # the comparison is not vacuous


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_dict_policy_exported_acts_as_the_policy_over_whole_episodes_of_the_envs_dicts(
        model_runs, fmt):  # fmt: skip
    """The gymnasium env's own Dict observations (less the text key the run left out), step
    after step over whole episodes: the exported model's named inputs and `load_policy`'s
    `predict` pick the same actions."""
    import gymnasium

    run_model, _ = exported(model_runs["ppo-dict"], fmt)
    policy = load_policy(model_runs["ppo-dict"])
    env = gymnasium.make("pixel_envs:BrightSideDict-v0")
    obs, _ = env.reset(seed=7)
    episodes, steps, actions = 0, 0, set()
    while episodes < 3:
        kept = {key: np.asarray(obs[key])[None] for key in ("cue", "image", "steps")}
        (model_action,) = run_model(**kept)
        action = policy.predict(kept)
        np.testing.assert_array_equal(model_action, action)
        actions.add(int(action[0]))
        obs, _, terminated, truncated, _ = env.step(int(action[0]))
        steps += 1
        if terminated or truncated:
            obs, _ = env.reset()
            episodes += 1
    assert steps >= 3 * 10 and actions == {0, 1}
    env.close()


@pytest.mark.parametrize(
    "fields",
    [{"algo": "dqn", "critic_atoms": 11, "critic_v_min": 0.0, "critic_v_max": 100.0},
     {"algo": "d3qn", "critic_atoms": 11, "critic_v_min": 0.0, "critic_v_max": 100.0},
     {"algo": "dqn", "layer_norm": True}],
    ids=["dqn-c51", "d3qn-c51", "dqn-layer-norm"],
)  # fmt: skip
def test_q_network_policies_of_every_kind_load_and_act_as_the_agent(fields, tmp_path):
    """A policy file carries its network's own constructor arguments (`actor_kwargs`): C51's
    atoms and support, a Q-network's LayerNorm. Before, `load_policy` refused a C51 policy
    (an unknown actor class) and rebuilt a LayerNorm one without its LayerNorm."""
    from xiaoyarl import train_agent
    from xiaoyarl.agents.registry import make_agent
    from xiaoyarl.agents.settings import load_saved_config
    from xiaoyarl.envs import make_env

    config = Config(env_id="CartPole-v1", max_steps=600, eval_every=600, learning_starts=200,
                    seed=0, threads=1, eval_episodes=2, confirm_episodes=0, cwd=str(tmp_path),
                    **fields)  # fmt: skip
    train_agent(config, log=None)
    policy = load_policy(tmp_path)
    saved = load_saved_config(tmp_path / "config.yaml")
    spec = make_env("CartPole-v1", saved.num_envs).spec
    agent = make_agent(saved.algo, spec, saved, torch.device("cpu"))
    agent.load_state_dict(load_plain(tmp_path / "checkpoint" / "state.pt")["agent"])
    states = torch.randn(64, 4) * torch.tensor([1.0, 2.0, 0.2, 2.0])
    np.testing.assert_array_equal(policy(states.numpy()), agent.act(states).numpy())
    assert type(policy.actor).__name__ == type(agent.actor).__name__


def test_a_policy_finds_its_actor_class_where_the_agent_built_it(model_runs):
    """A policy file names its actor's module (since 2026-11-29); one written before is found
    among the library's networks, and a module that cannot be imported is named."""
    from xiaoyarl.policy import Policy

    meta = load_plain(model_runs["ppo-gru"] / "actor.pt")
    assert (meta["actor_module"], meta["actor_class"]) == ("xiaoyarl.core.nets", "ActorDiscretePPO")
    before = Policy({k: v for k, v in meta.items() if k != "actor_module"})
    obs = np.random.default_rng(0).standard_normal((5, 2)).astype(np.float32)
    np.testing.assert_array_equal(before.predict(obs), Policy(meta).predict(obs))
    with pytest.raises(CheckpointError, match="defined in no_such_package.nets, which cannot"):
        Policy({**meta, "actor_module": "no_such_package.nets"})


def test_a_recurrent_policys_step_refuses_a_state_of_the_wrong_shape(model_runs):
    policy = load_policy(model_runs["ppo-gru"])
    obs = np.zeros((3, 2), np.float32)
    action, state = policy.step(obs)  # None: new episodes
    assert action.shape == (3,) and state.shape == (3, 8)
    with pytest.raises(ValueError, match=r"state must have shape \(batch, 8\).*got \(3, 16\)"):
        policy.step(obs, np.zeros((3, 16), np.float32))
    assert load_policy(model_runs["ppo-pixels"]).step(np.zeros((8, 8, 3), np.uint8))[1] is None
