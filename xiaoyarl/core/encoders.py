"""Encoders: the first layers of a network, from a raw observation to a flat feature vector.

Every network reads its observations through an encoder (its `norm` attribute, the name it had
when vectors were all there was): a module with `out_dim` (the width of its features) and
`update(obs)` (merge a batch into running statistics of its own; the agent's shared normaliser
is updated by the agent). Vector observations go through the agent's shared `RunningNorm`
(`core/nets.py`), which is an encoder of this kind; images go through a CNN that converts them
on the device: uint8 pixels are scaled to [0, 1] there, so rollouts and replay keep them as
uint8 (4x less memory than float32).

The CNNs, each ending in the hidden layer its paper puts after the convolutions:
- "nature": Mnih et al., "Human-level control through deep reinforcement learning", Nature
  2015: 32 8x8/4, 64 4x4/2, 64 3x3/1 convolutions, then 512 units (Atari's 84x84 frames).
- "impala": Espeholt et al., "IMPALA", ICML 2018: three stacks (16, 32, 32 channels) of a 3x3
  convolution, a 3x3/2 max-pool and two residual blocks, then 256 units.
- "minatar": Young and Tian, "MinAtar", 2019: one 16-channel 3x3 convolution (its 128-unit
  hidden layer is the head's: `net_dims: [128]` gives the paper's network).
"auto" picks "minatar" for images smaller than 36 pixels a side (nature's kernels need more) and
"nature" otherwise; "mlp" flattens an image. A user's own encoder is named "module:Class":
`Class(obs_shape)` must have `out_dim` and take float32 observations `(batch, *obs_shape)`
(uint8 images already scaled to [0, 1]).
"""

from __future__ import annotations

import importlib
import math
from typing import Protocol, cast

import torch
from torch import nn

from xiaoyarl.core.nets import RunningNorm
from xiaoyarl.errors import ConfigError

ENCODERS = ("auto", "mlp", "nature", "impala", "minatar")
MIN_NATURE_SIZE = 36  # the smallest side the nature CNN's kernels and strides accept


def image_layout(
    obs_shape: tuple[int, ...], channels_last: bool | None = None
) -> tuple[tuple[int, int, int], bool] | None:
    """`((C, H, W), channels_last)` of an image observation shape, or None for other shapes.
    A 3-D shape is an image; its channels are the last axis if `channels_last` (what the env
    says, `EnvSpec.channels_last`), the first if False; where the env says nothing (None), the
    first axis when that is the smallest, else the last (as Stable-Baselines3 decides). A 2-D
    shape is one channel."""
    if len(obs_shape) == 2:
        return (1, obs_shape[0], obs_shape[1]), False
    if len(obs_shape) != 3:
        return None
    if channels_last is False or (channels_last is None and obs_shape[0] <= min(obs_shape[1:])):
        return (obs_shape[0], obs_shape[1], obs_shape[2]), False
    h, w, c = obs_shape
    return (c, h, w), True


def to_float(obs: torch.Tensor) -> torch.Tensor:
    """Observations as float32: uint8 scaled to [0, 1], other types (bool grids, floats) as
    they are."""
    if obs.dtype == torch.uint8:
        return obs.float().mul_(1.0 / 255.0)
    return obs.float()


