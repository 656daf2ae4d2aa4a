"""MinAtar's five games (Young and Tian 2019) as torch-native envs, one module a game."""
