#!/usr/bin/python3
"""The dashboard in a real browser against the real stack.

Starts mooring-controlplane (ACLs on, plain HTTP on a free port), a mooring-nodeagent that runs
mooring-hostpath with a fault file, creates volumes and allocations through the API, then drives
headless Chromium (Debian's chromium + chromedriver, python3-selenium) through the pages:
the volume list and detail, a claim stuck on a frozen plugin showing its LastError and going away
once the plugin is freed, the stop button of an allocation freeing its claim, the live event
feed, ACL refusals, and a phone-sized screen. Screenshots go to <build>/tests/dashboard/screenshots.
Exit 77 (skipped) when not root (the plugin bind-mounts) or when Chromium cannot start.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from processes import free_port, mounts_under, start_group, stop_group  # noqa: E402

BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.abspath("build/test")
SHOTS = os.path.join(BUILD, "tests", "dashboard", "screenshots")
SKIP = 77


class Api:
    def __init__(self, base):
        self.base = base
        self.token = ""

    def call(self, method, path, body=None, token=None, raw=False):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        tok = self.token if token is None else token
        if tok:
            req.add_header("X-Mooring-Token", tok)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                payload = r.read()
                return (r.status, dict(r.headers), payload) if raw else (r.status, json.loads(payload or b"null"))
        except urllib.error.HTTPError as e:
            payload = e.read()
            return (e.code, dict(e.headers), payload) if raw else (e.code, json.loads(payload or b"null"))


def eventually(what, check, timeout=20, every=0.2):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - a page in the middle of re-rendering
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Stack:
    """Control plane + one node agent with hostpath, all under one temp dir."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mooring-dashboard-")
        self.http = free_port()
        self.cp_grpc = free_port()
        self.agent_grpc = free_port()
        self.fault_file = os.path.join(self.dir, "faults.json")
        self.procs = []
        self.api = Api(f"http://127.0.0.1:{self.http}")

    def spawn(self, name, args):
        log = open(os.path.join(self.dir, f"{name}.log"), "w")
        p = start_group(args, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((name, p))
        return p

    def start(self):
        bins = {n: os.path.join(BUILD, d, n) for n, d in [("mooring-controlplane", "services/controlplane"),
                                                           ("mooring-nodeagent", "services/nodeagent"),
                                                           ("mooring-hostpath", "plugins/hostpath")]}
        for b in bins.values():
            if not os.access(b, os.X_OK):
                raise RuntimeError(f"{b} is missing: build it first")
        self.spawn("controlplane", [bins["mooring-controlplane"], "--data-dir", os.path.join(self.dir, "cp"),
                                    "--http-addr", f"127.0.0.1:{self.http}", "--grpc-addr", f"127.0.0.1:{self.cp_grpc}",
                                    "--insecure", "--acl", "--gc-retry-max", "4s", "--heartbeat-ttl", "5s",
                                    "--shutdown-grace", "2s"])
        eventually("the control plane's API", lambda: self.api.call("GET", "/v1/status/ready")[0] == 200)
        status, boot = self.api.call("POST", "/v1/acl/bootstrap")
        assert status == 200, boot
        self.api.token = boot["SecretID"]
        config = {
            "node_name": "web-node", "node_id": "web-node", "insecure": True,
            "data_dir": os.path.join(self.dir, "agent"),
            "controlplane_addr": f"127.0.0.1:{self.cp_grpc}", "grpc_addr": f"127.0.0.1:{self.agent_grpc}",
            # Not the default metrics port 4703: this test runs beside others and beside a reader's
            # `make run`; the defaults suite (tests/defaults) is the one on the default ports.
            "metrics_addr": f"127.0.0.1:{free_port()}",
            "heartbeat_interval": "500ms", "drain_on_shutdown": "10s",
            "plugins": [{"id": "hostpath", "type": "monolith", "command": bins["mooring-hostpath"],
                         "args": ["--mode", "monolith", "--data-dir", os.path.join(self.dir, "hostpath"),
                                  "--node-id", "web-node", "--fault-file", self.fault_file]}],
        }
        path = os.path.join(self.dir, "agent.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.spawn("agent", [bins["mooring-nodeagent"], "--config", path])
        eventually("a healthy hostpath plugin",
                   lambda: (self.api.call("GET", "/v1/plugin/csi/hostpath")[1] or {}).get("NodesHealthy", 0) >= 1,
                   timeout=30)

    def faults(self, rules):
        tmp = self.fault_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"rules": rules}, f)
        os.replace(tmp, self.fault_file)

    def stop(self):
        self.failures = []
        for name, p in reversed(self.procs):  # the agent first: it unmounts what its allocations used
            if not stop_group(p, signal.SIGTERM, 20):
                self.failures.append(f"{name} did not stop within 20 s of SIGTERM")
            elif p.returncode != 0:  # a sanitizer's report makes it non-zero too
                self.failures.append(f"{name} exited {p.returncode}")
        left = mounts_under(self.dir)
        for m in sorted(left, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], check=False)
        return left

    def logs(self):
        out = ""
        for name, _ in self.procs:
            with open(os.path.join(self.dir, f"{name}.log"), errors="replace") as f:
                out += f"---- {name}.log (tail) ----\n" + f.read()[-4000:] + "\n"
        return out


