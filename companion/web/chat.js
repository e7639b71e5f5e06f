// The chat page: asks stream from POST /api/ask as server-sent events. Answers are
// Markdown rendered by the vendored markdown-it (raw HTML off, images off) and sanitised
// by the vendored DOMPurify; everything else shown (names, reasons, arguments, search
// results) is inserted as text, never HTML. Every text has its bidi and invisible
// characters made visible (`visible`, before Markdown is rendered).
"use strict";

const STATUS_MS = 15000;
const LISTED = 50; // conversations listed at once (the newest; search finds the rest)
const SHORT_REASON = 40; // characters of a route's reason that need no "why"
// KEY, $, visible, el, copyButton, showError and call come from /hearth.js.
const state = {
  conversation: null, homes: new Map(), confirms: [], open: null, busy: false,
  conversations: [],
};

// -- Markdown ----------------------------------------------------------------------
const markdown = window.markdownit({ html: false, linkify: false, typographer: false });
markdown.disable("image"); // no picture from elsewhere: `![alt](url)` stays a link

// `source` (an answer's Markdown) as sanitised nodes: links show where they go and open
// in a new tab without a referrer; code blocks get a "Copy code" button.
function rendered(source) {
  const html = markdown.render(visible(source));
  const fragment = DOMPurify.sanitize(html, {
    RETURN_DOM_FRAGMENT: true, FORBID_TAGS: ["img", "style", "form", "input", "svg", "math"],
    FORBID_ATTR: ["style", "class", "id"],
  });
  for (const link of fragment.querySelectorAll("a")) {
    const target = link.getAttribute("href") || "";
    link.setAttribute("rel", "noopener noreferrer");
    link.setAttribute("target", "_blank");
    link.setAttribute("title", target);
    if (link.textContent.trim() !== target) link.after(el("span", ` (${target})`, "href"));
  }
  for (const block of fragment.querySelectorAll("pre")) {
    const code = block.textContent;
    const wrap = el("div", undefined, "code");
    block.replaceWith(wrap);
    wrap.append(copyButton("Copy code", () => code), block);
  }
  return fragment;
}

// -- home status -------------------------------------------------------------------
// One line: `Home: reachable, direct, 29 ms`, `Home: reachable, relayed via NAME, 80 ms`,
// `Home: unreachable — connection refused`, `Home: not paired`.
function statusLine(home) {
  if (!home) return "Home: not paired";
  if (!home.reachable) {
    return `Home: unreachable — ${(home.reason || "no answer").replace(/^unreachable: /, "")}`;
  }
  const path = home.relay ? `relayed via ${home.relay}` : "direct";
  return `Home: reachable, ${path}${home.latency_ms != null ? `, ${Math.round(home.latency_ms)} ms` : ""}`;
}

async function refreshStatus() {
  try {
    const status = await call("/api/status");
    state.homes = new Map(status.nodes.map((n) => [n.peer_id, n]));
    const home = status.nodes.find((n) => n.roles.includes("home")) || status.nodes[0];
    $("home").textContent = visible(statusLine(home));
  } catch (error) {
    $("home").textContent = visible(`Home: ${error.message}`);
  }
}

// -- turns -------------------------------------------------------------------------
function routeLabel(route, planner, escalated, deferred) {
  if (deferred) return "waiting for home";
  if (route === "local") return "local";
  if (escalated) return "escalated";
  const node = state.homes.get(planner);
  if (!planner || (node && node.roles.includes("home"))) return "home";
  return `friend ${(node && node.name) || planner.slice(0, 16)}`;
}

class Turn {
  constructor(text, regenerate) {
    this.text = text;
    this.source = "";
    this.answers = []; // this request's answers, oldest first (Regenerate adds one)
    this.article = el("article");
    this.article.setAttribute("aria-busy", "true");
    this.article.append(el("p", text, "you"));
    this.route = el("div", "", "route");
    this.routeName = el("strong");
    this.reason = el("span", "", "reason");
    this.more = el("details", undefined, "why");
    this.more.append(el("summary", "why"), el("p"));
    this.route.append(this.routeName, this.reason, this.more);
    this.route.hidden = true;
    this.steps = el("ol", undefined, "steps");
    this.steps.setAttribute("aria-label", "Plan steps");
    this.steps.hidden = true;
    this.answer = el("div", "", "answer");
    this.tools = el("div", undefined, "actions turn-actions");
    this.stop = el("button", "Stop", "quiet small danger");
    this.stop.type = "button";
    this.copy = copyButton("Copy", () => this.source);
    this.again = el("button", "Regenerate", "quiet small");
    this.again.type = "button";
    this.again.addEventListener("click", () => regenerate(this));
    this.siblings = el("span", "", "siblings");
    this.tools.append(this.stop, this.copy, this.again, this.siblings);
    this.article.append(this.route, this.steps, this.answer, this.tools);
    this.stepItems = new Map();
    this.streaming(true);
    $("transcript").append(this.article);
  }

