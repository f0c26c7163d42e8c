"""A verifiers tool env whose one tool, ``wait(seconds)``, sleeps that long before it answers, and
whose agent's harness gives a tool call ``tool_timeout`` seconds (``load_environment(tools_url,
tool_timeout=0.5)``): the deadline verifiers' own harnesses put on an MCP call. Written with
verifiers' public classes for envaudit's tests; ``serve_in_thread`` runs ``WaitTools`` as a user runs
their tool server (``vf_lookup``'s way). Saying "done" earns 1."""

import asyncio
import importlib.util
from pathlib import Path

import verifiers.v1 as vf


class WaitToolsConfig(vf.ToolsetConfig):
    pass


class WaitTools(vf.Toolset[WaitToolsConfig, vf.State]):
    @vf.tool
    async def wait(self, seconds: float) -> str:
        """Sleep for the given seconds, then say so."""
        await asyncio.sleep(seconds)
        return f"waited {seconds} s"


class WaitConfig(vf.TasksetConfig):
    tools_url: str = ""


class WaitData(vf.TaskData):
    answer: str


class WaitTask(vf.Task[WaitData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def correct(self, task, trace) -> float:
        return 1.0 if task.answer in (trace.last_reply or "") else 0.0


class WaitTaskset(vf.Taskset[WaitTask, WaitConfig]):
    def load(self):
        yield WaitTask(WaitData(prompt="Call the wait tool, then say done.", answer="done"), self.config.task)

    @classmethod
    def toolsets(cls, config):
        return [WaitTools(WaitToolsConfig(url=config.tools_url))]


def load_environment(tools_url: str = "", tool_timeout: float = 0.5):
    return vf.SingleAgentEnvConfig(taskset=WaitConfig(id=__name__, tools_url=tools_url),
                                   agent=vf.AgentConfig(harness=vf.HarnessConfig(tool_timeout=tool_timeout)))


def serve_in_thread(directory: Path) -> str:
    """Run ``WaitTools`` in a daemon thread as ``vf_lookup.serve_in_thread`` runs its toolset; its MCP URL."""
    spec = importlib.util.spec_from_file_location("vf_lookup_serving", Path(__file__).with_name("vf_lookup.py"))
    lookup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lookup)
    return lookup.serve_in_thread(directory, WaitTools(WaitToolsConfig()))


__all__ = ["WaitConfig", "WaitData", "WaitTask", "WaitTaskset", "WaitTools", "load_environment"]
