"""001 coding agent: ReAct text with the bracket form, on a throwaway copy of a sample project.

``Action: run_tests[tests/test_cart.py]`` and ``Action: read_file[src/cart.py]`` map the bracket
text onto each tool's one parameter; ``Action: finish[answer]`` ends the run. The workspace
tools are confined to the copy: a path that leads out of it is refused inside the tool, and with
``on_tool_error="observe"`` the model reads the refusal and carries on.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool

from gated_react.examples.spec import Example, copy_tree, package_files
from gated_react.policy import Budget, Policy
from gated_react.tools import toolkit_timeouts
from gated_react.tools.workspace import workspace_tools

PROJECT = "cart_project"
GOAL = (
    "tests/test_cart.py has been failing since yesterday's merge. Find the cause: run the "
    "failing test file, read the code it exercises, then finish with the cause in one or two "
    "sentences, naming the file and the function."
)


def project_copy(workdir: Path) -> Path:
    """The throwaway copy of the sample project in ``workdir`` (made once, then reused)."""
    root = workdir / PROJECT
    if not root.is_dir():
        copy_tree(package_files() / PROJECT, root)
    return root


def tools(workdir: Path) -> list[BaseTool]:
    """read_file, list_files and run_tests, confined to the copy."""
    return workspace_tools(project_copy(workdir))


EXAMPLE = Example(
    name="001-coding",
    title="Coding agent",
    shows="ReAct text with tool[argument] and finish[answer] on a throwaway project copy",
    goal=GOAL,
    base_policy=Policy(
        protocol="text",
        allow=frozenset({"run_tests", "read_file"}),
        on_tool_error="observe",
        on_invalid_action="retry",
        tool_timeouts=toolkit_timeouts(["workspace"]),  # past the sandbox's own limit
        budget=Budget(max_steps=8, max_tool_calls=6, max_seconds=120),
    ),
    make_tools=tools,
)