  // While an answer streams only Stop is offered; once it is done, Copy and Regenerate.
  streaming(on) {
    this.stop.hidden = !on;
    this.copy.hidden = on;
    this.again.hidden = on;
    this.article.setAttribute("aria-busy", on ? "true" : "false");
  }

  // The route, and the router's reason on one line; a longer reason in full under "why".
  setRoute(route, planner, escalated, deferred, reason) {
    const label = routeLabel(route, planner, escalated, deferred);
    this.routeName.textContent = visible(label);
    this.article.dataset.route = label;
    const full = visible(reason || "");
    this.reason.textContent = full;
    this.more.lastChild.textContent = full;
    this.more.hidden = full.length <= SHORT_REASON;
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
    if (!this.answer.classList.contains("streaming")) {
      this.answer.replaceChildren();
      this.answer.classList.add("streaming");
    }
    this.answer.append(document.createTextNode(visible(text)));
  }

  finish(result) {
    this.setRoute(result.route, result.planner, result.escalated, result.deferred, result.reason);
    for (const plan of result.plans) {
      for (const step of plan.steps) {
        this.setStep(plan.plan_id, step.id, step.tool, step.status, step.error);
      }
    }
    this.answers.push(result.answer);
    this.show(this.answers.length - 1);
    const sources = result.untrusted_sources || [];
    if (sources.length) { // the answer may repeat what a page or a message told its planner
      this.untrusted ??= this.article.appendChild(el("p", "", "turn-untrusted"));
      this.untrusted.textContent =
        visible(`Written after reading untrusted input: ${sources.join(", ")}`);
    }
    this.done();
  }

  // Show the `index`th answer (a regenerated one is a sibling of the first).
  show(index) {
    this.source = this.answers[index];
    this.answer.classList.remove("streaming");
    this.answer.replaceChildren(rendered(this.source));
    this.siblings.replaceChildren();
    if (this.answers.length < 2) return;
    const step = (by, label) => {
      const b = el("button", label, "quiet small");
      b.type = "button";
      b.setAttribute("aria-label", by < 0 ? "Previous answer" : "Next answer");
      b.disabled = !this.answers[index + by];
      b.addEventListener("click", () => this.show(index + by));
      return b;
    };
    this.siblings.append(step(-1, "‹"), el("span", `answer ${index + 1} of ${this.answers.length}`),
      step(1, "›"));
  }

  fail(message, stopped = false) {
    if (this.answers.length) this.show(this.answers.length - 1);
    this.article.append(el("p", message, stopped ? "turn-stopped" : "turn-error"));
    this.done();
  }

