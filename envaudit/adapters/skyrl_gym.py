"""skyrl-gym adapter: ``envaudit scan skyrl-gym:ENV --tasks rows.jsonl`` (skyrl-gym 0.4.0).

skyrl-gym envs are built per task: ``skyrl_gym.make(name, env_config=..., extras=row)``, then
``init(prompt) -> (messages, {})`` and ``step(str) -> {"observations", "reward", "done",
"metadata"}``. There is no reset, no seed, no success flag and no truncation. Tasks are the rows
of a SkyRL dataset (``prompt``, ``env_class``, ``reward_spec``, ``extra_info``, plus what an env
reads, such as text2sql's ``db_id``), which the user supplies with ``--tasks`` (JSONL, a JSON
list, or Parquet). ``extras`` is the row without ``prompt`` and ``env_class``, as SkyRL's
generator passes it. What the adapter maps:

- **Reset.** Each reset picks a row by the reset seed (``seed mod rows``, so a seed replays its
  row) and makes a fresh env for it; the observation is the prompt's user text, the system
  message goes to ``info["system_prompt"]``.
- **Success.** Judged apart from the scorer under audit, per env class (``skyrl_profiles``):
  gsm8k's extracted answer against the ground truth, aime's ``acc``, text2sql's row comparison,
  lcb's program run again on every test (``skyrl_code``), search's and searchcode's final answer
  against the reference (``skyrl_search``); never "the reward reached its maximum"
  (gsm8k_multi_turn pays format scores, aime pays -1 for a wrong answer, text2sql -1 for a broken
  transcript, lcb's grader can be made to pay a program that prints its expected output).
- **Catalogue.** Per profile; the code and search envs' wrong answers (and programs) are checked
  against the judge and the scorer before they are labelled (``info["relabelled"]``), and
  ``adapter_info["catalogue_check"]`` plays the catalogue on the first rows (``skyrl_check``).
- **Truncation.** A multi-turn env that says ``done`` at its ``max_turns`` without having been
  answered (no ``<solution>`` for text2sql, no correct answer for gsm8k_multi_turn) was cut by
  its turn limit: truncated, not terminated. A single-turn env (``max_turns`` 1) is answered by
  its one step. Envs that never end get the adapter's own cap (``turn_cap``, default 50).
- **Tools.** skyrl-gym reports a tool's failure only as text in the next observation; the
  adapter reads its well-known error texts (``skyrl_profiles.TOOL_TEXT``) into ``info["tool"]``
  (ok / error / timeout) on every step an env with tools goes on after. The step that ends the
  episode carries the env's verdict instead.
- **Reward.** A ``None`` reward counts as 0, with ``info["reward_note"]`` saying so.

Options (``--env-arg KEY=VALUE``): ``tasks`` (the row file; ``--tasks`` on the command line),
``turn_cap``; every other option goes to the env's ``env_config`` (text2sql needs
``db_path``, the folder that holds ``spider/database/DB_ID/DB_ID.sqlite``).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import functools
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from envaudit.adapters import package_version, require, skyrl_code, skyrl_search
from envaudit.adapters.base import CatalogueEnv
from envaudit.adapters.catalogue import WRONG, Strategy, wrong_answers
from envaudit.adapters.skyrl_profiles import GENERIC, ground_truth, profile_of
from envaudit.errors import UsageError

EXTRA = "skyrl"
TAKES_TASKS = True
"""This adapter reads its tasks from rows the user supplies (``--tasks``); adapters without this
flag generate their own and refuse the option."""
DEFAULT_TURN_CAP = 50
"""Agent turns after which the adapter truncates an env that never says ``done`` by itself."""
CHECKED_ROWS = 1000
"""Rows ``check`` builds an env for before the scan (the env's own asserts, a missing database); a
bad row further down a large dataset surfaces as an env error when a reset picks it."""
FULL_MARKS = 1.0
"""The code and search envs' pay for a correct answer (lcb, search's em, searchcode's gsm8k score)."""
WRONG_POOL = 8
"""Wrong candidates tried per row before the wrong slots give up on finding one the scorer rejects."""
TRANSPLANT_TRIES = 3
"""Rows after this one whose reference is tried as the transplant."""
TASKS_HINT = ("give the dataset rows with --tasks rows.jsonl (or --env-arg tasks=PATH; JSONL, a JSON "
              "list or Parquet, in SkyRL's format: prompt, env_class, reward_spec, extra_info)")


def _sg() -> Any:
    return require("skyrl_gym", package="skyrl-gym", extra=EXTRA)


# -- task rows --------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """Parquet hands back NumPy arrays and scalars inside rows; envs expect lists and numbers."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _read(path: Path) -> list[Any]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pandas as pd

        try:
            frame = pd.read_parquet(path)
        except Exception as exc:
            raise UsageError(f"--tasks {path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        return [_plain(r) for r in frame.to_dict("records")]
    text = path.read_text(encoding="utf-8")
    if suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--tasks {path}: not valid JSON ({exc})") from None
        if not isinstance(data, list):
            raise UsageError(f"--tasks {path}: expected a JSON list of rows, got {type(data).__name__}")
        return data
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as exc:
                    raise UsageError(f"--tasks {path}, line {number}: not valid JSON ({exc})") from None
        return rows
    raise UsageError(f"--tasks {path}: expected a .jsonl, .json or .parquet file of SkyRL dataset rows")


def _check_row(row: Any, where: str) -> None:
    if not isinstance(row, Mapping):
        raise UsageError(f"{where}: expected a row object (prompt, env_class, reward_spec, ...), got {type(row).__name__}")
    prompt = row.get("prompt")
    if prompt is None:
        raise UsageError(f"{where}: the row has no 'prompt' (a list of {{role, content}} chat messages); "
                         f"its keys are {sorted(row)}")
    if not (isinstance(prompt, list) and prompt
            and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in prompt)):
        raise UsageError(f"{where}: 'prompt' must be a non-empty list of {{role, content}} chat messages, "
                         f"got {str(prompt)[:80]!r}")


@functools.lru_cache(maxsize=8)
def _load(path: str, _mtime_ns: int, _size: int) -> tuple[dict[str, Any], ...]:
    rows = _read(Path(path))
    if not rows:
        raise UsageError(f"--tasks {path}: the file holds no rows")
    for number, row in enumerate(rows):
        _check_row(row, f"--tasks {path}, row {number}")
    return tuple(rows)


def load_rows(tasks: Any) -> tuple[dict[str, Any], ...]:
    """The rows of a SkyRL dataset file, checked (read once per file version: every env a scan
    makes shares them, and each reset deep-copies its row)."""
    if not isinstance(tasks, (str, Path)) or not str(tasks).strip():
        raise UsageError(f"--tasks {tasks!r}: expected the path of a row file; {TASKS_HINT}")
    path = Path(tasks).expanduser()
    if not path.is_file():
        raise UsageError(f"--tasks {str(path)!r}: no such file (relative to {Path.cwd()}); {TASKS_HINT}")
    stat = path.stat()
    return _load(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def _env_config(name: str, options: Mapping[str, Any]) -> Any:
    """The env's ``env_config``: the options, over skyrl-gym's own defaults for ``search``
    (``SearchEnvConfig``, its request log off) and the search server of ``searchcode``."""
    from omegaconf import OmegaConf

    merged = dict(options)
    if name == "search":
        import dataclasses

        from skyrl_gym.envs.search.env import SearchEnvConfig

        merged = {**dataclasses.asdict(SearchEnvConfig()), "log_requests": False, **merged}
    return OmegaConf.create(merged)


def _point_search(inner: Any, config: Any) -> None:
    """``searchcode`` builds its search tool with the default server (127.0.0.1:8000) whatever its
    config says; ``--env-arg search_url=URL`` points it elsewhere."""
    url = config.get("search_url") if hasattr(config, "get") else None
    for group in getattr(inner, "tool_groups", None) or []:
        if url and hasattr(group, "search_url"):
            group.search_url = str(url)
        if hasattr(group, "log_requests"):
            group.log_requests = False


def _make_inner(name: str, config: Any, row: Mapping[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """A fresh skyrl-gym env for one row and the row's prompt (SkyRL's generator does the same:
    ``extras`` is the row without ``prompt`` and ``env_class``)."""
    extras = copy.deepcopy({k: v for k, v in row.items() if k not in ("prompt", "env_class")})
    inner = _sg().make(name, env_config=config, extras=extras)
    _point_search(inner, config)
    return inner, copy.deepcopy(list(row["prompt"]))


# -- the adapter's entry points -----------------------------------------------------------------------
def check(name: str, tasks: Any = None, turn_cap: Any = DEFAULT_TURN_CAP, **options: Any) -> None:
    sg = _sg()
    if name not in sg.registry:
        close = difflib.get_close_matches(name, sorted(sg.registry), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (registered: {', '.join(sorted(sg.registry))})"
        raise UsageError(f"skyrl-gym has no env {name!r}{hint}")
    if tasks is None:
        raise UsageError(f"skyrl-gym:{name} needs tasks: skyrl-gym envs are built from dataset rows and "
                         f"ship none; {TASKS_HINT}")
    if not isinstance(turn_cap, int) or isinstance(turn_cap, bool) or turn_cap < 1:
        raise UsageError(f"--env-arg turn_cap={turn_cap!r}: expected a positive integer number of turns")
    rows = load_rows(tasks)
    classes = sorted({str(r["env_class"]) for r in rows if r.get("env_class") is not None})
    if classes and classes != [name]:
        raise UsageError(f"--tasks {tasks}: its rows are for env_class {', '.join(classes)}, not {name!r}; "
                         f"scan skyrl-gym:{classes[0]} or give rows for {name}")
    config = _env_config(name, options)
    profile = profile_of(name)
    for number, row in enumerate(rows[:CHECKED_ROWS]):  # the env's own checks: asserts, a missing database
        try:
            inner, prompt = _make_inner(name, config, row)
            inner.init(prompt)
            inner.close()
        except Exception as exc:
            hint = (" (skyrl-gym's text2sql reads its databases under env_config.db_path: pass "
                    "--env-arg db_path=DIR holding spider/database/DB_ID/DB_ID.sqlite)") if name == "text2sql" else ""
            raise UsageError(f"--tasks {tasks}, row {number}: skyrl-gym's {name} env rejected it: "
                             f"{type(exc).__name__}: {exc}{hint}") from None
        if profile.kind == "code":
            spec = row.get("reward_spec") if isinstance(row.get("reward_spec"), Mapping) else {}
            if skyrl_code.tests_of(spec.get("ground_truth")) is None:
                raise UsageError(f"--tasks {tasks}, row {number}: reward_spec.ground_truth is not lcb's tests (a JSON "
                                 "list of {input, output, testtype, metadata.func_name for functional tests}), "
                                 "which the judge runs")
        elif profile is not GENERIC and profile.reference_of(row) is None:
            raise UsageError(f"--tasks {tasks}, row {number}: no reward_spec.ground_truth, which the "
                             f"catalogue's reference answer is built from")


def make(name: str, **options: Any) -> SkyRLGymEnv:
    return SkyRLGymEnv(name, **options)


def _text(messages: Any) -> str:
    """The text of skyrl-gym observations (a list of chat messages), joined."""
    if isinstance(messages, str):
        return messages
    return "\n".join(str(m.get("content", "")) for m in messages or [] if isinstance(m, Mapping))


def _row_turns(row: Mapping[str, Any]) -> int | None:
    for source in (row, row.get("extra_info") or {}):
        value = source.get("max_turns") if isinstance(source, Mapping) else None
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                return None
    return None


def _row_tests(row: Mapping[str, Any]) -> Any:
    """A code row's tests, from its ``reward_spec.ground_truth`` (None when it has none)."""
    spec = row.get("reward_spec") if isinstance(row.get("reward_spec"), Mapping) else {}
    return skyrl_code.tests_of(spec.get("ground_truth"))


class SkyRLGymEnv(CatalogueEnv):
    """One skyrl-gym env per episode, built from the row the reset seed picks."""

    ecosystem = "skyrl-gym"

    def __init__(self, name: str, tasks: Any = None, turn_cap: int = DEFAULT_TURN_CAP, **options: Any) -> None:
        sg = _sg()
        if tasks is None:
            raise UsageError(f"skyrl-gym:{name} needs tasks; {TASKS_HINT}")
        self.rows = load_rows(tasks)
        self.env_name = name
        self.profile = profile_of(name)
        self.config = _env_config(name, options)
        # The shipped env classes' catalogues start with the ground truth in the grader's format
        # (a code row's solution, or a table of its tests); a user's env gets it written as is,
        # which need not be an answer.
        self.has_reference = self.profile is not GENERIC
        probe, _ = _make_inner(name, self.config, self.rows[0])
        own_turns = int(getattr(probe, "max_turns", 1) or 1)
        probe.close()
        declared = [t for t in (_row_turns(r) for r in self.rows) if t is not None]
        self.turn_limit = max([own_turns, *declared])
        # The shipped envs end themselves at max_turns; a user's env may not set it (BaseTextEnv's
        # default is 1 whatever the env does), so only the adapter's cap bounds its episodes.
        self.turn_cap = min(self.turn_limit, int(turn_cap)) if self.profile is not GENERIC else int(turn_cap)
        spec = sg.registry[name]
        super().__init__(self.profile.labels(), max_steps=self.turn_cap)
        self._info.update({
            "package": "skyrl-gym", "version": package_version("skyrl-gym"), "env": name,
            "env_class": str(spec.entry_point), "tasks": str(tasks), "rows": len(self.rows),
            "env_config": {k: repr(v) for k, v in options.items()},
            "max_turns": self.turn_limit,
            "success": self.profile.success_rule,
            "truncation": "done at max_turns without an answer (multi-turn envs); the adapter's turn cap",
            "tool_status": ("read from the reply and the search tool's answer (envaudit.adapters.skyrl_search."
                            "search_status)" if self.profile.tool_status else
                            "read from skyrl-gym's error texts in the next observation "
                            "(envaudit.adapters.skyrl_profiles.TOOL_TEXT)"),
            "replay": "the reset seed picks the row (seed mod rows); a fresh skyrl-gym env per reset "
                      "(skyrl-gym has no reset)",
        })
        if self.profile.kind == "code":
            self._info["reference"] = skyrl_code.solution_for(self.rows[0], _row_tests(self.rows[0]))[1]
            self._info["grader_attacks"] = ("every program runs in a child process only: lcb's grader forks one per "
                                            "reply, the judge starts a fresh interpreter per test in a temporary "
                                            "folder under a memory cap and a deadline")
        self.inner: Any = None
        self.index = 0
        self.row: dict[str, Any] = {}
        self._turn = 0
        self._last: str | None = None
        self._checked: dict[int, dict[str, Any]] = {}
        self.relabelled: list[dict[str, Any]] = []

    measured_check = "catalogue_check"

    def measure_check(self) -> dict[str, Any]:
        from envaudit.adapters.skyrl_check import catalogue_check

        return catalogue_check(self)

    # -- episodes --------------------------------------------------------------------------------
    def _reset(self, seed: int | None, options: Mapping[str, Any] | None):
        if self.inner is not None:
            self.inner.close()
        size = len(self.rows)
        self.index = seed % size if seed is not None else int(self.np_random.integers(size))
        self.row = copy.deepcopy(self.rows[self.index])
        self.inner, prompt = _make_inner(self.env_name, self.config, self.row)
        messages, _meta = self.inner.init(prompt)
        self._turn, self._last = 0, None
        system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        task = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        info: dict[str, Any] = {"index": self.index, "system_prompt": system}
        if self.profile.kind in ("code", "search", "searchcode"):
            self.relabelled = self.checked(self.index, task)["relabelled"]
            info["relabelled"] = self.relabelled
        return task, info

    def judge(self, text: str, row: Mapping[str, Any] | None = None) -> bool | None:
        """Success of a final reply, judged apart from the env's scorer (None: no judge)."""
        return self.profile.judge(text, self.row if row is None else row) if self.profile.judge else None

    def _step_text(self, text: str):
        with self._folder():
            out = self.inner.step(text)
        self._turn += 1
        self._last = text
        observation = _text(out.get("observations"))
        metadata = dict(out.get("metadata") or {})
        raw = out.get("reward")
        info: dict[str, Any] = {"index": self.index}
        if raw is None:
            info["reward_note"] = "skyrl-gym returned reward None; counted as 0"
        reward = float(raw) if raw is not None else 0.0
        if out.get("done"):
            correct = self.judge(text) if self.profile.judge else self.profile.verdict(self.inner, text, metadata)
            answered = self.profile.answered(text) if self.profile.answered else bool(correct)
            turns = int(getattr(self.inner, "turns", self._turn) or self._turn)
            limit = int(getattr(self.inner, "max_turns", 1) or 1)
            at_limit = limit > 1 and turns >= limit and not answered
            if correct is not None:
                info["success"] = bool(correct) and not at_limit
            return observation, reward, not at_limit, at_limit, info
        truncated = self._turn >= self.turn_cap
        if getattr(self.inner, "tool_groups", None):
            status, error = self.profile.status_of(text, observation)
            name = metadata.get("tool_name") or "tool"
            info["tool"] = {"name": str(name), "status": status, **({"error": error} if error else {})}
        if truncated:
            info["success"] = False
        return observation, reward, False, truncated, info

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()
            self.inner = None

    # -- the catalogue ---------------------------------------------------------------------------
    def _strategies(self) -> list[Strategy]:
        kind = self.profile.kind
        if kind == "code":
            return self._checked[self.index]["strategies"]
        if kind in ("search", "searchcode"):
            checked = self._checked[self.index]
            build = skyrl_search.search_strategies if kind == "search" else skyrl_search.searchcode_strategies
            return build(checked["reference"], self.prompt, self._last, transplant=checked["transplant"],
                         constant=checked["constant"], wrong=checked["wrong"])
        reference = ground_truth(self.row) or ""
        return self.profile.strategies(reference, self.prompt, self._last)

    @contextlib.contextmanager
    def _folder(self) -> Iterator[None]:
        """A code env's step runs in a fresh temporary working folder (lcb's grader forks the program
        there), so a program that reads or writes files sees none of the caller's; other envs' steps
        run where they are."""
        if self.profile.kind != "code":
            yield
            return
        before = os.getcwd()
        with tempfile.TemporaryDirectory(prefix="envaudit-step-") as folder:
            os.chdir(folder)
            try:
                yield
            finally:
                os.chdir(before)

    def fresh_reward(self, text: str, row: Mapping[str, Any] | None = None) -> float:
        """What the env's scorer pays ``text`` as the first reply to a fresh env of ``row``."""
        inner, prompt = _make_inner(self.env_name, self.config, self.row if row is None else row)
        try:
            inner.init(prompt)
            with self._folder():
                raw = inner.step(text).get("reward")
        finally:
            inner.close()
        return float(raw) if raw is not None else 0.0

    def first_prompt(self, index: int) -> str:
        """The prompt text of row ``index``'s first state (what a reset to it shows)."""
        inner, prompt = _make_inner(self.env_name, self.config, self.rows[index])
        try:
            messages, _ = inner.init(prompt)
        finally:
            inner.close()
        return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")

    def play_first(self, index: int, text: str) -> tuple[float, bool, bool | None, str | None]:
        """``(reward, done, success, tool status)`` of ``text`` as the first reply to a fresh env of
        row ``index``; the episode state of this env is left alone."""
        row = self.rows[index]
        inner, prompt = _make_inner(self.env_name, self.config, row)
        try:
            inner.init(prompt)
            with self._folder():
                out = inner.step(text)
            reward = float(out.get("reward") or 0.0)
            if out.get("done"):
                if self.profile.judge is not None:
                    return reward, True, self.judge(text, row), None
                return reward, True, self.profile.verdict(inner, text, dict(out.get("metadata") or {})), None
            status = None
            if getattr(inner, "tool_groups", None):
                status = self.profile.status_of(text, _text(out.get("observations")))[0]
            return reward, False, None, status
        finally:
            inner.close()

    def checked(self, index: int, prompt: str) -> dict[str, Any]:
        """The parts of row ``index``'s catalogue that are checked before they are labelled (kept
        per row): wrong answers the judge rejects and the scorer does not pay in full, and the
        transplant (the next rows' reference that does not answer this one). Each candidate set
        aside is listed in ``relabelled``."""
        if index in self._checked:
            return self._checked[index]
        row = self.rows[index]
        relabelled: list[dict[str, Any]] = []
        if self.profile.kind == "code":
            tests = _row_tests(row)
            solution, _ = skyrl_code.solution_for(row, tests)
            wrong = skyrl_code.checked_wrong(tests, lambda text: self.fresh_reward(text, row), FULL_MARKS, relabelled)
            transplant = self._code_transplant(index, tests, relabelled)
            found = {"strategies": skyrl_code.code_strategies(tests, prompt, solution, transplant, wrong),
                     "relabelled": relabelled}
        else:
            reference = self.profile.reference_of(row) or ""
            others = [o for o in (self.profile.reference_of(self.rows[(index + k) % len(self.rows)])
                                  for k in range(1, min(TRANSPLANT_TRIES, len(self.rows) - 1) + 1))
                      if o is not None and not self.judge(self.profile.answer(o), row)]
            wrong = self._wrong_answers(reference, row, others, relabelled)
            constant = self.profile.reference_of(self.rows[0]) or reference
            found = {"reference": reference, "wrong": wrong, "transplant": others[0] if others else wrong[0],
                     "constant": constant, "relabelled": relabelled}
        self._checked[index] = found
        return found

    def _code_transplant(self, index: int, tests: Any, relabelled: list[dict[str, Any]]) -> str:
        for k in range(1, min(TRANSPLANT_TRIES, len(self.rows) - 1) + 1):
            other = self.rows[(index + k) % len(self.rows)]
            other_tests = _row_tests(other)
            if other_tests is None:
                continue
            code = skyrl_code.solution_for(other, other_tests)[0]
            if not skyrl_code.passes(code, tests):
                return code
        relabelled.append({"label": "transplant", "success": False,
                           "why": "no other row's solution fails this row's tests: an empty program stands in"})
        return "pass\n"

    def _wrong_answers(self, reference: str, row: Mapping[str, Any], others: list[str],
                       relabelled: list[dict[str, Any]]) -> list[str]:
        """Two wrong answers, as reasoning-gym's adapter picks them: built from the reference's shape,
        then other rows' references; the judge must reject them, and one the scorer pays in full is
        set aside (kept only when no other is left)."""
        chosen: list[str] = []
        paid: list[str] = []
        pool = wrong_answers(reference, WRONG_POOL)
        for candidate in pool + [o for o in others if o not in pool]:
            if len(chosen) == len(WRONG):
                break
            slot = WRONG[len(chosen)]
            text = self.profile.answer(candidate)
            if self.judge(text, row):
                relabelled.append({"label": slot, "text": candidate, "success": True,
                                   "why": "a correct answer by the judge, not a wrong one"})
                continue
            reward = self.fresh_reward(text, row)
            if reward >= FULL_MARKS:
                relabelled.append({"label": slot, "text": candidate, "success": False, "score": reward,
                                   "why": "the scorer gives this wrong answer full marks"})
                paid.append(candidate)
                continue
            chosen.append(candidate)
        while len(chosen) < len(WRONG):
            chosen.append(paid.pop(0) if paid else f"{reference} envaudit {len(chosen)}")
        return chosen


__all__ = ["EXTRA", "TAKES_TASKS", "SkyRLGymEnv", "check", "load_rows", "make"]
