"""Bundled tool environments, registered with Gymnasium under ``envaudit/``."""
