// The dashboard's pages. Each page renders into `main` and keeps itself current through
// blocking queries (api.watch) or the event stream; `signal` aborts when the page is left.
import { call, get, watch, streamEvents, ApiError } from "./api.js";
import { h, link, table, facts, badge, errorBox, fill, action, announce, when, countdown, isSet,
  healthBadge, statusBadge } from "./ui.js";

const enc = encodeURIComponent;
const nsOf = (o) => o.Namespace || "default";
const nsQuery = (ns) => `namespace=${enc(ns || "default")}`;
const volumeHref = (ns, id) => `#/volume/${enc(ns || "default")}/${enc(id)}`;
const allocHref = (ns, id) => `#/allocation/${enc(ns || "default")}/${enc(id)}`;
const nodeHref = (id) => `#/node/${enc(id)}`;
const pluginHref = (id) => `#/plugin/${enc(id)}`;
const short = (id) => (id && id.length > 12 ? id.slice(0, 8) : id);
const shortLink = (href, id) => h("a", { href, title: id, class: "mono" }, short(id));

function section(title, ...body) { return h("section", { class: "panel" }, h("h2", {}, title), ...body); }

function page(main, title, ...body) {
  document.title = `${title} · Mooring`;
  fill(main, h("h1", {}, title), ...body);
}

// Shows `e` in `slot` (a 403 names the missing capability: the API's text says it).
const showError = (slot) => (e) => fill(slot, errorBox(e));

// ---------------------------------------------------------------- volumes
export function volumes(main, signal) {
  const text = h("input", { id: "f-text", type: "search", placeholder: "ID or name" });
  const plugin = h("select", { id: "f-plugin" }, h("option", { value: "" }, "any"));
  const stuck = h("input", { id: "f-stuck", type: "checkbox" });
  const status = h("div", {});
  const list = h("div", { id: "volume-list" });
  let rows = [];
  const render = () => {
    const q = text.value.trim().toLowerCase();
    const shown = rows.filter((v) =>
      (!q || v.ID.toLowerCase().includes(q) || (v.Name || "").toLowerCase().includes(q)) &&
      (!plugin.value || v.PluginID === plugin.value) &&
      (!stuck.checked || v.Schedulable === false || v.NodesHealthy < v.NodesExpected ||
        (v.ControllerRequired && v.ControllersHealthy < v.ControllersExpected)));
    fill(list, table("Volumes", [
      { label: "ID", cell: (v) => link(volumeHref(nsOf(v), v.ID), v.ID) },
      { label: "Name", cell: (v) => v.Name || "—" },
      { label: "Namespace", cell: nsOf },
      { label: "Plugin", cell: (v) => link(pluginHref(v.PluginID), v.PluginID) },
      { label: "Schedulable", cell: (v) => statusBadge(String(v.Schedulable)) },
      { label: "Access mode", cell: (v) => v.AccessMode || (v.RequestedCapabilities || []).map((c) => c.AccessMode).join(", ") || "—" },
      { label: "Plugin health", cell: (v) => [healthBadge(v.NodesHealthy, v.NodesExpected), " nodes"] },
      { label: "Claims", cell: (v) => claimSummary(v) },
    ], shown, { empty: rows.length ? "No volume matches the filters." : "No volumes registered." }));
  };
  [text, plugin, stuck].forEach((el) => el.addEventListener("input", render));
  page(main, "Volumes",
    h("form", { class: "filters", role: "search", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "f-text" }, "Filter", text),
      h("label", { for: "f-plugin" }, "Plugin", plugin),
      h("label", { class: "check", for: "f-stuck" }, stuck, "Only unschedulable or with unhealthy plugins")),
    status, list);
  watch("/v1/volumes?namespace=*", signal, (body) => {
    fill(status);
    rows = body || [];
    const plugins = [...new Set(rows.map((v) => v.PluginID))].sort();
    const chosen = plugin.value;
    fill(plugin, h("option", { value: "" }, "any"), plugins.map((p) => h("option", { value: p }, p)));
    plugin.value = plugins.includes(chosen) ? chosen : "";
    render();
  }, showError(status));
}

