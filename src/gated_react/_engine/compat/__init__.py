"""create_agent's surface, taken under the gate: LangChain middleware and which is admitted,
HumanInTheLoopMiddleware read as policy, ``response_format``, what a tool is injected with, and
the arguments ``build_graph`` refuses."""
