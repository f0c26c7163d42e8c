"""What several probes share (policies and measurements of endings, stalling); never a probe itself.

A probe imports from here, never from another probe."""
