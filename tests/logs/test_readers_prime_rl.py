"""The prime-rl reader in detail: end reasons, rewards, response text, trainable traces, steps, groups,
iterations, ``success`` and the notes and errors.

Episodes are written as ``FileMonitor.log_episodes`` writes them (``rollouts/step_{N}/{kind}/{subset}/
traces.jsonl``, one ``Episode.to_record()`` per line, None fields dropped), cut down to the fields the
reader uses; ``test_readers.py`` reads the full-size sample under data/prime-rl.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from envaudit.errors import UsageError
from envaudit.logs.readers import prime_rl

DATA = Path(__file__).parent / "data" / "prime-rl" / "rollouts"
FIXED_NOTES = [
    "group_id <- group.id; iteration <- run.work.step; return <- Trace.reward (sum of score * weight)",
    "length <- Trace.num_turns (sampled model turns); end_reason <- errors (agent timeout -> timeout), "
    "stop_condition / last finish_reason (-> truncated), else terminated",
    "steps: one per model turn; action <- the called tools' names, 'reply' for a turn without tool calls"]
NO_SUCCESS = "success: no correctness metric (correct, acc, ...) in the traces' metrics; missing (rewards are never " \
             "read as success)"


def _turn(content="done", *tools):
    message = {"role": "assistant", "content": content}
    if tools:
        message["tool_calls"] = [{"id": f"call{i}", "name": name, "arguments": "{}"} for i, name in enumerate(tools)]
    return message


def _trace(*turns, **fields):
    trace = {"agent": {"name": "agent", "trainable": True},
             "nodes": [{"message": {"role": "user", "content": "q"}, "sampled": False}]
             + [{"message": t, "sampled": True} for t in turns],
             "calls": [{"finish_reason": "stop"} for _ in turns],
             "rewards": {"correct_answer": {"score": 1.0, "weight": 1.0}}, "metrics": {}, "ok": True,
             "stop_condition": "agent_completed", "errors": []}
    return {**trace, **fields}


def _episode(eid, *traces, group="g0", step=0, **fields):
    record = {"id": eid, "task": {"type": "WikiTask", "key": "t0", "hash": "h0"}, "ok": True, "errors": [],
              "traces": list(traces)}
    if group is not None:
        record["group"] = {"id": group}
    if step is not None:
        record["run"] = {"type": "train", "work": {"type": "train", "step": step}}
    return {**record, **fields}


def _write(root: Path, folder: int | None, *episodes, kind="train", subset="all") -> Path:
    path = (root / f"step_{folder}" / kind / subset if folder is not None else root) / "traces.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in episodes))
    return path


def _col(run, column):
    return run.episodes[column].tolist()


def _end_reasons(tmp_path, *episodes):
    _write(tmp_path, 0, *episodes)
    return _col(prime_rl.read(tmp_path), "end_reason")


# ---------------------------------------------------------------- the sample: notes and columns

def test_sample_notes_tasks_responses_and_missing():
    run = prime_rl.read(DATA)
    assert run.notes == ["read 6 rollouts (train/all) from 2 prime-rl traces.jsonl file(s)", *FIXED_NOTES,
                         "1 episodes failed before any trace: end_reason error, return NaN",
                         "success <- 'metrics.correct' (0/1)"]
    assert _col(run, "task") == ["t0", "t0", "t1", "t1", "t0", "t0"]  # task.key, not the hash
    assert _col(run, "response")[0] == "Frank Herbert"
    assert _col(run, "response")[5] == ""  # e6 failed before any trace
    assert run.missing == ["steps.reward", "steps.tool_status", "steps.latency_s"]
    assert run.steps["step"].tolist()[:2] == [0, 1]
    assert run.source == "prime-rl"


# ---------------------------------------------------------------- end reasons

def test_ok_flags_decide_error(tmp_path):
    assert _end_reasons(tmp_path, _episode("a", _trace(_turn()), ok=False),  # the episode failed after its trace
                        _episode("b", _trace(_turn(), ok=False)),
                        _episode("c", {k: v for k, v in _trace(_turn()).items() if k != "ok"}),  # ok not stated
                        _episode("d", _trace(_turn()))) == ["error", "error", "error", "terminated"]


def test_an_ok_episode_without_traces_is_an_error(tmp_path):
    assert _end_reasons(tmp_path, _episode("a")) == ["error"]


def test_truncation_comes_from_the_last_call_that_did_not_fail(tmp_path):
    retried = [{"finish_reason": "stop"}, {"finish_reason": "length", "error": {"message": "connection reset"}}]
    assert _end_reasons(tmp_path, _episode("a", _trace(_turn(), calls=retried)),
                        _episode("b", _trace(_turn(), calls=[{"finish_reason": "length"}])),
                        _episode("c", _trace(_turn(), calls=[])),
                        _episode("d", _trace(_turn(), stop_condition="max_total_tokens"))) == \
        ["terminated", "truncated", "terminated", "truncated"]


# ---------------------------------------------------------------- return, length and response

def test_a_reward_without_weight_counts_once_and_an_unrun_one_not_at_all(tmp_path):
    _write(tmp_path, 0, _episode("a", _trace(_turn(), rewards={"correct_answer": {"score": 1.0},
                                                                 "format": {"score": 0.5, "weight": 0.2},
                                                                 "judge": None})))
    assert _col(prime_rl.read(tmp_path), "return") == pytest.approx([1.1])


def test_response_is_the_last_model_turns_text(tmp_path):
    parts = [{"type": "text", "text": "Frank"}, {"type": "image_url"}, {"type": "text", "text": "Herbert "}]
    no_content = {"role": "assistant", "tool_calls": [{"id": "c", "name": "search", "arguments": "{}"}]}
    _write(tmp_path, 0, _episode("a", _trace(_turn("thinking"), _turn(parts))),
           _episode("b", _trace(_turn(" Dune "))), _episode("c", _trace(_turn("x"), no_content)),
           _episode("d", _trace()))
    run = prime_rl.read(tmp_path)
    assert _col(run, "response") == ["Frank\n\nHerbert", "Dune", "", ""]
    assert _col(run, "length") == [2, 1, 2, 0]


def test_steps_name_every_tool_of_a_turn(tmp_path):
    _write(tmp_path, 0, _episode("a", _trace(_turn("", "search", "open"), _turn("answer"))))
    steps = prime_rl.read(tmp_path).steps
    assert steps["step"].tolist() == [0, 1]
    assert steps["action"].tolist() == ["search,open", "reply"]
    assert steps["tool_name"].tolist()[0] == "search"


# ---------------------------------------------------------------- traces, ids and groups

def test_non_trainable_traces_are_left_out_and_counted(tmp_path):
    judge = _trace(_turn(), agent={"name": "judge", "trainable": False})
    _write(tmp_path, 0, _episode("a", _trace(_turn()), judge), _episode("b", judge, _trace(_turn())))
    run = prime_rl.read(tmp_path)
    assert _col(run, "episode_id") == ["a", "b"]
    assert "2 non-trainable traces (agent.trainable false) left out" in run.notes


def test_several_trainable_traces_are_one_episode_each(tmp_path):
    # an agent without a trainable flag (or without an agent entry at all) is trained on, as prime-rl does
    unnamed = {k: v for k, v in _trace(_turn()).items() if k != "agent"}
    _write(tmp_path, 0, _episode("a", _trace(_turn(), agent={"name": "solver"}), _trace(_turn(), agent={}),
                                 unnamed))
    assert _col(prime_rl.read(tmp_path), "episode_id") == ["a/solver/0", "a/agent/1", "a/agent/2"]


def test_traceless_episodes_are_kept_and_the_file_read_on(tmp_path):
    failed = {"ok": False, "errors": [{"type": "SandboxError", "message": "sandbox failed to start"}],
              "task": {"type": "WikiTask", "hash": "h7"}}
    _write(tmp_path, 0, _episode("a", **failed), _episode("b", **failed), _episode("c", _trace(_turn())))
    run = prime_rl.read(tmp_path)
    assert _col(run, "episode_id") == ["a", "b", "c"]
    assert _col(run, "task") == ["h7", "h7", "t0"]  # no task.key: its hash
    assert _col(run, "response")[:2] == ["", ""]
    assert math.isnan(_col(run, "return")[0])
    assert "2 episodes failed before any trace: end_reason error, return NaN" in run.notes


def test_an_episode_without_a_group_is_its_own(tmp_path):
    _write(tmp_path, 0, _episode("a", _trace(_turn()), group=None), _episode("b", _trace(_turn()), group=None))
    run = prime_rl.read(tmp_path)
    assert _col(run, "group_id") == ["a", "b"]
    assert run.notes[-2] == "2 episodes had no group: each is its own group"


# ---------------------------------------------------------------- iterations and files

def test_iteration_is_the_work_step_else_the_folder(tmp_path):
    # an off-policy rollout generated at step 4 and logged under step_5; an older record without run.work
    _write(tmp_path, 5, _episode("a", _trace(_turn()), step=4), _episode("b", _trace(_turn()), step=None))
    _write(tmp_path, 10, _episode("c", _trace(_turn()), step=None))
    _write(tmp_path, 2, _episode("d", _trace(_turn()), step=None))
    assert _col(prime_rl.read(tmp_path), "iteration") == [2, 4, 5, 10]


def test_no_step_anywhere(tmp_path):
    log = _write(tmp_path, None, _episode("a", _trace(_turn()), step=None))
    with pytest.raises(UsageError, match=r"traces\.jsonl:1: the episode has no run\.work\.step and the file is not "
                                         r"under a step_N folder; point at prime-rl's rollouts/ folder$"):
        prime_rl.read(log)


def test_kind_and_subset_are_checked_and_named(tmp_path):
    with pytest.raises(UsageError, match=r"^kind='bad', subset='all': expected kind train or eval, subset all or "
                                         r"effective$"):
        prime_rl.read(DATA, kind="bad")
    with pytest.raises(UsageError, match=r"holds no eval/all/traces\.jsonl; point at \{output_dir\}/rollouts of a "
                                         r"prime-rl run \(the file monitor writes it, on unless --no-monitors\.file\), "
                                         r"or choose kind= \(train, eval\) and subset= \(all, effective\)$"):
        prime_rl.read(DATA, kind="eval")


def test_records_that_are_not_episodes(tmp_path):
    log = _write(tmp_path, 0, {"id": "a", "traces": []})
    with pytest.raises(UsageError, match=r"traces\.jsonl:1 has no task, ok \(it has: id, traces\); this is not a "
                                         r"prime-rl rollout dump"):
        prime_rl.read(log)
    log = _write(tmp_path, 0, _episode("a", task="WikiTask"))
    with pytest.raises(UsageError, match=r"traces\.jsonl:1: 'task' is not an object or 'traces' not a list; this is "
                                         r"not a verifiers episode record \(Episode\.to_record\)$"):
        prime_rl.read(log)


# ---------------------------------------------------------------- success and sniffing

def test_no_correctness_metric_and_an_empty_step_table(tmp_path):
    _write(tmp_path, 0, _episode("a", ok=False))
    run = prime_rl.read(tmp_path)
    assert math.isnan(_col(run, "return")[0])  # the schema's column, NaN: nothing was trained on
    assert run.notes[-1] == NO_SUCCESS
    assert list(run.steps.columns) == ["episode_id", "step", "action", "tool_name"] and run.steps.empty


def test_sniff_wants_a_verifiers_episode(tmp_path):
    assert not prime_rl.sniff(_write(tmp_path / "a", None, {"task": {}, "ok": True, "traces": []}))  # no id
    assert not prime_rl.sniff(_write(tmp_path / "b", None, {"id": "e", "task": {}, "traces": []}))  # no ok
    assert not prime_rl.sniff(_write(tmp_path / "c", None, {"id": "e", "task": {}, "ok": True}))  # no traces
    assert not prime_rl.sniff(_write(tmp_path / "d", None, {"id": "e", "task": "t", "ok": True, "traces": []}))
    assert prime_rl.sniff(_write(tmp_path / "e", None, _episode("e")))
