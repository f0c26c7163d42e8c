"""``benchmarks/mutation.py``'s survivor kinds on hand-written original/mutant pairs.

A mutant is ``text`` only when it changes the wording of a message and nothing a program reads: a
dict key, a subscript, a keyword argument's value, a comparison's operand or a one-token name
(a column, a contract value like ``"stall"``) changed is a decision, whatever the string says.
"""

from __future__ import annotations

import pytest

from tests.fixtures.benchmark_scripts import load_benchmark

M = load_benchmark("mutation")

ORIGINAL = '''
def x_judge__mutmut_orig(evidence, level, steps):
    title = "Step farming pays as much as success" if level == "at_least_success" else "Farming pays"
    summary = f"Dragging episodes out earns {evidence['mean']:+.3g} without succeeding"
    ended = steps.groupby("episode_id").tail(1)
    out = {"behaviour": "stall", "mean": evidence["mean"], "n": len(ended)}
    if "note" in evidence:
        out["note"] = evidence["note"]
    return Finding("length-bias", title, summary, out, fix="Stop paying per step.", probe="length")
'''


def mutant(old: str, new: str, n: int = 1) -> str:
    assert old in ORIGINAL, old
    return ORIGINAL.replace(old, new).replace("__mutmut_orig", f"__mutmut_{n}")


@pytest.mark.parametrize("old, new", [
    ('"Step farming pays as much as success"', '"XXStep farming pays as much as successXX"'),  # a title
    ('"Step farming pays as much as success"', '"step farming pays as much as success"'),
    ('"Farming pays"', '"FARMING PAYS"'),
    ("earns {evidence['mean']:+.3g} without", "EARNS {evidence['mean']:+.3g} WITHOUT"),  # f-string text
])
def test_a_change_inside_message_text_is_text(old, new):
    assert M.kind(ORIGINAL, mutant(old, new)) == M.TEXT


@pytest.mark.parametrize("old, new", [
    ('"at_least_success" else', '"XXat_least_successXX" else'),  # a comparison's operand
    ('{"behaviour": "stall"', '{"BEHAVIOUR": "stall"'),  # a dict key
    ('"behaviour": "stall"', '"behaviour": "STALL"'),  # a one-token value: a contract value
    ('evidence["mean"], "n"', 'evidence["XXmeanXX"], "n"'),  # a subscript
    ('groupby("episode_id")', 'groupby("EPISODE_ID")'),  # a column passed to a call
    ('probe="length"', 'probe="XXlengthXX"'),  # a keyword argument's value
    ('fix="Stop paying per step."', 'fix="stop paying per step."'),  # keyword values are read as names
    ('if "note" in evidence', 'if "XXnoteXX" in evidence'),  # membership is a comparison
    ("{evidence['mean']:+.3g}", "{evidence['MEAN']:+.3g}"),  # a key read inside an f-string
    ("{evidence['mean']:+.3g}", "{None}"),  # the number a message shows
    ('title = "Step farming pays as much as success"', "title = None"),  # text dropped
    ("len(ended)}", "len(ended) + 1}"),  # no string at all
])
def test_a_change_a_program_reads_is_not_text(old, new):
    assert M.kind(ORIGINAL, mutant(old, new)) == M.OTHER


def test_text_and_a_decision_in_one_mutant_is_not_text():
    both = mutant('"Farming pays"', '"FARMING PAYS"').replace('level == "at', 'level != "at')
    assert M.kind(ORIGINAL, both) == M.OTHER


def test_the_name_mutmut_gives_a_mutant_is_no_difference():
    # the function names differ (__mutmut_orig against __mutmut_7): only the wording does
    assert M.kind(ORIGINAL, mutant('"Farming pays"', '"XXFarming paysXX"', n=7)) == M.TEXT


def test_mutants_are_read_from_the_module_mutmut_wrote(tmp_path):
    source = ORIGINAL + mutant('"Farming pays"', '"FARMING PAYS"', 1) + mutant('level ==', 'level !=', 2) + '''
class Policy:
    def x\u01c1Policy\u01c1act__mutmut_orig(self, obs):
        return self.plan["next"]

    def x\u01c1Policy\u01c1act__mutmut_1(self, obs):
        return self.plan["NEXT"]
'''
    path = tmp_path / "mutants" / "envaudit" / "probes" / "length.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    names = ["envaudit.probes.length.x_judge__mutmut_1", "envaudit.probes.length.x_judge__mutmut_2",
             "envaudit.probes.length.x\u01c1Policy\u01c1act__mutmut_1", "envaudit.probes.length.x_gone__mutmut_1"]
    assert M.kinds(tmp_path, "envaudit/probes/length.py", names) == dict(zip(names, [M.TEXT, M.OTHER, M.OTHER, M.OTHER], strict=True))
    assert M.kinds(tmp_path / "missing", "envaudit/probes/length.py", names[:1]) == {names[0]: M.OTHER}


def test_the_decisions_score_leaves_text_survivors_out():
    row = {"killed": 80, "total": 110, "n_text": 10}
    assert M.decisions_score(row) == pytest.approx(0.8)


def test_the_last_runs_statuses_are_kept_beside_the_staging_folder(tmp_path):
    folder = tmp_path / "probes-length-py-subset"
    saved = M._saved(folder)
    assert saved.parent == tmp_path  # staging empties the folder itself
    saved.write_text('{"m.x_run__mutmut_1": "killed", "m.x_regress__mutmut_2": "survived"}')
    assert M._load_saved(saved, ["*.x_run__mutmut_*"]) == {"m.x_run__mutmut_1": "killed"}
    assert len(M._load_saved(saved, [])) == 2 and M._load_saved(tmp_path / "none.json", []) == {}
