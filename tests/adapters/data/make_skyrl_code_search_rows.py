"""Builds the skyrl-gym rows of the code (``lcb``) and search (``search``, ``searchcode``) envs that
tests/adapters/test_skyrl_gym_code.py and test_skyrl_gym_search.py ship (run it to rebuild them).

Rows in SkyRL's own format: ``lcb`` rows as SkyRL's LiveCodeBench preparation writes them
(``skyrl-train/examples/livecodebench/lcb_dataset.py``: the prompt with LiveCodeBench's format
message, ``reward_spec.ground_truth`` the JSON list of tests with ``testtype`` and, for functional
tests, ``metadata.func_name``; ``extra_info.reference`` the solution); ``search`` rows as skyrl-gym's
own tests build them (``reward_spec: {"method": "rule", "ground_truth": {"target": ...}}``,
``max_turns``). The problems are written for these tests, nothing is downloaded.
"""
import json
import pathlib

OUT = pathlib.Path(__file__).resolve().parent
SYSTEM = ("You are an expert Python programmer. You will be given a question (problem specification) and will "
          "generate a correct Python program that matches the specification and passes all tests.\n\n")
STDIN_FORMAT = ("### Format: Read the inputs from stdin solve the problem and write the answer to stdout (do not "
                "directly test on the sample inputs). Enclose your code within delimiters as follows. Ensure that "
                "when the python program runs, it reads the inputs, runs the algorithm and writes output to STDOUT.\n"
                "```python\n# YOUR CODE HERE\n```\n\n### Answer: (use the provided format with backticks)\n\n")


def stdin_row(index, problem, sample, tests, solution):
    prompt = SYSTEM + problem + f"\n\nSample Input 1\n\n{sample[0]}\n\nSample Output 1\n\n{sample[1]}\n\n" + STDIN_FORMAT
    return {"data_source": "livecodebench", "prompt": [{"role": "user", "content": prompt}], "env_class": "lcb",
            "ability": "code",
            "reward_spec": {"method": "rule", "ground_truth": json.dumps(
                [{"input": i, "output": o, "testtype": "stdin"} for i, o in tests])},
            "extra_info": {"split": "test", "index": index, "reference": solution}}


def functional_row(index, problem, starter, fn_name, tests, solution):
    prompt = (SYSTEM + problem + "\n\n### Format: You will use the following starter code to write the solution to "
              f"the problem and enclose your code within delimiters.\n```python\n{starter}\n```\n\n"
              "### Answer: (use the provided format with backticks)\n\n")
    return {"data_source": "livecodebench", "prompt": [{"role": "user", "content": prompt}], "env_class": "lcb",
            "ability": "code",
            "reward_spec": {"method": "rule", "ground_truth": json.dumps(
                [{"input": i, "output": o, "testtype": "functional", "metadata": {"func_name": fn_name}}
                 for i, o in tests])},
            "extra_info": {"split": "test", "index": index, "reference": solution}}


LCB = [
    stdin_row(0, "Given two integers A and B on one line, print A + B.", ("3 4", "7"),
              [("3 4\n", "7\n"), ("-5 12\n", "7\n"), ("1000000000 1000000000\n", "2000000000\n"), ("0 0\n", "0\n")],
              "a, b = map(int, input().split())\nprint(a + b)\n"),
    stdin_row(1, "The first line holds N; the second N integers. Print the largest of them, then how often it occurs, "
                 "on two lines.", ("5\n1 9 3 9 2", "9\n2"),
              [("5\n1 9 3 9 2\n", "9\n2\n"), ("1\n-7\n", "-7\n1\n"), ("4\n2 2 2 2\n", "2\n4\n"), ("3\n5 -1 4\n", "5\n1\n")],
              "n = int(input())\nvalues = list(map(int, input().split()))\nbest = max(values)\n"
              "print(best)\nprint(values.count(best))\n"),
    functional_row(2, "Given a list of integers nums, return the sum of the squares of its even elements.",
                   "class Solution:\n    def evenSquares(self, nums: List[int]) -> int:\n        ", "evenSquares",
                   [("[1, 2, 3, 4]", "20"), ("[]", "0"), ("[-2, 5, 6]", "40"), ("[7, 9]", "0")],
                   "class Solution:\n    def evenSquares(self, nums: List[int]) -> int:\n"
                   "        return sum(x * x for x in nums if x % 2 == 0)\n"),
]

SEARCH_PROMPT = ("Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
                 "you get new information. After reasoning, if you find you lack some knowledge, you can call a search "
                 "engine by <search> query </search> and it will return the top searched results between "
                 "<information> and </information>. You can search as many times as your want. If you find no further "
                 "external knowledge needed, you can directly provide the answer inside <answer> and </answer>, "
                 "without detailed illustrations. For example, <answer> Beijing </answer>. Question: {q}\n")
SEARCH = [
    ("which river flows through the town of envaudit springs?", ["Kessel River", "the Kessel"]),
    ("what colour is the flag of the harbour club of lowmoor?", ["teal"]),
    ("in which year did the lowmoor lighthouse first shine?", ["1887"]),
    ("who founded the glass works at envaudit springs?", ["Ada Brightwater"]),
]


def search_rows():
    return [{"data_source": "nq", "prompt": [{"role": "user", "content": SEARCH_PROMPT.format(q=q)}],
             "env_class": "search", "ability": "fact-reasoning",
             "reward_spec": {"method": "rule", "ground_truth": {"target": t}},
             "extra_info": {"index": i}, "max_turns": 3} for i, (q, t) in enumerate(SEARCH)]


DOCUMENTS = [
    "Envaudit Springs is a small spa town; the Kessel River flows through it on its way to the sea.",
    "The Harbour Club of Lowmoor flies a teal flag with a white anchor.",
    "The Lowmoor lighthouse first shone in 1887 and was automated in 1960.",
    "The glass works at Envaudit Springs were founded by Ada Brightwater in 1902.",
]
"""The corpus the tests' local retrieval server searches (word overlap; see the search test)."""

SEARCHCODE_PROMPT = ("Solve the problem. You may call tools as <tool><python>code</python></tool> or "
                     "<tool><search>query</search></tool>. Give the final answer as <solution>#### N</solution>.\n{q}")
SEARCHCODE = [("What is 17 * 23 - 5?", "386"), ("What is the sum of the integers from 1 to 40?", "820"),
              ("What is 2 to the power 11?", "2048")]


def searchcode_rows():
    return [{"data_source": "gsm8k", "prompt": [{"role": "user", "content": SEARCHCODE_PROMPT.format(q=q)}],
             "env_class": "searchcode", "reward_spec": {"method": "rule", "ground_truth": a},
             "extra_info": {"index": i}, "max_turns": 3} for i, (q, a) in enumerate(SEARCHCODE)]


if __name__ == "__main__":
    for name, rows in (("skyrl_lcb.jsonl", LCB), ("skyrl_search.jsonl", search_rows()),
                       ("skyrl_searchcode.jsonl", searchcode_rows())):
        (OUT / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
