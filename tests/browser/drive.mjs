// Drives the chat page (page/app.jsx) in a running headless Chromium the way a person would:
// types each question, clicks Send, clicks Approve / Edit / Reject in the approval panel,
// reloads the page. Prints one JSON object of what the page showed after each step, with every
// distinct state of the message list between steps (a MutationObserver records each one, so a
// message that vanishes for a moment is seen), for tests/hosting/test_studio_browser.py to check.
// Usage: node drive.mjs <browser ws endpoint> <langgraph url> <page url> <screenshot dir>
// The test owns the browser (it starts and kills it); this script only connects to it.
import { Client } from "@langchain/langgraph-sdk";
import puppeteer from "puppeteer-core";
import { join } from "node:path";

const [endpoint, apiUrl, pageUrl, shots] = process.argv.slice(2);
const PATIENCE = Number(process.env.BROWSER_PATIENCE_MS ?? 240000);
const QUESTIONS = JSON.parse(process.env.BROWSER_QUESTIONS);
const CONTEXT = JSON.parse(process.env.BROWSER_CONTEXT);
const GRAPH = JSON.parse(process.env.BROWSER_GRAPH);

// Runs in the page before its own script: records each new state of the message list.
function recordMessages() {
  window.__samples = [];
  let last = "";
  const take = () => {
    const shown = [...document.querySelectorAll("#messages > .msg")].map((el) => ({
      type: el.dataset.type,
      id: el.dataset.id,
      text: el.querySelector(":scope > .text")?.textContent ?? "",
      cards: el.querySelectorAll(".card").length,
    }));
    const key = JSON.stringify(shown);
    if (key !== last) {
      last = key;
      window.__samples.push({ t: performance.now(), shown });
    }
  };
  new MutationObserver(take).observe(document, {
    subtree: true,
    childList: true,
    characterData: true,
  });
}

// What the page shows now: each message with its cards and panel, and the status line.
function snapshot() {
  const card = (el) => ({
    call_id: el.dataset.callId,
    name: el.dataset.name,
    status: el.dataset.status,
    args: el.querySelector(".args") ? JSON.parse(el.querySelector(".args").textContent) : null,
    content: el.querySelector(".content")?.textContent ?? null,
  });
  const messages = [...document.querySelectorAll("#messages > .msg")].map((el) => {
    const panel = el.querySelector(":scope > .approval");
    const result = el.querySelector(":scope > .tool-result");
    return {
      type: el.dataset.type,
      id: el.dataset.id,
      text: el.querySelector(":scope > .text")?.textContent ?? "",
      calls: [...el.querySelectorAll(":scope > .tool-call")].map(card),
      result: result ? card(result) : null,
      panel: panel && {
        name: panel.dataset.name,
        args: JSON.parse(panel.querySelector(".args").textContent),
        buttons: [...panel.querySelectorAll("button")].map((b) => b.dataset.decision),
      },
    };
  });
  const status = document.querySelector("#status").dataset;
  const error = document.querySelector("#error")?.textContent ?? null;
  return { messages, interrupted: status.interrupted === "true", thread: status.thread, error };
}

const settledCount = (page) =>
  page.$eval("#status", (el) => Number(el.dataset.settled));

// Does `act`, then waits until the run it started has ended (or paused) and the page is quiet.
async function step(page, act) {
  const before = await settledCount(page);
  await act();
  await page.waitForFunction(
    (n) => {
      const s = document.querySelector("#status").dataset;
      return Number(s.settled) > n && s.loading === "false";
    },
    {},
    before,
  );
  await page.waitForNetworkIdle({ idleTime: 250 });
  return observe(page);
}

async function observe(page) {
  const samples = await page.evaluate(() => window.__samples.splice(0));
  return { ...(await page.evaluate(snapshot)), samples };
}

async function ask(page, question) {
  return step(page, async () => {
    await page.type("#input", question);
    await page.click("#send");
  });
}