class Encoder(nn.Module):
    """Base of the encoders with parameters: `out_dim`, and no running statistics.

    Where two networks share an encoder (PPO's actor and critic, `share_encoder`), a loss reads
    the same observations through it twice. A call with gradients on remembers its input and
    output for the next call only; if that next call is on the very same tensor, unchanged, with
    the parameters unchanged, it returns the same output, so the features are computed, and
    back-propagated, once (as CleanRL's and Stable-Baselines3's shared CNNs do). The same
    numbers as computing them twice: the features are a deterministic function of both. A
    backward pass through the output ends the memory: the graph it belongs to is spent, and the
    optimizer step that follows changes the parameters without a version a key could read
    (torch's fused Adam does not bump it), as SAC's critic reads one batch before its step and
    after it."""

    out_dim: int
    _memo: tuple | None = None

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        memo, self._memo = self._memo, None
        if not torch.is_grad_enabled():  # acting and evaluating: nothing to share, no key read
            return super().__call__(obs)
        key = self._memo_key(obs)
        if memo is not None and key is not None and memo[0] is obs and memo[1] == key:
            return memo[2]
        out = super().__call__(obs)
        if key is not None and out.requires_grad:
            self._memo = (obs, key, out)
            out.register_hook(self._forget)
        return out

    def _forget(self, grad: torch.Tensor) -> None:
        """A backward pass reached the remembered output: forget it (see the class)."""
        self._memo = None

    def _memo_key(self, obs: torch.Tensor) -> tuple[int, ...] | None:
        """The versions of the input and of the parameters (in-place changes bump them); None
        where they cannot be read (inside `torch.func` transforms)."""
        try:
            return (obs._version, *(p._version for p in self.parameters()))
        except (RuntimeError, NotImplementedError):
            return None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_memo": None}  # copies and pickles never carry a memo

    def update(self, obs: torch.Tensor) -> None:
        """Running statistics to merge: none (images are scaled by a constant)."""


class ImageInput(nn.Module):
    """Raw images `(batch, *obs_shape)` -> float32 `(batch, C, H, W)`."""

    def __init__(self, obs_shape: tuple[int, ...], channels_last: bool | None = None) -> None:
        super().__init__()
        layout = image_layout(obs_shape, channels_last)
        assert layout is not None, "ImageInput takes image shapes only"
        self.chw, self.channels_last = layout

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = to_float(obs)
        if self.channels_last:
            return x.movedim(-1, -3)
        return x.reshape(x.shape[0], *self.chw)  # a 2-D image gains its channel axis


def _conv(c_in: int, c_out: int, kernel: int, stride: int) -> nn.Conv2d:
    conv = nn.Conv2d(c_in, c_out, kernel, stride)
    nn.init.orthogonal_(conv.weight, math.sqrt(2))  # as CleanRL's layer_init
    assert conv.bias is not None
    nn.init.zeros_(conv.bias)
    return conv


class ChannelNorm(nn.Module):
    """LayerNorm over the channels at each position of `(batch, C, H, W)` feature maps, as a
    LayerNorm on channels-last maps (PQN's CNNs put one after each convolution)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.movedim(1, -1)).movedim(-1, 1)


def _conv_relu(c_in: int, c_out: int, kernel: int, stride: int, layer_norm: bool) -> list:
    """A convolution, with `ChannelNorm` after it where `layer_norm`, then ReLU."""
    return [_conv(c_in, c_out, kernel, stride), *([ChannelNorm(c_out)] if layer_norm else []),
            nn.ReLU()]  # fmt: skip


def _linear(d_in: int, d_out: int) -> nn.Linear:
    linear = nn.Linear(d_in, d_out)
    nn.init.orthogonal_(linear.weight, math.sqrt(2))
    nn.init.zeros_(linear.bias)
    return linear


class CNNEncoder(Encoder):
    """An image encoder: `ImageInput`, convolutions, flatten, then an optional hidden layer
    (with LayerNorm before its ReLU where `layer_norm`)."""

    def __init__(self, obs_shape: tuple[int, ...], convs: nn.Module, hidden: int | None,
                 channels_last: bool | None = None, layer_norm: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.input = ImageInput(obs_shape, channels_last)
        self.convs = convs
        self.layer_norm = layer_norm  # how it was built (a saved policy rebuilds it so)
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, *self.input.chw)).flatten(1).shape[1]
        norm = [nn.LayerNorm(hidden)] if hidden and layer_norm else []
        self.hidden = (
            nn.Sequential(_linear(flat, hidden), *norm, nn.ReLU()) if hidden else nn.Identity()
        )
        self.out_dim = hidden or flat

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.hidden(self.convs(self.input(obs)).flatten(1))


def nature_cnn(obs_shape: tuple[int, ...], channels_last: bool | None = None,
               layer_norm: bool = False) -> CNNEncoder:  # fmt: skip
    """Mnih et al. 2015's convolutions and 512 hidden units."""
    c = _image_size(obs_shape, "nature", channels_last)
    convs = nn.Sequential(*_conv_relu(c, 32, 8, 4, layer_norm),
                          *_conv_relu(32, 64, 4, 2, layer_norm),
                          *_conv_relu(64, 64, 3, 1, layer_norm))  # fmt: skip
    return CNNEncoder(obs_shape, convs, 512, channels_last, layer_norm)


