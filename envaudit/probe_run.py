"""One probe's run in this process: on its own thread with a hard stop, failures turned into findings.

The scan runs a probe here when it has no worker process to host it; a probe host
(``envaudit.probe_host``) runs it here inside its worker process. Both sit above this module.
"""

from __future__ import annotations

import dataclasses
import traceback

from envaudit.deadline import DeadlineExceeded, DeadlineWorker
from envaudit.findings import Finding, Severity
from envaudit.probe import Probe, ProbeContext, cap_reason


def probe_failure(probe: Probe, status: str, message: str) -> Finding:
    """The ``env-error`` finding that stands for a probe that crashed (its checks did not run)."""
    return Finding(
        code="env-error", severity=Severity.WARN, probe=probe.name,
        title=f"probe {probe.name!r} {status}",
        summary=f"The {probe.name} probe {status}, so its incentives were not checked: {message}",
        evidence={"probe": probe.name, "status": status, "message": message},
        fix="Most likely the env misbehaves under this probe's policies (see the other env-error "
            "findings); if not, report it with this report.json.",
    )


def run_probe_here(probe: Probe, ctx: ProbeContext) -> tuple[str, str | None, list[Finding]]:
    """Run one probe on its own thread with a hard stop, in this process; failures become findings."""
    worker = DeadlineWorker(f"envaudit-probe-{probe.name}")
    # Probes stop at the safety cap between env calls; the hard stop is a backstop, late enough
    # for one last guarded call to hit its step deadline and be reported as a hang. A probe cut
    # here is not the env's fault: it is incomplete, not a finding.
    grace = 2.0 + 2 * ctx.config.step_timeout_s
    try:
        produced = worker.call(lambda: list(probe.run(ctx)), max(0.0, ctx.time_left()) + grace,
                               what=f"probe {probe.name!r}")
    except DeadlineExceeded:
        message = f"it did not stop within {grace:g} s of the wall-clock safety cap"
        ctx.incomplete("the rest of the probe (its findings are dropped)", f"{message}; "
                       + cap_reason(ctx.config.budget_s))
        return "overran", message, []
    except Exception as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
        message = f"{type(exc).__name__}: {exc}{where}"
        return "crashed", message, [probe_failure(probe, "crashed", message)]
    finally:
        worker.close()
    bad = [f for f in produced if not isinstance(f, Finding)]
    if bad:
        message = f"returned {type(bad[0]).__name__} instead of envaudit.Finding"
        return "crashed", message, [probe_failure(probe, "crashed", message)]
    return "ok", None, [dataclasses.replace(f, probe=f.probe or probe.name) for f in produced]


__all__ = ["probe_failure", "run_probe_here"]
