"""The Harmony namespaces the model already reads as something: one list for every check.

gpt-oss reads a recipient's namespace to know what it calls: `functions` holds the client's functions
and custom tools, `python` is the code interpreter, `browser` the web search tool, `container` the
namespace gpt-oss was trained to use for its container tool, `file_search` searches vector stores, `shell`, `local_shell` and `apply_patch` the
client's shell and file edits, `tool_search` finds deferred tools, and `assistant` is whom a tool answers.
A name a client or an operator gives to a namespace of its own (an MCP server's label, configured or
in the request; a `namespace` tool) may be none of these, or the model would call the wrong thing.
"""

from __future__ import annotations

RESERVED_NAMESPACES: frozenset[str] = frozenset(
    {"functions", "python", "browser", "container", "shell", "local_shell", "apply_patch", "tool_search", "assistant", "file_search"}
)


def reserved_problem(name: str) -> str | None:
    """Why `name` cannot name a namespace of its own, or None."""
    if name in RESERVED_NAMESPACES:
        return f"'{name}' is reserved: it names one of the model's built-in namespaces ({', '.join(sorted(RESERVED_NAMESPACES))})"
    return None
