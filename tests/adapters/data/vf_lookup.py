"""A verifiers tool env (a taskset plugin with an MCP ``Toolset``), written with verifiers' public
classes for envaudit's tests.

verifiers builds and launches a toolset's MCP server with ``uv`` (a package build and install),
which an offline machine cannot do; a toolset whose config has a ``url`` is a server someone else
runs. The tests run ``LookupTools`` themselves (``serve_in_thread``) and pass its URL as the
taskset option ``tools_url``. The tool ``lookup(key)`` returns the value stored under a key ("no
such key" for others) and raises on an empty key (an MCP error result). The answer is the value
under the task's key, in ``\\boxed{}``; ``correct`` is 1 for it.
"""

import os
import threading
import time
from pathlib import Path

import verifiers.v1 as vf
from verifiers.v1.utils.score import extract_boxed_answer

TABLE = {f"k{i}": f"v{i * 7 % 10}{i}" for i in range(10)}


class LookupToolsConfig(vf.ToolsetConfig):
    pass


class LookupTools(vf.Toolset[LookupToolsConfig, vf.State]):
    @vf.tool
    async def lookup(self, key: str) -> str:
        """The value stored under key."""
        if not key:
            raise ValueError("key must not be empty")
        return TABLE.get(key, "no such key")


class LookupConfig(vf.TasksetConfig):
    tools_url: str = ""


class LookupData(vf.TaskData):
    answer: str


class LookupTask(vf.Task[LookupData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def correct(self, task, trace) -> float:
        return 1.0 if extract_boxed_answer(trace.last_reply, strict=True).strip() == task.answer else 0.0


class LookupTaskset(vf.Taskset[LookupTask, LookupConfig]):
    def load(self):
        for key, value in TABLE.items():
            yield LookupTask(LookupData(prompt=f"Use the lookup tool to find the value under {key!r}; "
                                               "answer \\boxed{VALUE}.", answer=value), self.config.task)

    @classmethod
    def toolsets(cls, config):
        return [LookupTools(LookupToolsConfig(url=config.tools_url))]


def serve_in_thread(directory: Path, toolset: vf.Toolset | None = None) -> str:
    """Run ``toolset`` (default: ``LookupTools``) the way verifiers' launcher does
    (``ServerBase._serve``), in a daemon thread; return its MCP URL."""
    import verifiers.v1.mcp.server as server

    port_file = directory / "port"
    os.environ["MCP_PORT_FILE"] = str(port_file)
    server._die_with_parent = lambda: None  # it would tie the test process to its parent's life
    threading.Thread(target=(toolset or LookupTools(LookupToolsConfig()))._serve, daemon=True).start()
    for _ in range(200):
        if port_file.exists() and port_file.read_text():
            break
        time.sleep(0.05)
    del os.environ["MCP_PORT_FILE"]
    return f"http://127.0.0.1:{port_file.read_text()}/mcp"


__all__ = ["LookupConfig", "LookupData", "LookupTask", "LookupTaskset", "LookupTools"]