  done() {
    this.streaming(false);
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

// Ask `text` in the open conversation; its answer goes to `turn` (a new one, or the turn
// being regenerated). Stop aborts the request: the companion sees the hang-up and tells
// the node to stop.
async function ask(text, turn = new Turn(text, regenerate)) {
  const stopper = new AbortController();
  const onStop = () => stopper.abort();
  turn.stop.addEventListener("click", onStop);
  turn.streaming(true);
  turn.article.querySelectorAll(".turn-error, .turn-stopped").forEach((p) => p.remove());
  state.busy = true;
  $("send").disabled = true;
  try {
    const response = await fetch("/api/ask", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Hearth-Key": KEY },
      body: JSON.stringify({ text, route: $("route").value, conversation_id: state.conversation }),
      signal: stopper.signal,
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
    if (stopper.signal.aborted) turn.fail("Stopped: the home node was told to stop.", true);
    else turn.fail(error.message);
  } finally {
    turn.stop.removeEventListener("click", onStop);
    state.busy = false;
    $("send").disabled = false;
    loadConversations();
  }
}

// Regenerate: the same request asked again; the new answer is kept beside the first.
function regenerate(turn) {
  if (state.busy) return;
  ask(turn.text, turn);
}

// -- confirmations: one dialog at a time, arguments as plain text ----------------------
function nextConfirm() {
  if (state.open || !state.confirms.length) return;
  const event = state.confirms.shift();
  state.open = event;
  const what = event.tool || (event.kind === "plan" ? "plan" : event.kind);
  $("confirm-title").textContent = visible(`Confirm ${what}`);
  $("confirm-summary").textContent = visible(event.summary);
  $("confirm-args").textContent = visible(JSON.stringify(event.arguments, null, 2));
  const sources = Object.entries(event.tainted);
  $("confirm-sources").replaceChildren(...sources.map(([arg, from]) => el("li", `${arg}: ${from}`)));
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

// -- conversations: the newest 50, a filter over all of them, rename and delete ------
async function loadConversations() {
  try {
    const { conversations } = await call("/api/conversations");
    state.conversations = conversations;
    listConversations();
  } catch (error) {
    showError(`Conversations: ${error.message}`);
  }
}

function listConversations() {
  const wanted = $("filter").value.trim().toLowerCase();
  const matching = state.conversations.filter(
    (c) => !wanted || (c.title || "").toLowerCase().includes(wanted));
  const shown = matching.slice(0, LISTED);
  $("conversations").replaceChildren(...shown.map(conversationItem));
  $("conversations-note").textContent = matching.length > shown.length
    ? `The newest ${shown.length} of ${matching.length}: search finds the others.`
    : wanted ? `${matching.length} found` : "";
}

function conversationItem(c) {
  const item = el("li");
  const title = c.title || "(untitled)";
  const open = el("button", title, "link");
  open.type = "button";
  if (c.id === state.conversation) open.setAttribute("aria-current", "true");
  open.addEventListener("click", () => openConversation(c.id));
  const rename = el("button", "Rename", "quiet small");
  rename.type = "button";
  rename.setAttribute("aria-label", `Rename ${visible(title)}`);
  rename.addEventListener("click", () => renameConversation(c));
  const remove = el("button", "Delete", "quiet small danger");
  remove.type = "button";
  remove.setAttribute("aria-label", `Delete ${visible(title)}`);
  remove.addEventListener("click", () => deleteConversation(c));
  const tools = el("span", undefined, "actions");
  tools.append(rename, remove);
  item.append(open, tools);
  return item;
}

function renameConversation(c) {
  $("rename-title").value = c.title || "";
  $("rename").returnValue = "";
  $("rename").dataset.id = c.id;
  $("rename").showModal();
}

$("rename").addEventListener("close", async () => {
  if ($("rename").returnValue !== "save") return;
  try {
    await call(`/api/conversations/${encodeURIComponent($("rename").dataset.id)}/rename`,
      { title: $("rename-title").value });
  } catch (error) {
    showError(`Rename: ${error.message}`);
  }
  loadConversations();
});

function deleteConversation(c) {
  $("delete-text").textContent = visible(`“${c.title || "(untitled)"}” and its turns are deleted.`);
  $("delete").returnValue = "";
  $("delete").dataset.id = c.id;
  $("delete").showModal();
}

$("delete").addEventListener("close", async () => {
  if ($("delete").returnValue !== "delete") return;
  const id = $("delete").dataset.id;
  try {
    await call(`/api/conversations/${encodeURIComponent(id)}/delete`, {});
    if (state.conversation === id) startNew();
  } catch (error) {
    showError(`Delete: ${error.message}`);
  }
  loadConversations();
});

$("filter").addEventListener("input", listConversations);

async function openConversation(id) {
  try {
    const detail = await call(`/api/conversations/${encodeURIComponent(id)}`);
    state.conversation = detail.id;
    $("transcript").replaceChildren();
    for (const t of detail.turns) {
      const turn = new Turn(t.text, regenerate);
      turn.finish({ route: t.route === "remote" ? "remote" : "local", planner: t.planner,
        escalated: false, deferred: false, reason: "", plans: t.plans, answer: t.answer });
    }
    listConversations();
    $("message").focus();
  } catch (error) {
    showError(`Conversation: ${error.message}`);
  }
}

function startNew() {
  state.conversation = null;
  $("transcript").replaceChildren();
  loadConversations();
  $("message").focus();
}
$("new").addEventListener("click", startNew);

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
    $("search-note").textContent = visible(error.message);
  }
});

async function loadAudit(verify) {
  try {
    const audit = await call(`/api/audit?verify=${verify}`);
    $("audit-state").textContent = visible(audit.verified == null
      ? `${audit.records.length} record(s)`
      : audit.verified ? `${audit.records.length} record(s), verified: the chain is intact`
      : `NOT verified: ${audit.problem || "the chain is broken"}`);
    $("audit").replaceChildren(...audit.records.slice(-50).reverse().map((r) =>
      el("li", `#${r.seq} ${new Date(r.time * 1000).toLocaleString()} ${r.step}: ${r.decision}` +
        `${r.outcome ? `, ${r.outcome}` : ""}${r.reason ? ` (${r.reason})` : ""}`)));
  } catch (error) {
    $("audit-state").textContent = visible(error.message);
  }
}
$("audit-panel").addEventListener("toggle", () => { if ($("audit-panel").open) loadAudit(false); });
$("verify").addEventListener("click", () => loadAudit(true));

if (KEY) {
  refreshStatus();
  loadConversations();
  setInterval(refreshStatus, STATUS_MS);
}
