"""Errors that reach the user as a one-line message (exit code 2 at the CLI)."""


class UsageError(ValueError):
    """Bad input from the user; the message names the fix. The CLI exits 2 with it."""


class ProbeRegistryError(UsageError):
    """A probe plugin is broken: it names the plugin and what is wrong."""
