"""Training at scale around one agent: worker processes that collect (`parallel`), torchrun
learner ranks that share its update (`distributed`), and the fusion of several runs (`fusion`)."""
