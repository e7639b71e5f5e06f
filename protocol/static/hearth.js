// What every Hearth page shares (served by the guard in protocol/kit/web/ at /hearth.js, loaded
// before the page's own script): the session key, `$`, `showError` and `call`.
"use strict";

// The session's key (see protocol/kit/web/access.py): handed over once in the sign-in redirect's
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
