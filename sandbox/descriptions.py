"""How the sandbox's tools are described to the model: its limits, and the files there."""

from __future__ import annotations

from .config import SandboxConfig
from .network import NetworkAccess

MAX_NAMED_FILES = 50


def describe_python_tool(
    config: SandboxConfig, data_dir: str | None, files_there: list[str] | None = None, network: NetworkAccess | None = None
) -> str:
    """The python tool's description for the model, stating the real limits and the files it has."""
    files = (
        f"Files written to '{data_dir}' persist for the session."
        if data_dir
        else "Files written to the current working directory persist for the session."
    )
    files += _files_there(data_dir, files_there)
    return (
        "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. "
        "This tool should be used for internal reasoning, but not for code that is intended to be visible to the user "
        "(e.g. when creating plots, tables, or files).\n\n"
        "When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook "
        "environment: variables and imports persist between calls, the value of the last expression is shown, and "
        "stdout, stderr and tracebacks are returned. python will respond with the output of the execution or time out "
        f"after {config.timeout_s:g} seconds. {files} {_network(network)} "
        f"Output beyond {config.max_output_bytes} bytes is truncated."
    )


def describe_shell_tool(
    config: SandboxConfig, data_dir: str | None, files_there: list[str] | None = None, network: NetworkAccess | None = None
) -> str:
    """The hosted shell's description for the model: where commands run, their limits, the files there."""
    place = data_dir or "the working directory"
    files = _files_there(data_dir, files_there)
    return (
        "Use this tool to run shell commands in a sandboxed Linux container, when running a command is the best way "
        "to do what is asked. Each command runs in bash, one after another, in "
        f"{place}, where files persist for the session and are shared with the python tool.{files} "
        "Each command's stdout, stderr and exit code come back in the tool's answer. "
        f"A command may run for at most {config.timeout_s:g} seconds (timeout_ms may ask for less), and output "
        f"beyond {config.max_output_bytes} bytes per stream is truncated. {_network(network)}"
    )


def _network(network: NetworkAccess | None) -> str:
    return network.described() if network is not None else "Internet access is disabled."


def _files_there(data_dir: str | None, files_there: list[str] | None) -> str:
    """The tools' words on the session's files: which are there, and how to give the user one."""
    if not data_dir:
        return ""
    words = ""
    if files_there:
        named = ", ".join(f"{data_dir}/{path}" for path in files_there[:MAX_NAMED_FILES])
        more = f" and {len(files_there) - MAX_NAMED_FILES} more" if len(files_there) > MAX_NAMED_FILES else ""
        words = f" The user's files are there: {named}{more}."
    return words + f" To give the user a file, save it under {data_dir} and link to it as sandbox:{data_dir}/NAME."
