// DOM helpers: elements built with the DOM API (never innerHTML, so API text is never markup),
// tables that stack on a phone, the confirmation dialog, times and live countdowns.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export const link = (href, text) => h("a", { href }, text);

// A table; `columns`: [{label, cell(row) -> node|text, class}]. On narrow screens each row
// becomes a card whose cells carry their column's name.
export function table(caption, columns, rows, { empty = "None.", id } = {}) {
  if (!rows.length) return h("p", { class: "notice", id }, empty);
  return h("div", { class: "table-wrap" },
    h("table", { class: "cards", id },
      h("caption", { class: "visually-hidden" }, caption),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.label)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, columns.map((c) =>
        h("td", { "data-label": c.label, class: c.class }, c.cell(r))))))));
}

export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(Boolean).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "—")]));
}

export function badge(text, kind) { return h("span", { class: `badge ${kind || ""}` }, text); }

export function errorBox(e) {
  const text = typeof e === "string" ? e : e.describe ? e.describe() : e.message;
  return h("div", { class: "error", role: "alert" }, text);
}

// Replaces the contents of `el`.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// Asks before an operator action. Resolves true only on an explicit confirm.
export function confirmAction(title, text, okLabel = "Confirm") {
  const dlg = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel;
  dlg.returnValue = "";
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.showModal();
    document.getElementById("confirm-cancel").focus();
  });
}

// Runs an operator action behind a confirmation; its outcome (the API's error text on failure)
// goes into `out`, and is announced.
export async function action({ title, text, okLabel, out, run, done }) {
  if (!(await confirmAction(title, text, okLabel))) return;
  fill(out, h("p", { class: "notice", role: "status" }, `${title}…`));
  try {
    await run();
    fill(out, h("p", { class: "notice", role: "status" }, `${title}: done.`));
    done?.();
  } catch (e) {
    fill(out, errorBox(e));
  }
}

export function announce(text) { document.getElementById("live").textContent = text; }

// ---- times ----
const ZERO = "0001-01-01T00:00:00Z";
export function isSet(t) { return t && t !== ZERO && !String(t).startsWith("0001-") && !String(t).startsWith("1970-01-01T00:00:00"); }
export function when(t) {
  if (!isSet(t)) return "—";
  const d = new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString();
}

// A countdown to `t` that the page's ticker keeps current ("in 4s", "due").
export function countdown(t) {
  if (!isSet(t)) return h("span", {}, "—");
  const el = h("time", { datetime: t, "data-deadline": t, class: "countdown" });
  tickOne(el);
  return el;
}

function tickOne(el) {
  const left = Math.round((new Date(el.dataset.deadline).getTime() - Date.now()) / 1000);
  el.textContent = left > 0 ? `in ${left >= 60 ? `${Math.floor(left / 60)}m ${left % 60}s` : `${left}s`}` : "due now";
}

// One clock for every countdown on the page: display only; data comes from the API's watches.
setInterval(() => document.querySelectorAll("time.countdown").forEach(tickOne), 1000);

export function healthBadge(healthy, expected) {
  const text = `${healthy ?? 0}/${expected ?? 0}`;
  return badge(text, expected && healthy >= expected ? "ok" : healthy ? "warn" : "bad");
}

export function statusBadge(status) {
  const ok = ["ready", "running", "complete", "true", "healthy", "taken", "normal"];
  const bad = ["down", "failed", "lost", "false", "unhealthy", "abnormal"];
  const s = String(status ?? "—");
  return badge(s, ok.includes(s) ? "ok" : bad.includes(s) ? "bad" : "warn");
}
