"""Populations of agents (a member is a run): generational and tournament schemes, the slots that
run members, vmapped members, the leaderboard and search spaces."""
