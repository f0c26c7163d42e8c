"""Errors that reach the user as a one-line message (exit code 2 at the CLI)."""


class UsageError(ValueError):
    """Bad input from the user; the message names the fix. The CLI exits 2 with it."""


class ProbeRegistryError(UsageError):
    """A probe plugin is broken: it names the plugin and what is wrong."""


def user_frame(exc: BaseException) -> str | None:
    """``file:line`` of the deepest frame of ``exc``'s traceback in the user's code: outside
    envaudit and Gymnasium, where the failing env or factory lives."""
    import traceback
    from pathlib import Path

    import gymnasium

    own = (str(Path(__file__).resolve().parent), str(Path(gymnasium.__file__).resolve().parent))
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not str(Path(f.filename).resolve()).startswith(own) and not f.filename.startswith("<")]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


def a_type(value: object) -> str:
    """``"an int"``, ``"a list"``: a value's type name with its article, for error messages."""
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"