function claimSummary(v) {
  return `${v.CurrentReaders ?? 0} read, ${v.CurrentWriters ?? 0} write`;
}

export function volume(main, signal, ns, id) {
  const status = h("div", {});
  const body = h("div", {});
  const out = h("div", { id: "action-result" });
  page(main, `Volume ${id}`, status, out, body);
  let current = null;
  watch(`/v1/volume/csi/${enc(id)}?${nsQuery(ns)}`, signal, (v) => {
    current = v;
    fill(status);
    fill(body, volumeDetail(v, ns, out, () => refreshSnapshots()));
    refreshSnapshots();
    announce(`Volume ${id} updated`);
  }, showError(status));
  const refreshSnapshots = async () => {
    const slot = document.getElementById("snapshots");
    if (!slot || !current) return;
    try {
      const r = await get(`/v1/volumes/snapshot?plugin_id=${enc(current.PluginID)}&${nsQuery(ns)}`, { signal });
      // This volume's: by its id in its namespace (an operator's listing holds every namespace's),
      // or by the plugin's id of the source.
      const mine = (r.body?.Snapshots || []).filter((s) =>
        (s.SourceVolumeID === current.ID && s.Namespace === current.Namespace) ||
        (current.ExternalID && s.ExternalSourceVolumeID === current.ExternalID));
      fill(slot, snapshotTable(mine, current, ns, out, refreshSnapshots));
    } catch (e) {
      if (e.name !== "AbortError") fill(slot, errorBox(e));
    }
  };
}

