"""001 coding agent: ReAct text with the bracket form, on a throwaway copy of a sample project.

``Action: run_tests[tests/test_cart.py]`` and ``Action: read_file[src/cart.py]`` map the bracket
text onto each tool's one parameter; ``Action: finish[answer]`` ends the run. The workspace
tools are confined to the copy: a path that leads out of it is refused inside the tool, and with
``on_tool_error="observe"`` the model reads the refusal and carries on.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import BaseTool

from gated_react.examples.spec import Example, Expect, Scenario, copy_tree, package_files, script
from gated_react.policy import Budget, Policy
from gated_react.tools.workspace import workspace_tools

PROJECT = "cart_project"
NEIGHBOUR = "private-notes.txt"
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


def tools_with_a_neighbour(workdir: Path) -> list[BaseTool]:
    """The same tools, with a private file next to the copy (outside it) to try to reach."""
    (workdir / NEIGHBOUR).write_text("Private: the agent must never read this line.\n")
    return tools(workdir)


DIAGNOSIS = script(
    "Thought: I do not know how the test fails yet; running it shows the assertion.\n"
    "Action: run_tests[tests/test_cart.py]",
    "Thought: 3249 instead of 4499 means the two mugs counted once; total_cents lives in "
    "src/cart.py.\nAction: read_file[src/cart.py]",
    "Thought: The subtotal sums unit_cents and never multiplies by quantity.\n"
    "Action: finish[Cart.total_cents in src/cart.py sums item.unit_cents without multiplying "
    "by item.quantity, so a line with quantity 2 counts once (3249 instead of 4499); the "
    "subtotal should be sum(item.unit_cents * item.quantity for item in self.items).]",
)

SCENARIOS = (
    Scenario(
        name="find-the-cause",
        shows="runs the failing test, reads the code, names the cause with finish[...]",
        script=DIAGNOSIS,
        expect=Expect(
            "success",
            ("run_tests", "read_file"),
            answer_has=("src/cart.py", "total_cents", "quantity"),
            grounded=True,
        ),
    ),
    Scenario(
        name="stay-inside",
        shows="paths out of the copy are refused by the tool; the model reads why and goes on",
        tools=tools_with_a_neighbour,
        script=script(
            "Thought: Maybe there are notes next to the project.\n"
            f"Action: read_file[../{NEIGHBOUR}]",
            "Thought: Try an absolute path.\nAction: read_file[/etc/hostname]",
            "Thought: Only the project is readable; run its tests.\n"
            "Action: run_tests[tests/test_cart.py]",
            "Thought: Enough to report.\nAction: finish[Files outside the project copy are "
            "refused; inside it, tests/test_cart.py fails in test_the_total_counts_every_unit.]",
        ),
        expect=Expect(
            "success",
            ("read_file", "read_file", "run_tests"),
            errors=("tool_error:read_file", "tool_error:read_file"),
            answer_has=("refused",),
        ),
    ),
)

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
        tool_timeouts={"run_tests": 60.0},
        budget=Budget(max_steps=8, max_tool_calls=6, max_seconds=120),
    ),
    make_tools=tools,
    scenarios=SCENARIOS,
)
