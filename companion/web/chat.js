// The chat page: asks stream from POST /api/ask as server-sent events; everything shown
// (answers, names, reasons, arguments, search results) is inserted as text, never HTML.
"use strict";

const STATUS_MS = 15000;
// KEY, $, showError and call come from /hearth.js.
const state = { conversation: null, homes: new Map(), confirms: [], open: null, busy: false };

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

// Control and format characters (bidi overrides, zero widths, line separators) written as
// \uXXXX escapes, as the CLI shows them: no value can reorder or hide what a dialog says.
// Inside JSON text the escapes keep it valid JSON for the very same value.
function visible(text) {
  const escape = (unit) => `\\u${unit.toString(16).padStart(4, "0")}`;
  return text.replace(/[^\n\t\P{Cc}]|[\p{Cf}\p{Zl}\p{Zp}]/gu,
    (ch) => Array.from({ length: ch.length }, (_, i) => escape(ch.charCodeAt(i))).join(""));
}

// -- home status -------------------------------------------------------------------
async function refreshStatus() {
  try {
    const status = await call("/api/status");
    state.homes = new Map(status.nodes.map((n) => [n.peer_id, n]));
    const home = status.nodes[0];
    let line = "Home: not paired";
    if (home) {
      const name = home.name || home.peer_id;
      line = home.reachable
        ? `Home ${name}: reachable${home.latency_ms != null ? ` (${Math.round(home.latency_ms)} ms)` : ""}`
        : `Home ${name}: unreachable: ${home.reason}`;
    }
    $("home").textContent = line;
  } catch (error) {
    $("home").textContent = `Home: ${error.message}`;
  }
}

// -- turns -------------------------------------------------------------------------
function routeLabel(route, planner, escalated, deferred) {
  if (deferred) return "waiting for home";
  if (route === "local") return "local";
  if (escalated) return "escalated";
  if (!planner || state.homes.has(planner) || state.homes.size === 0) return "home";
  return `friend ${planner.slice(0, 16)}`;
}

class Turn {
  constructor(text) {
    this.article = el("article");
    this.article.setAttribute("aria-busy", "true");
    this.article.append(el("p", text, "you"));
    this.route = el("p", "", "route");
    this.routeName = el("strong");
    this.reason = el("span", "", "reason");
    this.route.append(this.routeName, this.reason);
    this.route.hidden = true;
    this.steps = el("ol", undefined, "steps");
    this.steps.setAttribute("aria-label", "Plan steps");
    this.steps.hidden = true;
    this.answer = el("div", "", "answer");
    this.article.append(this.route, this.steps, this.answer);
    this.stepItems = new Map();
    $("transcript").append(this.article);
  }

  setRoute(route, planner, escalated, deferred, reason) {
    const label = routeLabel(route, planner, escalated, deferred);
    this.routeName.textContent = label;
    this.article.dataset.route = label;
    this.reason.textContent = reason ? ` ${reason}` : "";
    this.route.hidden = false;
  }

  setStep(planId, stepId, tool, status, error) {
    const key = `${planId}/${stepId}`;
    let item = this.stepItems.get(key);
    if (!item) {
      item = el("li");
      this.stepItems.set(key, item);
      this.steps.append(item);
    }
    item.dataset.status = status;
    item.replaceChildren(el("span", tool, "tool"), el("span", status, "status"));
    if (error) item.append(el("span", error, "step-error"));
    this.steps.hidden = false;
  }

  token(text) {
    this.answer.append(document.createTextNode(text));
  }

  finish(result) {
    this.setRoute(result.route, result.planner, result.escalated, result.deferred, result.reason);
    for (const plan of result.plans) {
      for (const step of plan.steps) {
        this.setStep(plan.plan_id, step.id, step.tool, step.status, step.error);
      }
    }
    this.answer.textContent = result.answer;
    this.done();
  }

  fail(message) {
    this.article.append(el("p", message, "turn-error"));
    this.done();
  }

  done() {
    this.article.setAttribute("aria-busy", "false");
  }
}

function handle(turn, type, event) {
  switch (type) {
    case "route":
      turn.setRoute(event.route, event.planner, event.escalated, event.deferred, event.reason);
      break;
    case "token":
      if (!event.thinking) turn.token(event.text);
      break;
    case "step":
      turn.setStep(event.plan_id, event.step_id, event.tool, event.status, event.error);
      break;
    case "confirm":
      state.confirms.push(event);
      nextConfirm();
      break;
    case "answer":
      state.conversation = event.result.conversation_id || state.conversation;
      turn.finish(event.result);
      break;
    case "error":
      turn.fail(`${event.code}: ${event.message}`);
      break;
    default:
      break;
  }
}