function volumeDetail(v, ns, out, refreshSnapshots) {
  const claims = v.Claims || [];
  const caps = v.RequestedCapabilities || [];
  const topo = (list) => (list?.length ? list.map((t) => h("div", { class: "mono" },
    Object.entries(t.Segments || t || {}).map(([k, val]) => `${k}=${val}`).join(", ") || "any")) : "—");
  const allocs = (m, mode) => Object.entries(m || {}).map(([aid, a]) => ({ id: aid, a, mode }));
  const snapName = h("input", { id: "snapshot-name", placeholder: "snapshot name", required: true });
  return [
    h("div", { class: "grid" },
      section("Summary", facts([
        ["ID", h("span", { class: "mono" }, v.ID)], ["Name", v.Name], ["Namespace", nsOf(v)],
        ["Plugin", link(pluginHref(v.PluginID), v.PluginID)], ["Provider", `${v.Provider || "—"} ${v.ProviderVersion || ""}`],
        ["External ID", h("span", { class: "mono" }, v.ExternalID)], ["Schedulable", statusBadge(String(v.Schedulable))],
        ["Controllers", healthBadge(v.ControllersHealthy, v.ControllersExpected ?? v.ControllersHealthy)],
        ["Nodes", healthBadge(v.NodesHealthy, v.NodesExpected ?? v.NodesHealthy)],
        ["Capacity", v.Capacity ? `${(v.Capacity / 1048576).toFixed(0)} MiB` : "—"],
      ])),
      section("Capabilities",
        table("Requested capabilities", [
          { label: "Access mode", cell: (c) => c.AccessMode },
          { label: "Attachment mode", cell: (c) => c.AttachmentMode },
        ], caps, { empty: "None requested." }),
        facts([["In use as", `${v.AccessMode || "—"} / ${v.AttachmentMode || "—"}`],
          ["Mount options", v.MountOptions ? `${v.MountOptions.FSType || "—"} ${(v.MountOptions.MountFlags || []).join(" ")}` : "—"]])),
      section("Topology", facts([
        ["Accessible", topo(v.Topologies)],
        ["Required", topo(v.RequestedTopologies?.Required)],
        ["Preferred", topo(v.RequestedTopologies?.Preferred)],
      ]))),
    h("h2", {}, "Claims"),
    table("Claims", [
      { label: "Allocation", cell: (c) => shortLink(allocHref(ns, c.AllocationID), c.AllocationID) },
      { label: "Node", cell: (c) => shortLink(nodeHref(c.NodeID), c.NodeID) },
      { label: "Mode", cell: (c) => c.Mode },
      { label: "State", cell: (c) => statusBadge(c.State) },
      { label: "Last error", cell: (c) => (c.LastError ? h("span", { class: "last-error" }, c.LastError) : "—") },
      { label: "Next attempt", cell: (c) => countdown(c.NextAttempt) },
      { label: "Condition", cell: (c) => (c.Condition ? [statusBadge(c.Condition.Abnormal ? "abnormal" : "normal"), " ", c.Condition.Message || ""] : "—") },
      { label: "Actions", cell: (c) => h("button", { type: "button", class: "danger",
        onclick: () => action({ title: `Detach ${v.ID} from node ${c.NodeID}`, okLabel: "Detach", out,
          text: `Unpublish volume ${v.ID} from node ${c.NodeID}? Allocations there lose access to it.`,
          run: () => call("DELETE", `/v1/volume/csi/${enc(v.ID)}/detach?node=${enc(c.NodeID)}&${nsQuery(ns)}`) }) },
        "Detach from node") },
    ], claims, { empty: "No claims: nothing uses this volume.", id: "claims" }),
    h("h2", {}, "Allocations"),
    table("Read and write allocations", [
      { label: "Allocation", cell: (r) => shortLink(allocHref(ns, r.id), r.id) },
      { label: "Mode", cell: (r) => r.mode },
      { label: "Node", cell: (r) => (r.a?.NodeID ? shortLink(nodeHref(r.a.NodeID), r.a.NodeID) : "—") },
    ], [...allocs(v.ReadAllocs, "read"), ...allocs(v.WriteAllocs, "write")], { empty: "No allocation reads or writes it." }),
    h("h2", {}, "Snapshots"),
    h("form", { class: "actions", onsubmit: (e) => {
      e.preventDefault();
      const name = snapName.value.trim();
      if (!name) return;
      action({ title: `Snapshot ${v.ID}`, okLabel: "Create snapshot", out,
        text: `Create snapshot "${name}" of volume ${v.ID}?`,
        run: () => call("PUT", `/v1/volumes/snapshot?${nsQuery(ns)}`,
          { body: { Snapshots: [{ Name: name, SourceVolumeID: v.ID, PluginID: v.PluginID }] } }),
        done: refreshSnapshots });
    } },
      h("label", { for: "snapshot-name" }, "New snapshot"), snapName, h("button", { type: "submit" }, "Create snapshot")),
    h("div", { id: "snapshots" }, h("p", {}, "Loading snapshots…")),
  ];
}

function snapshotTable(snaps, v, ns, out, refresh) {
  return table("Snapshots", [
    { label: "ID", cell: (s) => h("span", { class: "mono" }, s.ID) },
    { label: "Name", cell: (s) => s.Name || "—" },
    { label: "Size", cell: (s) => (s.SizeBytes ? `${(s.SizeBytes / 1048576).toFixed(1)} MiB` : "—"), class: "num" },
    { label: "Created", cell: (s) => when(typeof s.CreateTime === "number" ? new Date(s.CreateTime * 1000).toISOString() : s.CreateTime) },
    { label: "Ready", cell: (s) => statusBadge(String(s.IsReady)) },
    { label: "Actions", cell: (s) => h("button", { type: "button", class: "danger",
      onclick: () => action({ title: `Delete snapshot ${s.Name || s.ID}`, okLabel: "Delete", out,
        text: `Delete snapshot ${s.ID} of volume ${v.ID}? Its data is gone for good.`,
        run: () => call("DELETE", `/v1/volumes/snapshot?plugin_id=${enc(s.PluginID || v.PluginID)}&snapshot_id=${enc(s.ID)}&${nsQuery(ns)}`),
        done: refresh }) }, "Delete") },
  ], snaps, { empty: "No snapshots of this volume.", id: "snapshot-table" });
}

