"""Torch-only building blocks: networks and normalisers, return functions, the replay buffer,
the CUDA-graph helper and Adam. Nothing here knows an algorithm, an env or a runner."""
