// Drives a running `langgraph dev` the way chat UIs do (Agent Chat UI and the React useStream
// hook build on this client): prints one JSON object of what the UI saw, for
// tests/hosting/test_studio_js.py to check. Usage: node chat.mjs <server url>
// A chat UI reads a thread's values: its messages, and how the run ended (status,
// stop_reason). The trace and usage are not values but the run's record beside the
// checkpoints (tests/hosting/stored.py reads them by thread id, reported with each scenario).
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2] });
const APPROVAL = { require_approval: ["get_user_billing"], max_steps: 4 };

// What a chat UI renders of a thread: each message's type, text and id.
const rendered = (messages) =>
  messages.map((m) => ({ type: m.type, content: m.content, id: m.id }));

async function finalMessages(threadId) {
  const state = await client.threads.getState(threadId);
  return rendered(state.values.messages);
}

// A chat run streamed in messages mode, as useStream streams it ("messages-tuple").
async function chat() {
  const assistant = await client.assistants.create({ graphId: "refund" });
  const thread = await client.threads.create();
  const streamed = [];
  const stream = client.runs.stream(thread.thread_id, assistant.assistant_id, {
    input: { messages: [{ type: "human", content: "Which plan is user 42 on?" }] },
    streamMode: "messages-tuple",
  });
  for await (const part of stream) {
    if (part.event === "messages") {
      const [message, metadata] = part.data;
      streamed.push({
        type: message.type,
        id: message.id,
        content: message.content,
        tool_call_chunks: message.tool_call_chunks ?? [],
        node: metadata.langgraph_node,
      });
    }
  }
  return {
    thread_id: thread.thread_id,
    streamed,
    messages: await finalMessages(thread.thread_id),
  };
}

// A run that pauses on the approval question: the thread's interrupt, as the UI reads it.
async function paused() {
  const assistant = await client.assistants.create({ graphId: "refund", context: APPROVAL });
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, assistant.assistant_id, {
    input: { messages: [{ type: "human", content: "Can user 42 get a refund?" }] },
  });
  const state = await client.threads.getState(thread.thread_id);
  return { aid: assistant.assistant_id, tid: thread.thread_id, state };
}

// Each decision of LangChain's HITL format, sent back with command: {resume: ...}.
async function decide(decision) {
  const { aid, tid, state } = await paused();
  const [interrupt] = state.interrupts;
  await client.runs.wait(tid, aid, { command: { resume: { decisions: [decision] } } });
  const after = await client.threads.getState(tid);
  return {
    thread_id: tid,
    question: interrupt.value,
    next: state.next,
    status: after.values.status,
    stop_reason: after.values.stop_reason,
    messages: rendered(after.values.messages),
  };
}

// The user types a new message instead of answering the question.
async function cutIn() {
  const { aid, tid } = await paused();
  await client.runs.wait(tid, aid, {
    input: { messages: [{ type: "human", content: "Never mind, just say hello." }] },
  });
  const after = await client.threads.getState(tid);
  return {
    thread_id: tid,
    status: after.values.status,
    stop_reason: after.values.stop_reason,
    interrupts: after.interrupts,
    messages: rendered(after.values.messages),
  };
}

const out = {
  chat: await chat(),
  approve: await decide({ type: "approve" }),
  edit: await decide({
    type: "edit",
    edited_action: { name: "get_user_billing", args: { user_id: 7 } },
  }),
  reject: await decide({ type: "reject", message: "not today" }),
  respond: await decide({ type: "respond", message: "Billing is down; they paid USD 49." }),
  cut_in: await cutIn(),
};
process.stdout.write(JSON.stringify(out));