// ---------------------------------------------------------------- plugins
export function plugins(main, signal) {
  const status = h("div", {});
  const list = h("div", {});
  page(main, "Plugins", status, list);
  watch("/v1/plugins", signal, (rows) => {
    fill(status);
    fill(list, table("Plugins", [
      { label: "ID", cell: (p) => link(pluginHref(p.ID), p.ID) },
      { label: "Provider", cell: (p) => p.Provider || "—" },
      { label: "Version", cell: (p) => p.Version || "—" },
      { label: "Controllers healthy", cell: (p) => healthBadge(p.ControllersHealthy, p.ControllersExpected) },
      { label: "Nodes healthy", cell: (p) => healthBadge(p.NodesHealthy, p.NodesExpected) },
    ], rows || [], { empty: "No plugins have registered." }));
  }, showError(status));
}

function instances(map, kind) {
  return Object.entries(map || {}).map(([node, i]) => ({ node, kind, ...i }));
}

export function plugin(main, signal, id) {
  const status = h("div", {});
  const body = h("div", {});
  const events = h("div", {});
  page(main, `Plugin ${id}`, status, body, h("h2", {}, "Recent events"), events);
  watch(`/v1/plugin/csi/${enc(id)}`, signal, (p) => {
    fill(status);
    fill(body, h("div", { class: "grid" }, section("Summary", facts([
      ["Provider", p.Provider], ["Version", p.Version], ["Controller required", String(p.ControllerRequired)],
      ["Controllers", healthBadge(p.ControllersHealthy, p.ControllersExpected)],
      ["Nodes", healthBadge(p.NodesHealthy, p.NodesExpected)],
    ]))),
    h("h2", {}, "Instances"),
    table("Plugin instances", [
      { label: "Node", cell: (i) => shortLink(nodeHref(i.node), i.node) },
      { label: "Kind", cell: (i) => i.kind },
      { label: "Healthy", cell: (i) => statusBadge(i.Healthy ? "healthy" : "unhealthy") },
      { label: "Health", cell: (i) => i.HealthDescription || "—" },
      { label: "Updated", cell: (i) => when(i.UpdateTime) },
    ], [...instances(p.Controllers, "controller"), ...instances(p.Nodes, "node")], { empty: "No instances." }));
  }, showError(status));
  watch(`/v1/events?topic=Plugin&key=${enc(id)}&per_page=20`, signal, (rows) => fill(events, eventTable(rows || [], true)),
    showError(events));
}

// ---------------------------------------------------------------- nodes
export function nodes(main, signal) {
  const status = h("div", {});
  const list = h("div", {});
  page(main, "Nodes", status, list);
  watch("/v1/nodes", signal, (rows) => {
    fill(status);
    fill(list, table("Nodes", [
      { label: "ID", cell: (n) => shortLink(nodeHref(n.ID), n.ID) },
      { label: "Name", cell: (n) => n.Name },
      { label: "Address", cell: (n) => n.Address || "—" },
      { label: "Status", cell: (n) => statusBadge(n.Status) },
      { label: "Plugins", cell: (n) => Object.keys(n.Plugins || n.Drivers || {}).join(", ") || "—" },
      { label: "Last heartbeat", cell: (n) => when(n.LastHeartbeat) },
    ], rows || [], { empty: "No nodes have registered." }));
  }, showError(status));
}

