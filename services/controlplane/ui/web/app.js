// The dashboard's shell: hash routes (#/volumes, #/volume/<ns>/<id>, ...), the token form and the
// section links. Pages live in pages.js; each gets an AbortSignal that ends its live updates.
import { token, setToken, get } from "./api.js";
import * as pages from "./pages.js";
import { fill, h, errorBox } from "./ui.js";

const routes = [
  [/^#\/volumes$/, "volumes", pages.volumes],
  [/^#\/volume\/([^/]+)\/([^/]+)$/, "volumes", pages.volume],
  [/^#\/plugins$/, "plugins", pages.plugins],
  [/^#\/plugin\/([^/]+)$/, "plugins", pages.plugin],
  [/^#\/nodes$/, "nodes", pages.nodes],
  [/^#\/node\/([^/]+)$/, "nodes", pages.node],
  [/^#\/allocations$/, "allocations", pages.allocations],
  [/^#\/allocation\/([^/]+)\/([^/]+)$/, "allocations", pages.allocation],
  [/^#\/events$/, "events", pages.events],
];

let current = null;

function show() {
  const hash = location.hash || "#/volumes";
  current?.abort();
  current = new AbortController();
  const main = document.getElementById("main");
  for (const [re, section, render] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    document.querySelectorAll("nav a").forEach((a) =>
      a.dataset.section === section ? a.setAttribute("aria-current", "page") : a.removeAttribute("aria-current"));
    render(main, current.signal, ...m.slice(1).map(decodeURIComponent));
    return;
  }
  fill(main, h("h1", {}, "Not found"), errorBox(`No dashboard page at ${hash}.`), h("a", { href: "#/volumes" }, "Volumes"));
}

async function describeToken() {
  const state = document.getElementById("token-state");
  if (!token()) { state.textContent = "anonymous"; return; }
  try {
    const r = await get("/v1/acl/token/self");
    state.textContent = `as ${r.body?.Name || "token"} (${r.body?.Type || "client"})`;
  } catch (e) {
    state.textContent = e.status === 401 ? "token refused" : "token set";
  }
}

function setup() {
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    input.value = "";
    describeToken();
    show();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    setToken("");
    input.value = "";
    describeToken();
    show();
  });
  window.addEventListener("hashchange", () => {
    show();
    document.getElementById("main").focus({ preventScroll: true });
  });
  // The skip link moves focus without touching the hash (the hash is the route).
  document.querySelector(".skip").addEventListener("click", (e) => {
    e.preventDefault();
    document.getElementById("main").focus();
  });
  describeToken();
  show();
}

setup();