def minatar_cnn(obs_shape: tuple[int, ...], channels_last: bool | None = None,
                layer_norm: bool = False) -> CNNEncoder:  # fmt: skip
    """Young and Tian 2019's one 16-channel 3x3 convolution (no hidden layer of its own)."""
    c = _image_size(obs_shape, "minatar", channels_last)
    convs = nn.Sequential(*_conv_relu(c, 16, 3, 1, layer_norm))
    return CNNEncoder(obs_shape, convs, None, channels_last, layer_norm)


class ResidualBlock(nn.Module):
    """x + conv(relu(conv(relu(x)))), 3x3 convolutions keeping the size (IMPALA)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


def impala_cnn(obs_shape: tuple[int, ...], channels_last: bool | None = None,
               layer_norm: bool = False) -> CNNEncoder:  # fmt: skip
    """Espeholt et al. 2018's three stacks (16, 32, 32 channels) and 256 hidden units."""
    c = _image_size(obs_shape, "impala", channels_last)
    layers: list[nn.Module] = []
    for out in (16, 32, 32):
        norm = [ChannelNorm(out)] if layer_norm else []
        layers += [nn.Conv2d(c, out, 3, padding=1), *norm, nn.MaxPool2d(3, 2, padding=1),
                   ResidualBlock(out), ResidualBlock(out)]  # fmt: skip
        c = out
    return CNNEncoder(obs_shape, nn.Sequential(*layers, nn.ReLU()), 256, channels_last, layer_norm)


class FlatEncoder(Encoder):
    """Any observation flattened to a vector, uint8 scaled to [0, 1] (the agent's running
    normaliser, which it keeps, is off for other shapes than vectors)."""

    def __init__(self, norm: RunningNorm) -> None:
        super().__init__()
        self.norm = norm
        self.out_dim = norm.out_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.norm(to_float(obs.flatten(1)))


class UserEncoder(Encoder):
    """A user's encoder class: float32 observations in (uint8 scaled to [0, 1])."""

    def __init__(self, body: nn.Module, out_dim: int) -> None:
        super().__init__()
        self.body = body
        self.out_dim = out_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(to_float(obs))


class DictEncoder(Encoder):
    """Dict observations, packed side by side in one float32 vector (`EnvSpec.obs_keys`): each
    image key through its own CNN (chosen as "auto" chooses; uint8 values scaled to [0, 1]),
    the other keys (vectors, one-hots) through the agent's running normaliser, all features
    side by side."""

    def __init__(self, keys: tuple[tuple[str, tuple[int, ...], str], ...], norm: RunningNorm,
                 ) -> None:  # fmt: skip
        super().__init__()
        self.norm = norm
        self.keys = keys
        self.sizes = [math.prod(shape) for _, shape, _ in keys]
        self.cnns = nn.ModuleDict({
            key: CNNS[encoder_kind("auto", shape)](shape)
            for key, shape, _ in keys if image_layout(shape) is not None
        })  # fmt: skip
        widths = [cast(CNNEncoder, self.cnns[key]).out_dim if key in self.cnns else size
                  for (key, _, _), size in zip(keys, self.sizes, strict=True)]  # fmt: skip
        self.out_dim = sum(widths)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        raw = obs.split(self.sizes, dim=-1)
        normed = self.norm(obs).split(self.sizes, dim=-1)
        features = []
        for (key, shape, kind), x, y in zip(self.keys, raw, normed, strict=True):
            if key in self.cnns:
                image = x.view(x.shape[0], *shape) * (1 / 255 if kind == "uint8" else 1)
                features.append(self.cnns[key](image))
            else:
                features.append(y)
        return torch.cat(features, dim=-1)


CNNS = {"nature": nature_cnn, "impala": impala_cnn, "minatar": minatar_cnn}