export function node(main, signal, id) {
  const status = h("div", {});
  const body = h("div", {});
  const allocs = h("div", {});
  page(main, `Node ${short(id)}`, status, body, h("h2", {}, "Allocations"), allocs);
  watch(`/v1/node/${enc(id)}`, signal, (n) => {
    fill(status);
    const plugins = Object.entries(n.Plugins || {}).map(([pid, p]) => ({ pid, ...p }));
    fill(body, h("div", { class: "grid" }, section("Summary", facts([
      ["ID", h("span", { class: "mono" }, n.ID)], ["Name", n.Name], ["Address", n.Address],
      ["Status", statusBadge(n.Status)], ["Last heartbeat", when(n.LastHeartbeat)],
    ]))),
    h("h2", {}, "Plugins"),
    table("Plugins on this node", [
      { label: "Plugin", cell: (p) => link(pluginHref(p.pid), p.pid) },
      { label: "Type", cell: (p) => p.Type || "—" },
      { label: "Version", cell: (p) => p.Version || "—" },
      { label: "Healthy", cell: (p) => statusBadge(p.Healthy === undefined ? "—" : p.Healthy ? "healthy" : "unhealthy") },
      { label: "Health", cell: (p) => p.HealthDescription || "—" },
      { label: "Updated", cell: (p) => when(p.UpdateTime) },
    ], plugins, { empty: "No plugins on this node." }),
    h("h2", {}, "Events"),
    table("Node events", [
      { label: "Time", cell: (e) => when(e.Timestamp) },
      { label: "Subsystem", cell: (e) => e.Subsystem },
      { label: "Message", cell: (e) => e.Message },
    ], [...(n.Events || [])].reverse(), { empty: "No events." }));
  }, showError(status));
  watch(`/v1/allocations?namespace=*&node_id=${enc(id)}`, signal, (rows) => fill(allocs, allocTable(rows || [])),
    showError(allocs));
}

// ---------------------------------------------------------------- allocations
function allocTable(rows) {
  return table("Allocations", [
    { label: "ID", cell: (a) => shortLink(allocHref(nsOf(a), a.ID), a.ID) },
    { label: "Name", cell: (a) => a.Name || "—" },
    { label: "Namespace", cell: nsOf },
    { label: "Node", cell: (a) => (a.NodeID ? shortLink(nodeHref(a.NodeID), a.NodeID) : "—") },
    { label: "Desired", cell: (a) => a.DesiredStatus },
    { label: "Status", cell: (a) => statusBadge(a.ClientStatus) },
  ], rows, { empty: "No allocations.", id: "alloc-table" });
}

export function allocations(main, signal) {
  const status = h("div", {});
  const list = h("div", {});
  page(main, "Allocations", status, list);
  watch("/v1/allocations?namespace=*", signal, (rows) => { fill(status); fill(list, allocTable(rows || [])); }, showError(status));
}

export function allocation(main, signal, ns, id) {
  const status = h("div", {});
  const out = h("div", { id: "action-result" });
  const body = h("div", {});
  page(main, `Allocation ${short(id)}`, status, out, body);
  watch(`/v1/allocation/${enc(id)}?${nsQuery(ns)}`, signal, (a) => {
    fill(status);
    const vols = Object.entries(a.Volumes || {}).map(([name, v]) => ({ name, ...v }));
    const stoppable = a.DesiredStatus !== "stop";
    fill(body,
      h("div", { class: "actions" }, h("button", { type: "button", class: "danger", id: "stop-alloc", disabled: !stoppable,
        onclick: () => action({ title: `Stop allocation ${short(a.ID)}`, okLabel: "Stop", out,
          text: `Stop allocation ${a.Name || a.ID}? Its task is killed and its volumes released.`,
          run: () => call("POST", `/v1/allocation/${enc(a.ID)}/stop?${nsQuery(ns)}`) }) },
      stoppable ? "Stop allocation" : "Stopping or stopped")),
      h("div", { class: "grid" }, section("Summary", facts([
        ["ID", h("span", { class: "mono" }, a.ID)], ["Name", a.Name], ["Namespace", ns],
        ["Node", a.NodeID ? shortLink(nodeHref(a.NodeID), a.NodeID) : "—"],
        ["Desired status", a.DesiredStatus], ["Client status", statusBadge(a.ClientStatus)],
      ]))),
      h("h2", {}, "Volumes"),
      table("Volumes of this allocation", [
        { label: "Name", cell: (v) => v.name },
        { label: "Volume", cell: (v) => link(volumeHref(ns, v.Source), v.Source) },
        { label: "Access", cell: (v) => `${v.AccessMode} / ${v.AttachmentMode}${v.ReadOnly ? " (read-only)" : ""}` },
      ], vols, { empty: "No volumes." }),
      h("h2", {}, "Events"),
      table("Allocation events", [
        { label: "Time", cell: (e) => when(e.Time) },
        { label: "Type", cell: (e) => e.Type },
        { label: "Message", cell: (e) => e.Message },
      ], [...(a.Events || [])].reverse(), { empty: "No events." }));
  }, showError(status));
}

