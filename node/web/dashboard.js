// The node dashboard: polls /api/status, renders it as text (never as HTML: names,
// reasons and model names come from peers; bidi and invisible characters made visible),
// and drives the roster and pairing dialogs.
"use strict";

const POLL_MS = 5000;
// KEY, $, visible, el, copyButton, ago, showError and call come from /hearth.js.
const ROLES = ["phone", "home", "relay", "search-relay", "search-exit", "planner"];
let lastMembers = "";
let countdown = null;

function text(id, value) {
  $(id).textContent = visible(value);
}

function counts(map) {
  const parts = Object.entries(map || {}).map(([key, n]) => `${key} ${n}`);
  return parts.length ? parts.join(", ") : "nothing";
}

function list(id, items) {
  const target = $(id);
  target.replaceChildren(...items.map((item) => el("li", item)));
}

function cell(row, value, label, className) {
  const td = el("td", value, className);
  td.setAttribute("role", "cell");
  td.dataset.label = label;
  row.append(td);
  return td;
}

function button(label, onClick, className) {
  const b = el("button", label, className);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

// A member's reachability: a phone that is not connected is idle, not failing (phones
// dial in), so it is shown plainly with when it was last heard from.
function reachability(peer) {
  if (peer.reachable) return ["yes", ""];
  if (peer.roles.includes("phone")) {
    const seen = peer.last_seen_s == null ? "not seen since the node started"
      : `last seen ${ago(peer.last_seen_s)}`;
    return [`idle, ${seen}`, "idle"];
  }
  return [`no: ${peer.reason}`, "unreachable"];
}

function renderMembers(peers) {
  const key = JSON.stringify(peers);
  if (key === lastMembers) return; // keep the rows (and focus) when nothing changed
  lastMembers = key;
  $("members").hidden = peers.length === 0;
  $("members-empty").hidden = peers.length !== 0;
  $("members-rows").replaceChildren(...peers.map((peer) => {
    const row = document.createElement("tr");
    row.setAttribute("role", "row");
    row.dataset.peer = peer.peer_id;
    cell(row, peer.name || "(no name)", "Name");
    cell(row, peer.peer_id, "Peer ID", "id");
    cell(row, peer.roles.join(", ") || "none", "Roles");
    const [reach, look] = reachability(peer);
    cell(row, reach, "Reachable", look);
    const actions = cell(row, "", "Actions");
    const group = document.createElement("div");
    group.className = "actions";
    group.append(
      button("Grant", () => confirmRole("grant", peer), "quiet small"),
      button("Deny", () => confirmRole("deny", peer), "quiet small danger"),
      button("Revoke", () => confirmRevoke(peer), "small danger"),
    );
    actions.append(group);
    return row;
  }));
}

function render(status) {
  const model = status.model;
  text("state", status.running ? "running" : "not running");
  text("peer-id", status.peer_id);
  text("name", status.name || "(no name)");
  text("roles", status.roles.join(", ") || "none");
  text("model", model ? `${model.name}${model.quant ? ` (${model.quant})` : ""}` +
    `${model.backend ? `, ${model.backend}` : ""}${model.n_ctx ? `, ${model.n_ctx} tokens` : ""}`
    : "none (plans are refused: model_not_loaded)");
  list("addrs", status.addrs);
  text("sessions", String(status.sessions));
  text("queue", String(status.queue));
  text("admitted", String(status.admission.admitted));
  text("busy", String(status.admission.busy));
  text("served-others", String(status.served_for_others ?? 0));
  text("wait", `${status.admission.queue_wait_p99_ms} ms`);
  const hs = status.handshakes;
  text("handshakes", `main ${hs.main.failed}, pairing ${hs.pairing.failed}` +
    ` (throttled ${hs.pairing.throttled})`);
  renderMembers(status.peers);
  const relays = Object.entries(status.relays).map(([relay, held]) =>
    `${relay}: ${held.circuits.length ? `${held.circuits.length} circuit address(es)` : held.problem || "no circuit yet"}`);
  list("relays", relays.length ? relays : ["none"]);
  const search = status.search;
  // an epoch is numbered by its start, in milliseconds since 1970
  const started = new Date(search.epoch);
  text("search-epoch", `${started.toLocaleString()} (${ago((Date.now() - search.epoch) / 1000)})`);
  text("search-known", String(search.known_nodes.length));
  text("search-served", counts(search.served));
  text("search-dropped", counts(search.dropped));
  text("search-refused", counts(search.refused_announcements));
  text("search-equivocating", search.equivocating.join(", ") || "none");
}

async function refresh() {
  try {
    render(await call("/api/status"));
    showError("");
  } catch (error) {
    showError(`Status: ${error.message}`);
  }
}

// -- roster: every change is confirmed in a dialog ---------------------------------
let pending = null;

function openConfirm(title, message, roles, action, destructive) {
  text("confirm-title", title);
  text("confirm-text", message);
  $("confirm-ok").className = destructive ? "danger" : "";
  const select = $("confirm-role");
  select.replaceChildren(...roles.map((role) => new Option(role, role)));
  $("confirm-role-row").hidden = roles.length === 0;
  pending = action;
  $("confirm").returnValue = "";
  $("confirm").showModal();
}

function confirmRole(op, peer) {
  const who = peer.name || peer.peer_id;
  const roles = op === "grant" ? ROLES.filter((r) => !peer.roles.includes(r)) : peer.roles;
  if (!roles.length) {
    showError(op === "grant" ? `${who} has every role already` : `${who} has no role to deny`);
    return;
  }
  const title = op === "grant" ? `Grant a role to ${who}` : `Deny a role to ${who}`;
  openConfirm(title, `Member ${peer.peer_id}`, roles,
    (role) => call(`/api/${op}`, { peer: peer.peer_id, role }), op === "deny");
}

function confirmRevoke(peer) {
  const who = peer.name || peer.peer_id;
  openConfirm(`Revoke ${who}`,
    `${peer.peer_id} leaves the swarm now and the swarm key is rotated.`, [],
    () => call("/api/revoke", { peer: peer.peer_id }), true);
}

$("confirm").addEventListener("close", async () => {
  const action = pending;
  pending = null;
  if ($("confirm").returnValue !== "ok" || !action) return;
  try {
    await action($("confirm-role").value);
    lastMembers = "";
    await refresh();
  } catch (error) {
    showError(error.message);
  }
});

// -- pairing ---------------------------------------------------------------------
function mmss(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  return `${String(Math.floor(s / 60)).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
}

function showInvite(invite) {
  $("qr").src = invite.qr;
  text("uri", invite.uri);
  $("invite").hidden = false;
  const end = performance.now() + invite.expires_in * 1000;
  clearInterval(countdown);
  const tick = () => {
    const left = (end - performance.now()) / 1000;
    text("expiry", left > 0 ? `Expires in ${mmss(left)}` : "Expired: create a new invite");
    if (left <= 0) clearInterval(countdown);
  };
  tick();
  countdown = setInterval(tick, 1000);
}

$("pair-open").addEventListener("click", () => $("pair").showModal());
$("copy-peer-id").replaceWith(copyButton("Copy peer ID", () => $("peer-id").textContent));
$("copy-uri").replaceWith(copyButton("Copy URI", () => $("uri").textContent));
$("pair-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const role = new FormData(event.target).get("role");
  try {
    showInvite(await call("/api/invite", { role }));
    showError("", "pair-error");
  } catch (error) {
    showError(error.message, "pair-error");
  }
});
$("pair").addEventListener("close", () => {
  clearInterval(countdown);
  $("invite").hidden = true;
  showError("", "pair-error");
  $("qr").removeAttribute("src");
  text("uri", "");
  refresh();
});

if (KEY) {
  refresh();
  setInterval(refresh, POLL_MS);
}
