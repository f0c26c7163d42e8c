"""Bundled probes; each module exposes ``probe`` and is registered under ``envaudit.probes``."""
