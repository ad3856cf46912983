"""The chaos client: HTTPS requests to the control planes with the management token, each one
recorded in the history with its invoke and completion times (CLOCK_MONOTONIC) and what is known
of its outcome:
  ok    the API answered 2xx (a read's 404 is an ok read of "absent");
  fail  it certainly changed nothing: a 4xx, or the connection never opened (nothing was sent);
  info  in doubt: a 5xx, or the connection broke or timed out after the request went out.
A fresh connection per request: a cut link then costs one request, not a pool of stuck ones."""
import http.client
import json
import socket
import ssl
import threading
import time


class Api:
    def __init__(self, ca_file, token, timeout=10.0):
        self.ctx = ssl.create_default_context(cafile=ca_file)
        self.token = token
        self.timeout = timeout

    def call(self, base, method, path, body=None, timeout=None):
        """(status, headers, text, sent): status 0 when no answer came; `sent` whether the
        request may have reached the server."""
        host, port = base.split("://", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPSConnection(host, int(port), context=self.ctx, timeout=timeout or self.timeout)
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["X-Mooring-Token"] = self.token
        data = json.dumps(body).encode() if body is not None else None
        sent = False
        try:
            conn.connect()
            sent = True
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace"), True
        except (OSError, ssl.SSLError, http.client.HTTPException, socket.timeout) as e:
            return 0, {}, f"{type(e).__name__}: {e}", sent
        finally:
            conn.close()


class Recorder:
    """Appends one JSON line per client operation to ops.jsonl."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()
        self.next_id = 0

    def new_id(self):
        with self.lock:
            self.next_id += 1
            return self.next_id

    def write(self, op):
        with self.lock:
            self.f.write(json.dumps(op, sort_keys=True) + "\n")

    def close(self):
        self.f.close()


def outcome(status, sent, read=False):
    if 200 <= status < 300 or (read and status == 404):
        return "ok"
    if 400 <= status < 500:
        return "fail"
    if status == 0 and not sent:
        return "fail"
    return "info"


def error_text(text):
    try:
        return json.loads(text).get("Error", "")
    except (ValueError, AttributeError):
        return text[:300]


class Client:
    """One workload or checker client: which control plane to ask, and the recording."""

    def __init__(self, api, recorder, urls):
        self.api = api
        self.rec = recorder
        self.urls = urls  # member name -> base URL

    def op(self, kind, obj, cp, method, path, body=None, read=False, value_of=None, extra=None, fields=None):
        """Runs and records one operation; returns the record and the answer's text. `value_of`
        gives the value an ok answer observed (the linearizability check's), `fields` more keys
        to keep from it."""
        op_id = self.rec.new_id()
        invoke = time.monotonic_ns()
        status, headers, text, sent = self.api.call(self.urls[cp], method, path, body)
        complete = time.monotonic_ns()
        rec = {"id": op_id, "kind": kind, "obj": obj, "cp": cp, "invoke": invoke, "complete": complete,
               "status": status, "outcome": outcome(status, sent, read)}
        if headers.get("x-mooring-stale"):
            rec["stale"] = True
        if status >= 400 or status == 0:
            rec["error"] = error_text(text)
        if rec["outcome"] == "ok" and (value_of or fields):
            try:
                answer = json.loads(text) if text and status != 404 else None
                if value_of:
                    rec["value"] = value_of(status, answer)
                if fields and answer is not None:
                    rec.update(fields(answer))
            except (ValueError, KeyError, TypeError, IndexError) as e:
                rec["outcome"], rec["error"] = "info", f"unreadable answer: {e}: {text[:200]}"
        if extra:
            rec.update(extra)
        self.rec.write(rec)
        return rec, text