async function reload(page) {
  await page.reload();
  // Every reload is of a thread with messages: wait until its history has been drawn.
  await page.waitForFunction(() => {
    const s = document.querySelector("#status")?.dataset;
    const drawn = document.querySelectorAll("#messages > .msg").length > 0;
    return drawn && s.threadLoading === "false" && s.loading === "false";
  });
  await page.waitForNetworkIdle({ idleTime: 250 });
  return observe(page);
}

const panel = ".msg:last-child > .approval";

async function decide(page, decision, detail) {
  const shown = await page.$(panel);
  if (!shown) {
    // No panel to click (the page did not draw it): answer as the test's fallback would, so the
    // later steps still say what they see. The test fails on the missing panel itself.
    return { ...(await resumeDirectly(page, decision, detail)), fallback: true };
  }
  return step(page, async () => {
    await page.click(`${panel} button[data-decision="${decision}"]`);
    if (decision === "edit") {
      await page.click(`${panel} .edit-args`);
      await page.keyboard.down("Control");
      await page.keyboard.press("KeyA");
      await page.keyboard.up("Control");
      await page.type(`${panel} .edit-args`, JSON.stringify(detail));
      await page.click(`${panel} button[data-decision="send-edit"]`);
    } else if (decision === "reject") {
      await page.type(`${panel} .reject-reason`, detail);
      await page.click(`${panel} button[data-decision="send-reject"]`);
    }
  });
}

async function resumeDirectly(page, decision, detail) {
  const threadId = await page.$eval("#status", (el) => el.dataset.thread);
  const [assistant, client] = [new URL(page.url()).searchParams.get("assistant"), sdk()];
  const state = await client.threads.getState(threadId);
  const name = state.interrupts?.[0]?.value?.action_requests?.[0]?.name;
  const answer = {
    approve: { type: "approve" },
    edit: { type: "edit", edited_action: { name, args: detail } },
    reject: { type: "reject", message: detail },
  }[decision];
  await client.runs.wait(threadId, assistant, { command: { resume: { decisions: [answer] } } });
  return reload(page);
}

const sdk = () => new Client({ apiUrl });

async function scenario(page, out) {
  const assistant = await sdk().assistants.create({ graphId: GRAPH, context: CONTEXT });
  const query = new URLSearchParams({ api: apiUrl, assistant: assistant.assistant_id });
  await page.goto(`${pageUrl}?${query}`);
  await page.waitForSelector("#status");
  const [first, ...more] = QUESTIONS;
  out.turn1 = await ask(page, first.text);
  await page.screenshot({ path: join(shots, "turn1.png"), fullPage: true });
  for (const question of more) {
    const key = question.decision;
    out[`${key}_asked`] = await ask(page, question.text);
    if (key === "approve") out.reload_waiting = await reload(page);
    await page.screenshot({ path: join(shots, `${key}-panel.png`), fullPage: true });
    out[key] = await decide(page, key, question.detail);
  }
  out.before_reload = await observe(page);
  out.reload = await reload(page);
  const threadId = await page.$eval("#status", (el) => el.dataset.thread);
  out.stored = (await sdk().threads.getState(threadId)).values.messages;
}

async function main() {
  const out = { console: [] };
  const browser = await puppeteer.connect({
    browserWSEndpoint: endpoint,
    defaultViewport: { width: 1000, height: 1200 },
  });
  const page = await browser.newPage();
  page.setDefaultTimeout(PATIENCE);
  page.on("console", (m) => out.console.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => out.console.push(`pageerror: ${e.message}`));
  await page.evaluateOnNewDocument(recordMessages);
  try {
    await scenario(page, out);
  } catch (error) {
    out.error = String(error?.stack ?? error);
  } finally {
    await page.screenshot({ path: join(shots, "final.png"), fullPage: true }).catch(() => {});
    await browser.disconnect();
  }
  process.stdout.write(JSON.stringify(out));
}

await main();
