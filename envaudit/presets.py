"""Rollout-pipeline presets named after the trainers whose defaults they mirror."""

from __future__ import annotations

from envaudit.pipeline import Pipeline

PRESETS: dict[str, Pipeline] = {
    "keep": Pipeline(name="keep", description="every rollout trained on its env return; GRPO std scaling"),
}


def get_preset(name: str) -> Pipeline:
    try:
        return PRESETS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, PRESETS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"no pipeline preset {name!r}{hint} (presets: {', '.join(PRESETS)})") from None
