"""``envaudit.numerics``: MKL's code path pinned at import, unless the user chose one."""

import os
import subprocess
import sys

from envaudit.numerics import BRANCH, pin_math_library


def test_the_branch_is_set_when_unset_and_kept_when_chosen():
    env: dict[str, str] = {}
    assert pin_math_library(env) == BRANCH == "COMPATIBLE" and env == {"MKL_CBWR": "COMPATIBLE"}
    chosen = {"MKL_CBWR": "AVX2"}
    assert pin_math_library(chosen) == "AVX2" and chosen == {"MKL_CBWR": "AVX2"}


def test_importing_envaudit_pins_it_before_torch_runs():
    code = "import os, envaudit, torch; torch.ones(3, 3) @ torch.ones(3, 3); print(os.environ['MKL_CBWR'])"
    env = {k: v for k, v in os.environ.items() if k != "MKL_CBWR"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "COMPATIBLE"
    env["MKL_CBWR"] = "AUTO"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "AUTO"