def start_browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        print(f"SKIP: python3-selenium is not installed ({e}); scripts/install-deps.sh installs it")
        sys.exit(SKIP)
    for path in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not os.access(path, os.X_OK):
            print(f"SKIP: {path} is missing (Debian's chromium and chromium-driver; scripts/install-deps.sh)")
            sys.exit(SKIP)
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,800",
                 f"--user-data-dir={tempfile.mkdtemp(prefix='mooring-chromium-')}"):
        opts.add_argument(flag)
    try:
        return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    except Exception as e:  # noqa: BLE001 - any failure to start the browser is a skip
        print(f"SKIP: Chromium cannot start here: {str(e).splitlines()[0] if str(e) else e!r}")
        sys.exit(SKIP)


def main():
    if os.geteuid() != 0:
        print("SKIP: the dashboard test needs root (the hostpath plugin bind-mounts volumes)")
        return SKIP
    os.makedirs(SHOTS, exist_ok=True)
    for old in os.listdir(SHOTS):
        os.remove(os.path.join(SHOTS, old))
    driver = start_browser()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    stack = Stack()
    ok = False
    started = time.time()
    try:
        stack.start()
        api = stack.api
        base = api.base

        # ---- what the control plane serves at /ui/ ----
        status, headers, page = api.call("GET", "/ui/", token="", raw=True)
        assert status == 200 and b"<main" in page, (status, page[:200])
        assert headers["Content-Type"].startswith("text/html"), headers
        csp = headers.get("Content-Security-Policy", "")
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp, csp
        assert "Access-Control-Allow-Origin" not in headers, headers
        status, headers, _ = api.call("GET", "/ui/app.js", token="", raw=True)
        assert status == 200 and headers["Content-Type"].startswith("text/javascript"), headers

        # ---- the state the pages show ----
        def create(vid):
            s, body = api.call("PUT", f"/v1/volume/csi/{vid}/create", {"Volumes": [{
                "ID": vid, "Name": vid, "PluginID": "hostpath",
                "RequestedCapabilities": [{"AccessMode": "single-node-writer", "AttachmentMode": "file-system"}],
                "RequestedCapacityMin": 1 << 20}]})
            assert s == 200, body

        def run(name, vid):
            s, body = api.call("POST", "/v1/allocations", {"Allocation": {
                "Name": name, "NodeID": "web-node",
                "Volumes": {"data": {"Type": "csi", "Source": vid, "AccessMode": "single-node-writer",
                                     "AttachmentMode": "file-system"}}}})
            assert s == 200, body
            aid = body["ID"]
            eventually(f"allocation {name} running",
                       lambda: api.call("GET", f"/v1/allocation/{aid}")[1].get("ClientStatus") == "running")
            return aid

        for vid in ("web-data", "web-logs", "web-cache"):
            create(vid)
        stuck_alloc = run("web-writer", "web-data")
        click_alloc = run("log-writer", "web-logs")
        s, snap = api.call("PUT", "/v1/volumes/snapshot", {"Snapshots": [
            {"Name": "before-upgrade", "SourceVolumeID": "web-data", "PluginID": "hostpath"}]})
        assert s == 200, snap
        snapshot_id = snap["Snapshots"][0]["ID"]

        # ---- the token: entered once into the form, kept in sessionStorage, never in a URL ----
        driver.get(base + "/ui/")
        body_text = lambda: driver.find_element(By.TAG_NAME, "main").text  # noqa: E731
        eventually("the anonymous refusal", lambda: "ACL token required" in body_text())
        box = driver.find_element(By.ID, "token-input")
        box.send_keys(api.token)
        box.send_keys(Keys.ENTER)
        eventually("the token's name", lambda: "management" in driver.find_element(By.ID, "token-state").text)
        assert driver.execute_script("return sessionStorage.getItem('mooring.token')") == api.token
        assert api.token not in driver.current_url

        # ---- volumes: list with filters ----
        eventually("the volume list", lambda: all(v in body_text() for v in ("web-data", "web-logs", "web-cache")))
        driver.save_screenshot(os.path.join(SHOTS, "volumes.png"))
        driver.find_element(By.ID, "f-text").send_keys("logs")
        eventually("the filtered list", lambda: "web-logs" in body_text() and "web-cache" not in body_text())
        driver.find_element(By.ID, "f-text").clear()
        driver.find_element(By.ID, "f-text").send_keys(Keys.BACKSPACE)

        # ---- volume detail: capabilities, topology, the claim, allocations, snapshots ----
        driver.get(base + "/ui/#/volume/default/web-data")
        eventually("the claim of web-writer", lambda: "taken" in driver.find_element(By.ID, "claims").text)
        text = body_text()
        for expected in ("single-node-writer", "file-system", "Topology", snapshot_id, stuck_alloc[:8], "write",
                         "hostpath.mooring.io"):
            assert expected in text, f"{expected!r} not on the volume page:\n{text}"
        driver.save_screenshot(os.path.join(SHOTS, "volume.png"))
        # Delete the snapshot from its row: confirmed, then gone from the page and from the plugin.
        row = driver.find_element(By.XPATH, f"//table[@id='snapshot-table']//tr[contains(., '{snapshot_id}')]")
        row.find_element(By.TAG_NAME, "button").click()
        assert snapshot_id in driver.find_element(By.ID, "confirm").text
        driver.find_element(By.ID, "confirm-ok").click()
        eventually("the snapshot to go", lambda: snapshot_id not in driver.find_element(By.ID, "snapshots").text)
        s, snaps = api.call("GET", "/v1/volumes/snapshot?plugin_id=hostpath")
        assert s == 200 and all(x["ID"] != snapshot_id for x in snaps["Snapshots"]), snaps

        # ---- a stuck claim: the plugin refuses ControllerUnpublish; the page shows why, live ----
        stack.faults([{"rpc": "ControllerUnpublishVolume", "code": 14, "message": "backend frozen by the test"}])
        s, _ = api.call("POST", f"/v1/allocation/{stuck_alloc}/stop")
        assert s == 200
        eventually("the stuck claim's LastError",
                   lambda: "backend frozen by the test" in driver.find_element(By.ID, "claims").text, timeout=30)
        # The next attempt counts down (the backoff grows to --gc-retry-max, 4 s).
        eventually("a NextAttempt countdown",
                   lambda: re.search(r"\bin [1-9]s\b", driver.find_element(By.ID, "claims").text), timeout=20)
        driver.save_screenshot(os.path.join(SHOTS, "volume-stuck-claim.png"))
        stack.faults([])  # the plugin is freed: the next attempt releases the claim
        eventually("the claim to go once the plugin is freed",
                   lambda: "No claims" in body_text(), timeout=30)

        # ---- stop from the allocation page: confirm, then its claim is freed ----
        driver.get(base + f"/ui/#/allocation/default/{click_alloc}")
        button = eventually("the stop button", lambda: driver.find_element(By.ID, "stop-alloc"))
        eventually("the allocation running", lambda: "running" in body_text())
        button.click()
        dialog = driver.find_element(By.ID, "confirm")
        assert dialog.is_displayed() and "log-writer" in dialog.text, dialog.text
        driver.find_element(By.ID, "confirm-ok").click()
        eventually("the stop to be accepted", lambda: "done" in driver.find_element(By.ID, "action-result").text)
        eventually("the allocation to stop", lambda: "complete" in body_text() or "Stopping or stopped" in body_text())
        driver.save_screenshot(os.path.join(SHOTS, "allocation-stopped.png"))
        driver.find_element(By.LINK_TEXT, "web-logs").click()
        eventually("web-logs' claim freed", lambda: "No claims" in body_text(), timeout=30)

        # ---- an action that fails shows the API's error text ----
        driver.get(base + "/ui/#/volume/default/web-cache")
        eventually("the web-cache page", lambda: "Snapshots" in body_text())
        stack.faults([{"rpc": "CreateSnapshot", "code": 8, "message": "snapshot quota exhausted"}])
        driver.find_element(By.ID, "snapshot-name").send_keys("nightly" + Keys.ENTER)
        driver.find_element(By.ID, "confirm-ok").click()
        err = eventually("the snapshot refusal", lambda: driver.find_element(By.CSS_SELECTOR, "#action-result .error").text)
        assert "snapshot quota exhausted" in err, err
        print(f"snapshot refusal shown: {err}")
        stack.faults([])
        # Cancelling the dialog does nothing.
        driver.find_element(By.ID, "snapshot-name").send_keys(Keys.ENTER)
        driver.find_element(By.ID, "confirm-cancel").click()
        assert "snapshot quota exhausted" in driver.find_element(By.ID, "action-result").text

        # ---- plugins, nodes ----
        driver.get(base + "/ui/#/plugins")
        eventually("the plugin list", lambda: "hostpath" in body_text() and "1/1" in body_text())
        driver.get(base + "/ui/#/plugin/hostpath")
        eventually("the plugin's instances", lambda: "web-node" in body_text() and "healthy" in body_text())
        driver.get(base + "/ui/#/nodes")
        eventually("the node list", lambda: "web-node" in body_text() and "ready" in body_text())
        driver.get(base + "/ui/#/node/web-node")
        eventually("the node page", lambda: "hostpath" in body_text() and "log-writer" in body_text())

        # ---- the live event feed: an event made now appears without a reload ----
        driver.get(base + "/ui/#/events")
        eventually("the stream to connect", lambda: "live" in driver.find_element(By.ID, "stream-state").text)
        create("web-late")
        eventually("the new volume's event in the feed",
                   lambda: "web-late" in driver.find_element(By.ID, "event-feed").text)
        driver.save_screenshot(os.path.join(SHOTS, "events.png"))

        # ---- keyboard: the skip link is the first stop and leads to the content ----
        driver.get(base + "/ui/#/volumes")
        driver.refresh()  # a fresh document: focus starts at the top
        eventually("the volume list again", lambda: "web-data" in body_text())
        from selenium.webdriver.common.action_chains import ActionChains
        ActionChains(driver).send_keys(Keys.TAB).perform()
        focused = driver.switch_to.active_element
        assert focused.get_attribute("class") == "skip" and focused.is_displayed(), focused.get_attribute("outerHTML")
        ActionChains(driver).send_keys(Keys.ENTER).perform()
        eventually("the skip link to move focus to the content",
                   lambda: driver.switch_to.active_element.get_attribute("id") == "main")
        unlabeled = driver.execute_script("""
          return [...document.querySelectorAll('input, select, button')].filter((el) =>
            !(el.labels && el.labels.length) && !el.getAttribute('aria-label') && !el.textContent.trim()).map((el) => el.id);""")
        assert not unlabeled, f"controls without a label: {unlabeled}"

        # ---- a 403 names the missing capability ----
        s, _ = api.call("PUT", "/v1/acl/policy/volumes-only",
                        {"Rules": {"Namespace": {"default": {"Policy": "read"}}}})
        assert s == 200
        s, tok = api.call("PUT", "/v1/acl/token", {"Name": "viewer", "Type": "client", "Policies": ["volumes-only"]})
        assert s == 200, tok
        driver.find_element(By.ID, "token-input").send_keys(tok["SecretID"] + Keys.ENTER)
        driver.get(base + "/ui/#/nodes")
        eventually("the 403 naming node:read", lambda: "lacks node:read" in body_text())
        driver.get(base + "/ui/#/volumes")
        eventually("the viewer's volume list", lambda: "web-data" in body_text())

        # ---- no token: the anonymous policy applies ----
        s, _ = api.call("PUT", "/v1/acl/policy/anonymous", {"Rules": {"Namespace": {"default": {"Policy": "read"}}}})
        assert s == 200
        driver.find_element(By.ID, "token-clear").click()
        eventually("the token forgotten", lambda: driver.find_element(By.ID, "token-state").text == "anonymous")
        assert driver.execute_script("return sessionStorage.getItem('mooring.token')") is None
        eventually("the anonymous volume list", lambda: "web-data" in body_text() and "Error" not in body_text())

        # ---- a phone: nothing wider than the screen ----
        driver.set_window_size(390, 844)
        driver.get(base + "/ui/#/volume/default/web-data")
        eventually("the phone layout", lambda: "Claims" in body_text())
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"the page is {overflow}px wider than a phone's screen"
        driver.save_screenshot(os.path.join(SHOTS, "volume-phone.png"))
        ok = True
        print(f"dashboard: OK in {time.time() - started:.1f}s; screenshots in {SHOTS}")
    except Exception:
        try:
            driver.save_screenshot(os.path.join(SHOTS, "failure.png"))
            print("---- page at failure ----\n" + driver.find_element(By.TAG_NAME, "body").text[:3000])
        except Exception:  # noqa: BLE001
            pass
        raise
    finally:
        driver.quit()
        left = stack.stop()
        if left:
            ok = False
            print("FAIL: still mounted after the stack stopped:", left)
        for failure in stack.failures:
            ok = False
            print("FAIL:", failure)
        if not ok:
            print(stack.logs())
        shutil.rmtree(stack.dir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