def _image_size(obs_shape: tuple[int, ...], kind: str, channels_last: bool | None) -> int:
    """The channels of an image shape; a ConfigError where `kind` cannot read it."""
    layout = image_layout(obs_shape, channels_last)
    if layout is None:
        raise ConfigError(
            f"encoder={kind!r} reads images (C, H, W), (H, W, C) or (H, W); the env's "
            f"observations have shape {obs_shape}. Use encoder 'mlp' or 'auto'."
        )
    (c, h, w), _ = layout
    if kind == "nature" and min(h, w) < MIN_NATURE_SIZE:
        raise ConfigError(
            f"encoder='nature' needs images of at least {MIN_NATURE_SIZE}x{MIN_NATURE_SIZE} "
            f"pixels; the env's are {h}x{w}. Use encoder 'minatar' or 'impala' for small images."
        )
    return c


def encoder_kind(kind: str, obs_shape: tuple[int, ...], channels_last: bool | None = None) -> str:
    """The encoder "auto" stands for with this observation shape (other kinds as they are)."""
    if kind != "auto":
        return kind
    layout = image_layout(obs_shape, channels_last)
    if layout is None:
        return "mlp"
    _, h, w = layout[0]
    return "minatar" if min(h, w) < MIN_NATURE_SIZE else "nature"


class ObsSpec(Protocol):
    """What an encoder is built from: an env spec's observation fields (`envs/base.py`)."""

    @property
    def obs_shape(self) -> tuple[int, ...]: ...
    @property
    def obs_keys(self) -> tuple[tuple[str, tuple[int, ...], str], ...] | None: ...
    @property
    def channels_last(self) -> bool | None: ...


def make_encoder(kind: str, spec: ObsSpec, norm: RunningNorm,
                 layer_norm: bool = False) -> Encoder | RunningNorm:  # fmt: skip
    """A new encoder of `kind` for the observations `spec` describes. "mlp" (and "auto" for
    vectors) returns `norm`, the agent's running normaliser itself for vectors (shared by all
    its networks, as before encoders existed), or a `FlatEncoder` around it for other shapes;
    "auto" for Dict observations, a `DictEncoder`. `layer_norm`: the CNNs put LayerNorm after
    each convolution (over its channels) and in their hidden layer (PQN's networks)."""
    obs_shape = spec.obs_shape
    if spec.obs_keys and kind == "auto":
        return DictEncoder(spec.obs_keys, norm)
    kind = encoder_kind(kind, obs_shape, spec.channels_last)
    if kind == "mlp":
        return norm if len(obs_shape) == 1 else FlatEncoder(norm)
    if kind in CNNS:
        return CNNS[kind](obs_shape, spec.channels_last, layer_norm)
    body = _user_class(kind)(obs_shape)
    out_dim = body.__dict__.get("out_dim")  # a plain attribute, not a submodule or a tensor
    if not isinstance(out_dim, int):
        raise ConfigError(
            f"encoder={kind!r}: the encoder must set `self.out_dim` (an int, the width of its "
            f"features) in its constructor."
        )
    encoder = UserEncoder(body, out_dim)
    out = encoder(torch.zeros(2, *obs_shape))
    if tuple(out.shape) != (2, encoder.out_dim):
        raise ConfigError(
            f"encoder={kind!r}: a batch of observations {(2, *obs_shape)} gave shape "
            f"{tuple(out.shape)}, but its out_dim says {(2, encoder.out_dim)}."
        )
    return encoder


def _user_class(kind: str) -> type[nn.Module]:
    """The class a "module:Class" encoder names; a ConfigError saying what is wrong."""
    module_name, _, class_name = kind.partition(":")
    if not module_name or not class_name:
        raise ConfigError(
            f"encoder={kind!r}: choose one of {', '.join(ENCODERS)}, or name your own encoder "
            f"class as 'module:Class'."
        )
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as error:
        raise ConfigError(
            f"encoder={kind!r}: cannot import {class_name} from {module_name} ({error}). The "
            f"module must be importable (installed, or on PYTHONPATH)."
        ) from error
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ConfigError(f"encoder={kind!r}: {class_name} must be a torch.nn.Module class.")
    return cls
