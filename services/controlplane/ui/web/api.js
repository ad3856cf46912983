// The REST API as the dashboard uses it: the operator's token (sessionStorage, sent as a header,
// never in a URL), errors carrying the API's own message, blocking queries and the event stream.

const TOKEN_KEY = "mooring.token";

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// An answer that is not 2xx: `message` is the API's {"Error"} text as it came.
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
  describe() {
    if (this.status === 401) return `${this.message} — enter an ACL token above.`;
    return this.status ? `${this.message} (HTTP ${this.status})` : this.message;
  }
}

function headers(extra = {}) {
  const h = { Accept: "application/json", ...extra };
  const t = token();
  if (t) h["X-Mooring-Token"] = t;
  return h;
}

async function failure(res) {
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    if (body && typeof body.Error === "string") message = body.Error;
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(res.status, message);
}

// One call; resolves to {body, index} or throws ApiError.
export async function call(method, path, { body, signal } = {}) {
  let res;
  try {
    res = await fetch(path, {
      method, signal, credentials: "omit", cache: "no-store",
      headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, `cannot reach the control plane: ${e.message}`);
  }
  if (!res.ok) throw await failure(res);
  const text = await res.text();
  return { body: text ? JSON.parse(text) : null, index: Number(res.headers.get("X-Mooring-Index") || 0) };
}

export const get = (path, opts) => call("GET", path, opts);

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
});

// Keeps `path` current with blocking queries (?index=N&wait=5m): onData(body) after the first
// answer and after every change, onError(ApiError) when a read fails (then retried after a pause,
// unless refused: 401/403/404 wait for the next navigation). Stops when `signal` aborts.
export async function watch(path, signal, onData, onError) {
  let index = 0;
  const sep = path.includes("?") ? "&" : "?";
  while (!signal.aborted) {
    try {
      const target = index ? `${path}${sep}index=${index}&wait=5m` : path;
      const r = await get(target, { signal });
      if (signal.aborted) return;
      if (!index || r.index !== index) onData(r.body);
      index = r.index || index;
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted) return;
      onError(e);
      if ([401, 403, 404].includes(e.status)) return;
      await sleep(2000, signal);  // the control plane restarts or is unreachable: try again
    }
  }
}

// Follows GET /v1/event/stream: onEvents(events, index) per line with events (heartbeats are
// skipped), onState(true|false) as the stream connects and drops. Resumes after the last index
// seen when the connection drops. `from`: the first index to send (0: only new events).
export async function streamEvents(query, from, signal, onEvents, onState, onError) {
  let next = from;
  while (!signal.aborted) {
    try {
      const params = new URLSearchParams(query);
      if (next) params.set("index", String(next));
      const res = await fetch(`/v1/event/stream?${params}`, { headers: headers(), signal, credentials: "omit", cache: "no-store" });
      if (!res.ok) {
        const e = await failure(res);
        onError(e);
        if ([400, 401, 403].includes(e.status)) return;
        throw e;
      }
      // Without an index the stream starts after the state the server had: resume from there.
      if (!next) next = Number(res.headers.get("X-Mooring-Index") || 0) + 1;
      onState(true);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let pending = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        pending += value;
        let nl;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          if (!line.trim()) continue;
          const msg = JSON.parse(line);
          if (msg.Error) { onError(new ApiError(0, msg.Error)); onState(false); return; }
          if (msg.Events) {
            onEvents(msg.Events, msg.Index);
            next = msg.Index + 1;
          }
        }
      }
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted) return;
    }
    onState(false);
    await sleep(2000, signal);
  }
}