// ---------------------------------------------------------------- events
function eventTable(rows, newestFirst) {
  const list = newestFirst ? [...rows].reverse() : rows;
  return table("Events", [
    { label: "Index", cell: (e) => e.Index, class: "num" },
    { label: "Time", cell: (e) => when(e.Time) },
    { label: "Topic", cell: (e) => e.Topic },
    { label: "Type", cell: (e) => e.Type },
    { label: "Key", cell: (e) => e.Key ? h("span", { class: "mono" }, e.Key) : "—" },
    { label: "Message", cell: (e) => e.Message },
  ], list, { empty: "No events yet." });
}

const TOPICS = ["Volume", "Claim", "Allocation", "Node", "Plugin"];

export function events(main, signal) {
  const state = h("span", { id: "stream-state" }, h("span", { class: "live-dot off", "aria-hidden": "true" }), "connecting…");
  const status = h("div", {});
  const feed = h("ol", { class: "feed", id: "event-feed", "aria-live": "off" });
  const boxes = TOPICS.map((t) => h("input", { type: "checkbox", id: `topic-${t}`, value: t, checked: true }));
  page(main, "Live events",
    h("div", { class: "filters" }, h("fieldset", { class: "actions" }, h("legend", {}, "Topics"),
      boxes.map((b) => h("label", { class: "check", for: b.id }, b, b.value))), state),
    status, feed);
  let inner = null;
  const start = async () => {
    inner?.abort();
    inner = new AbortController();
    signal.addEventListener("abort", () => inner.abort(), { once: true });
    const mine = inner.signal;
    feed.replaceChildren();
    const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
    if (!chosen.length) { fill(status, h("p", { class: "notice" }, "Choose at least one topic.")); return; }
    fill(status);
    const query = chosen.map((t) => ["topic", t]);
    // The recent past from the log, then everything after it from the stream.
    let from = 0;
    try {
      const r = await get(`/v1/events?namespace=*&per_page=50`, { signal: mine });
      const recent = (r.body || []).filter((e) => chosen.includes(e.Topic));
      for (const e of recent) feed.prepend(feedItem(e));
      from = (r.body?.length ? r.body[r.body.length - 1].Index : r.index) + 1;
    } catch (e) {
      if (e.name === "AbortError") return;
      fill(status, errorBox(e));
      return;
    }
    query.push(["namespace", "*"]);
    streamEvents(query, from, mine, (evs) => {
      for (const e of evs) feed.prepend(feedItem(e));
      while (feed.children.length > 500) feed.lastChild.remove();
    }, (up) => fill(state, h("span", { class: `live-dot ${up ? "" : "off"}`, "aria-hidden": "true" }), up ? "live" : "reconnecting…"),
    (e) => fill(status, errorBox(e)));
  };
  boxes.forEach((b) => b.addEventListener("change", start));
  start();
}

function feedItem(e) {
  const href = e.Topic === "Volume" || e.Topic === "Claim" ? volumeHref(e.Namespace, e.Key)
    : e.Topic === "Allocation" ? allocHref(e.Namespace, e.Key) : e.Topic === "Node" ? nodeHref(e.Key)
    : e.Topic === "Plugin" ? pluginHref(e.Key) : null;
  return h("li", { "data-topic": e.Topic },
    h("span", { class: "mono" }, `#${e.Index}`), h("span", {}, when(e.Time)), h("span", {}, badge(e.Topic)),
    h("span", {}, e.Type), h("span", {}, href && e.Key ? h("a", { href }, e.Key) : (e.Key || ""), e.Message ? ` — ${e.Message}` : ""));
}

export { ApiError, isSet };
