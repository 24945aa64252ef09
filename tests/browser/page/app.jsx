// A small chat page on useStream, drawn the way Agent Chat UI draws a thread: a card per tool
// call of an AIMessage, a card per ToolMessage, the answer, and the approval panel (approve /
// edit / reject) under the last message when it is an AI or tool message, or in a placeholder
// when the thread has none yet. Nothing here knows gated-react: it reads `messages` and the
// thread's interrupt (a LangChain HITLRequest) as any UI on the hook would.
// Query string: ?api=<langgraph server>&assistant=<assistant id>[&thread=<thread id>]
import { useStream } from "@langchain/langgraph-sdk/react";
import { useEffect, useRef, useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(window.location.search);

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part) => part?.type === "text")
    .map((part) => part.text)
    .join("");
}

function ToolCalls({ calls }) {
  return calls.map((call, index) => (
    <div
      key={call.id ?? index}
      className="card tool-call"
      data-call-id={call.id ?? ""}
      data-name={call.name}
    >
      <h3>
        {call.name}
        {call.id && <code>{call.id}</code>}
      </h3>
      <pre className="args">{JSON.stringify(call.args ?? {})}</pre>
    </div>
  ));
}

function ToolResult({ message }) {
  return (
    <div
      className="card tool-result"
      data-call-id={message.tool_call_id ?? ""}
      data-name={message.name ?? ""}
      data-status={message.status ?? "success"}
    >
      <h3>
        {message.name ?? "tool"} result
        {message.tool_call_id && <code>{message.tool_call_id}</code>}
      </h3>
      <pre className="content">{textOf(message.content)}</pre>
    </div>
  );
}

// LangChain's HITL decisions, sent back as Agent Chat UI sends them: submit with a resume command.
function Approval({ stream }) {
  const request = stream.interrupt?.value ?? {};
  const action = request.action_requests?.[0];
  const review = request.review_configs?.find((c) => c.action_name === action?.name);
  const allowed = review?.allowed_decisions ?? ["approve", "edit", "reject"];
  const [mode, setMode] = useState(null);
  const [args, setArgs] = useState(JSON.stringify(action?.args ?? {}));
  const [reason, setReason] = useState("");
  if (!action) return null;
  const resume = (decision) =>
    stream.submit(null, { command: { resume: { decisions: [decision] } } });
  const busy = stream.isLoading;
  return (
    <div className="approval" data-name={action.name}>
      <h3>Approval needed: {action.name}</h3>
      {action.description && <p className="description">{action.description}</p>}
      <pre className="args">{JSON.stringify(action.args ?? {})}</pre>
      {allowed.includes("approve") && (
        <button
          data-decision="approve"
          disabled={busy}
          onClick={() => resume({ type: "approve" })}
        >
          Approve
        </button>
      )}
      {allowed.includes("edit") && (
        <button data-decision="edit" disabled={busy} onClick={() => setMode("edit")}>
          Edit
        </button>
      )}
      {allowed.includes("reject") && (
        <button data-decision="reject" disabled={busy} onClick={() => setMode("reject")}>
          Reject
        </button>
      )}
      {mode === "edit" && (
        <div className="edit">
          <textarea className="edit-args" value={args} onChange={(e) => setArgs(e.target.value)} />
          <button
            data-decision="send-edit"
            disabled={busy}
            onClick={() =>
              resume({
                type: "edit",
                edited_action: { name: action.name, args: JSON.parse(args) },
              })
            }
          >
            Send edited call
          </button>
        </div>
      )}
      {mode === "reject" && (
        <div className="reject">
          <textarea
            className="reject-reason"
            value={reason}
            onChange={(e) => setReason(e.target.value)}
          />
          <button
            data-decision="send-reject"
            disabled={busy}
            onClick={() => resume({ type: "reject", message: reason })}
          >
            Send rejection
          </button>
        </div>
      )}
    </div>
  );
}

function Message({ message, stream, panel }) {
  const type = message?.type ?? "ai";
  const text = message ? textOf(message.content) : "";
  return (
    <div className="msg" data-type={type} data-id={message?.id ?? ""}>
      {type === "tool" ? (
        <ToolResult message={message} />
      ) : (
        <>
          {text.length > 0 && <div className="text">{text}</div>}
          {type === "ai" && message?.tool_calls?.length > 0 && (
            <ToolCalls calls={message.tool_calls} />
          )}
        </>
      )}
      {panel && <Approval key={stream.interrupt?.id ?? ""} stream={stream} />}
    </div>
  );
}

function Chat() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const [input, setInput] = useState("");
  const [settled, setSettled] = useState(0);
  const wasLoading = useRef(false);
  const stream = useStream({
    apiUrl: params.get("api"),
    assistantId: params.get("assistant"),
    threadId,
    fetchStateHistory: true,
    onThreadId: (id) => {
      setThreadId(id);
      const url = new URL(window.location.href);
      url.searchParams.set("thread", id);
      window.history.replaceState(null, "", url);
    },
  });
  // Counts the runs that ended (a pause on a question included), for the test to wait on.
  useEffect(() => {
    if (wasLoading.current && !stream.isLoading) setSettled((n) => n + 1);
    wasLoading.current = stream.isLoading;
  }, [stream.isLoading]);

  const messages = stream.messages;
  const last = messages[messages.length - 1];
  const interrupted = Boolean(stream.interrupt);
  const noAiOrTool = !messages.some((m) => m.type === "ai" || m.type === "tool");
  const send = (event) => {
    event.preventDefault();
    if (!input.trim() || stream.isLoading) return;
    const human = { id: crypto.randomUUID(), type: "human", content: input };
    stream.submit(
      { messages: [human] },
      {
        streamMode: ["values"],
        optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages ?? []), human] }),
      },
    );
    setInput("");
  };
  return (
    <main>
      <div
        id="status"
        data-loading={String(stream.isLoading)}
        data-thread-loading={String(stream.isThreadLoading)}
        data-settled={settled}
        data-thread={threadId ?? ""}
        data-interrupted={String(interrupted)}
      >
        thread {threadId ?? "(new)"} · {stream.isLoading ? "running" : "idle"}
        {interrupted ? " · waiting for approval" : ""}
      </div>
      <div id="messages">
        {messages.map((message, index) => (
          <Message
            key={message.id ?? index}
            message={message}
            stream={stream}
            panel={interrupted && message === last && (last.type === "ai" || last.type === "tool")}
          />
        ))}
        {interrupted && noAiOrTool && <Message message={undefined} stream={stream} panel />}
      </div>
      {stream.error && <div id="error">{String(stream.error?.message ?? stream.error)}</div>}
      <form id="composer" onSubmit={send}>
        <textarea id="input" value={input} onChange={(e) => setInput(e.target.value)} />
        <button id="send" type="submit" disabled={stream.isLoading}>
          Send
        </button>
      </form>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
