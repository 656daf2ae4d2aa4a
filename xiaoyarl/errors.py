"""Errors that reach the user as one clear paragraph instead of a traceback."""


class XiaoyaError(Exception):
    """Base class: the message says what was wrong and what to do about it."""


class ConfigError(XiaoyaError, ValueError):
    """A configuration value, command-line option or YAML file is invalid."""


class EnvError(XiaoyaError):
    """An environment is unknown, cannot be built, or returned malformed data."""


class CheckpointError(XiaoyaError):
    """A run folder or checkpoint is missing, corrupted or does not match the config."""


class MarketDataError(ConfigError):
    """A market data file (or panel) is missing, malformed or fails validation: the message
    names the file, the first offending row or date, and how to fix it."""