async function ask(text) {
  const turn = new Turn(text);
  state.busy = true;
  $("send").disabled = true;
  try {
    const response = await fetch("/api/ask", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Hearth-Key": KEY },
      body: JSON.stringify({ text, route: $("route").value, conversation_id: state.conversation }),
    });
    if (!response.ok) {
      const data = await response.json();
      turn.fail(`${data.error.code}: ${data.error.message}`);
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let type = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) type = line.slice(7);
          else if (line.startsWith("data: ")) data += line.slice(6);
        }
        if (data) handle(turn, type, JSON.parse(data));
      }
    }
    if (turn.article.getAttribute("aria-busy") === "true") turn.fail("the answer stream ended early");
  } catch (error) {
    turn.fail(error.message);
  } finally {
    state.busy = false;
    $("send").disabled = false;
    loadConversations();
  }
}

// -- confirmations: one dialog at a time, arguments as plain text ----------------------
function nextConfirm() {
  if (state.open || !state.confirms.length) return;
  const event = state.confirms.shift();
  state.open = event;
  const what = event.tool || (event.kind === "plan" ? "plan" : event.kind);
  $("confirm-title").textContent = `Confirm ${what}`;
  $("confirm-summary").textContent = visible(event.summary);
  $("confirm-args").textContent = visible(JSON.stringify(event.arguments, null, 2));
  const sources = Object.entries(event.tainted);
  $("confirm-sources").replaceChildren(
    ...sources.map(([arg, from]) => el("li", visible(`${arg}: ${from}`))));
  $("confirm-taint").hidden = sources.length === 0;
  $("confirm").returnValue = "";
  $("confirm").showModal();
}

for (const choice of $("confirm").querySelectorAll("button[value]")) {
  choice.addEventListener("click", () => $("confirm").close(choice.value));
}
$("confirm").addEventListener("close", async () => {
  const event = state.open;
  const approve = $("confirm").returnValue === "approve";
  try {
    await call(`/api/confirm/${encodeURIComponent(event.confirm_id)}`, { approve });
  } catch (error) {
    showError(`Confirmation: ${error.message}`);
  }
  state.open = null;
  nextConfirm();
});

// -- conversations -----------------------------------------------------------------
async function loadConversations() {
  try {
    const { conversations } = await call("/api/conversations");
    $("conversations").replaceChildren(...conversations.map((c) => {
      const item = el("li");
      const open = el("button", c.title || "(untitled)", "link");
      open.type = "button";
      if (c.id === state.conversation) open.setAttribute("aria-current", "true");
      open.addEventListener("click", () => openConversation(c.id));
      item.append(open);
      return item;
    }));
  } catch (error) {
    showError(`Conversations: ${error.message}`);
  }
}

async function openConversation(id) {
  try {
    const detail = await call(`/api/conversations/${encodeURIComponent(id)}`);
    state.conversation = detail.id;
    $("transcript").replaceChildren();
    for (const t of detail.turns) {
      const turn = new Turn(t.text);
      turn.finish({ route: t.route === "remote" ? "remote" : "local", planner: t.planner,
        escalated: false, deferred: false, reason: "", plans: t.plans, answer: t.answer });
    }
    loadConversations();
    $("message").focus();
  } catch (error) {
    showError(`Conversation: ${error.message}`);
  }
}

$("new").addEventListener("click", () => {
  state.conversation = null;
  $("transcript").replaceChildren();
  loadConversations();
  $("message").focus();
});

// -- composer ----------------------------------------------------------------------
$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("message").value.trim();
  if (!text || state.busy) return;
  $("message").value = "";
  showError("");
  ask(text);
});
$("message").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});

// -- search and audit --------------------------------------------------------------
$("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("search-note").textContent = "Searching…";
  $("search-results").replaceChildren();
  try {
    const found = await call("/api/search", { query: $("query").value });
    $("search-note").textContent = `${found.results.length} result(s); untrusted: from the web`;
    $("search-results").replaceChildren(...found.results.map((hit) => {
      const item = el("li", undefined, "hit");
      item.append(el("span", "untrusted", "badge"), el("strong", hit.title),
        el("span", hit.url, "url"), el("span", hit.snippet, "snippet"));
      return item;
    }));
  } catch (error) {
    $("search-note").textContent = error.message;
  }
});

async function loadAudit(verify) {
  try {
    const audit = await call(`/api/audit?verify=${verify}`);
    $("audit-state").textContent = audit.verified == null ? `${audit.records.length} record(s)`
      : audit.verified ? `${audit.records.length} record(s), verified: the chain is intact`
      : `NOT verified: ${audit.problem || "the chain is broken"}`;
    $("audit").replaceChildren(...audit.records.slice(-50).reverse().map((r) =>
      el("li", `#${r.seq} ${new Date(r.time * 1000).toLocaleString()} ${r.step}: ${r.decision}` +
        `${r.outcome ? `, ${r.outcome}` : ""}${r.reason ? ` (${r.reason})` : ""}`)));
  } catch (error) {
    $("audit-state").textContent = error.message;
  }
}
$("audit-panel").addEventListener("toggle", () => { if ($("audit-panel").open) loadAudit(false); });
$("verify").addEventListener("click", () => loadAudit(true));

if (KEY) {
  refreshStatus();
  loadConversations();
  setInterval(refreshStatus, STATUS_MS);
}
