// What every Hearth page shares (served by protocol/web.py's guard at /hearth.js, loaded
// before the page's own script): the session key, `$`, `visible`, `el`, `showError`,
// `copyButton`, `ago` and `call`.
"use strict";

// The session's key (see protocol/web.py): handed over once in the sign-in redirect's
// fragment, kept in this origin's sessionStorage (a cookie would reach every port of the
// host), sent with every API request. Without it, sign in again.
const KEY = (() => {
  const given = /^#key=([\w-]+)$/.exec(window.location.hash);
  if (given) {
    sessionStorage.setItem("hearth-key", given[1]);
    history.replaceState(null, "", "/");
  }
  return sessionStorage.getItem("hearth-key");
})();
if (!KEY) window.location.replace("/login");
const $ = (id) => document.getElementById(id);

// Control and format characters (bidi overrides, zero widths, line separators) written as
// \uXXXX escapes, as the CLI shows them: no value can reorder or hide what a page says.
// Inside JSON text the escapes keep it valid JSON for the very same value.
function visible(text) {
  const escape = (unit) => `\\u${unit.toString(16).padStart(4, "0")}`;
  return String(text).replace(/[^\n\t\P{Cc}]|(?!\u200d)[\p{Cf}\p{Zl}\p{Zp}]/gu,
    (ch) => Array.from({ length: ch.length }, (_, i) => escape(ch.charCodeAt(i))).join(""));
}

// A new element showing `text` (made visible, never parsed as HTML).
function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = visible(text);
  if (className) node.className = className;
  return node;
}

// A button named `label` that copies `value()` to the clipboard and says so.
function copyButton(label, value, className = "quiet small") {
  const button = el("button", label, className);
  button.type = "button";
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(value());
      button.textContent = "Copied";
    } catch (error) {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}

// `seconds` ago as a person says it: "just now", "3 min ago", "2 h ago", "4 days ago".
function ago(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} days ago`;
}

function showError(message, id = "error") {
  const box = $(id);
  box.textContent = message;
  box.hidden = !message;
}

// GET `path`, or POST `body` as JSON; the parsed answer, or an Error saying the API's error.
async function call(path, body) {
  const init = body === undefined ? { headers: { "X-Hearth-Key": KEY } } : {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Hearth-Key": KEY },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  if (response.status === 401) {
    window.location.replace("/login"); // the session ended: sign in again
    throw new Error("signed out");
  }
  const data = await response.json();
  if (!response.ok) {
    throw new Error(data.error ? `${data.error.code}: ${data.error.message}` : response.statusText);
  }
  return data;
}
