"""OpenTelemetry spans of a run: the application installs an SDK (here with an in-memory
exporter; in production an OTLP exporter to a collector, Phoenix, Jaeger...), and every run of
every graph is traced. A paused run resumed later is two invocations, the second linked to the
first. Runs offline with a scripted model.
"""

from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gated_react import Policy, build_graph, resume, run
from gated_react.testing import ScriptedChatModel, call
from gated_react.tools.support import SUPPORT_TOOLS

# Once, at start-up: the library only uses the OpenTelemetry API, so this is what turns it on.
exporter = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "refunds"}))
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

model = ScriptedChatModel(
    replies=[
        call("get_user_profile", user_id=42),
        call("search_policy", query="refund"),  # not allowed: refused, shown to the model
        call("get_user_billing", user_id=42),  # needs a human: the run pauses
        "Yes: USD 49.00, within the 14-day window.",
    ]
)
policy = Policy(
    allow=frozenset({"get_user_profile", "get_user_billing"}),
    require_approval=frozenset({"get_user_billing"}),
    on_tool_error="observe",
)
graph = build_graph(model, SUPPORT_TOOLS, policy=policy, checkpointer=InMemorySaver())
print("run:", run(graph, "Can user 42 get a refund?", thread_id="refund-42")["status"])
answer = {"decisions": [{"type": "approve"}]}
print("resume:", resume(graph, "refund-42", answer)["stop_reason"])

spans = sorted(exporter.get_finished_spans(), key=lambda span: span.start_time or 0)
for root in (span for span in spans if span.parent is None):
    attributes = root.attributes or {}
    links = len(root.links)
    print(root.name, attributes["gated_react.status"], f"links={links}")
    for child in spans:
        if child.parent is not None and child.parent.span_id == root.context.span_id:
            verdict = (child.attributes or {}).get("gen_ai.guardrail.result.value")
            print("  ", child.name, *([verdict] if verdict else []))
