"""envaudit: audit RL environments and the reward process around them before training in them."""
# ruff: noqa: E402  (quiet_start must run before the heavy imports)

from envaudit.startup import quiet_start

quiet_start()  # first: a Ctrl-C during the imports below ends the envaudit command without a traceback

from envaudit.numerics import pin_math_library

pin_math_library()  # before anything imports torch: the same seed gives the same GRPO run on any CPU

from envaudit.config import ScanConfig
from envaudit.faults import FaultInjector, inject_faults
from envaudit.findings import Finding, Severity
from envaudit.grouping import FindingGroup, group_findings
from envaudit.pipeline import Pipeline, group_advantages
from envaudit.probe import Probe, ProbeContext
from envaudit.recording import AuditWrapper, Recorder, Records, wrap
from envaudit.reporting.load import load_report
from envaudit.rollout import Policy, RandomPolicy, SequencePolicy
from envaudit.toolenv import Tool, ToolCall, ToolEnv, ToolOutput, ToolResult, Transition

__all__ = [
    "AuditWrapper",
    "FaultInjector",
    "Finding",
    "FindingGroup",
    "Pipeline",
    "Policy",
    "Probe",
    "ProbeContext",
    "RandomPolicy",
    "Recorder",
    "Records",
    "ScanConfig",
    "SequencePolicy",
    "Severity",
    "Tool",
    "ToolCall",
    "ToolEnv",
    "ToolOutput",
    "ToolResult",
    "Transition",
    "group_advantages",
    "inject_faults",
    "group_findings",
    "load_report",
    "wrap",
]

__version__ = "0.1.0"

# Importing the bundled envs registers them with Gymnasium under the envaudit/ namespace.
from envaudit import envs as _envs  # noqa: F401
