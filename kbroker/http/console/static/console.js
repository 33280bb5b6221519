// kbroker's web console: one page, routed by the URL's hash, reading /api/... (no framework,
// no build step). Every view renders from one fetch of the JSON API; the throughput view polls.
"use strict";

const main = document.getElementById("main");
let timer = null; // the throughput view's poll, stopped when the view changes

function esc(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}

async function api(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

function table(id, headers, rows) {
  const head = headers.map((h) => `<th>${esc(h)}</th>`).join("");
  return `<table id="${id}"><thead><tr>${head}</tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

function cell(value, cls = "") {
  return `<td class="${cls}">${value === null || value === undefined ? "—" : esc(value)}</td>`;
}

const num = (value) => cell(value, "num");
const list = (values) => cell((values || []).join(", "));
const link = (href, text) => `<a href="${href}">${esc(text)}</a>`;
const enc = encodeURIComponent;

// --- bytes as text, JSON or hex -----------------------------------------------------------

function decodeBase64(b64) {
  if (b64 === null || b64 === undefined) return null;
  const raw = atob(b64);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function render(b64, format) {
  const bytes = decodeBase64(b64);
  if (bytes === null) return "null";
  if (format === "hex") return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
  const text = new TextDecoder("utf-8", {fatal: false}).decode(bytes);
  if (format === "json") {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text + "   (not JSON)"; }
  }
  return text;
}

// --- views --------------------------------------------------------------------------------

async function brokersView() {
  const c = await api("/api/cluster");
  const rows = c.brokers.map((b) => `<tr>${num(b.id)}${cell(b.rack)}` +
    `<td class="${b.fenced ? "fenced" : "ok"}">${b.fenced ? "fenced" : "unfenced"}</td>` +
    `${num(b.epoch)}${cell(b.endpoints.map((e) => `${e.listener}://${e.host}:${e.port}`).join(" "))}</tr>`);
  const dirs = c.log_dirs.map((d) => `<tr>${cell(d.path)}${num(d.partitions)}</tr>`);
  return `<h1>Brokers</h1><p>Cluster <b id="cluster-id">${esc(c.cluster_id)}</b>; active controller ` +
    `<b id="active-controller">${esc(c.active_controller)}</b>; metadata offset ${esc(c.metadata_offset)}.</p>` +
    table("brokers-table", ["broker", "rack", "state", "epoch", "endpoints"], rows) +
    `<h2>Log dirs of broker ${esc(c.this_broker)}</h2>` + table("logdirs-table", ["path", "partitions"], dirs);
}

async function topicsView() {
  const [t, settings] = await Promise.all([api("/api/topics"), api("/api/console")]);
  const rows = t.topics.map((x) => `<tr><td>${link(`#/topic/${enc(x.name)}`, x.name)}</td>${num(x.partitions)}` +
    `${num(x.replication_factor)}${num(x.under_replicated)}${num(x.offline)}${num(x.records)}${num(x.size_bytes)}</tr>`);
  const create = settings.write_enabled ? `<h2>Create a topic</h2><form class="controls" id="create-topic">
      <input type="text" name="name" placeholder="name" required>
      <label>partitions <input type="number" name="partitions" value="1" min="1"></label>
      <label>replication factor <input type="number" name="replication_factor" value="-1"></label>
      <button type="submit">Create</button><span id="create-result"></span></form>` :
    `<p class="muted">Read-only console (kbroker.http.console.write.enable=false).</p>`;
  return `<h1>Topics</h1>` + table("topics-table",
    ["topic", "partitions", "replication factor", "under-replicated", "offline", "records", "bytes"], rows) + create;
}

function bindCreateTopic() {
  const form = document.getElementById("create-topic");
  if (!form) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {name: data.get("name"), partitions: Number(data.get("partitions")),
      replication_factor: Number(data.get("replication_factor"))};
    const response = await fetch("/api/topics", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify(body)});
    const result = response.ok ? `created ${body.name}` : await response.text();
    if (response.ok) await route(); // the list with the new topic; the result shows under it
    document.getElementById("create-result").textContent = result;
  });
}

async function topicView(name) {
  const t = await api(`/api/topics/${enc(name)}`);
  const rows = t.partitions.map((p) => `<tr><td>${link(`#/partition/${enc(name)}/${p.partition}`, p.partition)}</td>` +
    `${num(p.leader)}${num(p.leader_epoch)}${list(p.replicas)}${list(p.isr)}${list(p.elr)}` +
    `${num(p.log_start_offset)}${num(p.high_watermark)}${num(p.log_end_offset)}${num(p.last_stable_offset)}` +
    `${num(p.size_bytes)}${num(p.segments)}</tr>`);
  const configs = t.configs.map((c) => `<tr>${cell(c.name)}${cell(c.value)}${cell(c.source)}</tr>`);
  return `<h1>Topic <span id="topic-name">${esc(name)}</span></h1><p class="muted">id ${esc(t.topic_id)}; ` +
    `offsets and sizes as broker ${esc(t.this_broker)}'s replicas have them.</p>` +
    table("partitions-table", ["partition", "leader", "leader epoch", "replicas", "ISR", "ELR", "log start",
      "HW", "LEO", "LSO", "bytes", "segments"], rows) +
    `<h2>Configs</h2>` + table("configs-table", ["name", "value", "source"], configs);
}

async function partitionView(name, index, query) {
  const t = await api(`/api/topics/${enc(name)}`);
  const p = t.partitions.find((x) => String(x.partition) === String(index));
  const params = new URLSearchParams(query);
  const format = params.get("format") || "text";
  const isolation = params.get("isolation") || "read_uncommitted";
  const max = params.get("max") || "20";
  const read = new URLSearchParams({max, isolation});
  if (params.get("timestamp")) read.set("timestamp", params.get("timestamp"));
  else read.set("offset", params.get("offset") || String(p ? p.log_start_offset ?? 0 : 0));
  const [m, tl] = await Promise.all([
    api(`/api/topics/${enc(name)}/partitions/${index}/messages?${read}`),
    api(`/api/topics/${enc(name)}/partitions/${index}/timeline`),
  ]);
  const messages = m.records.map((r) => `<tr>${num(r.offset)}${cell(new Date(r.timestamp).toISOString())}` +
    `<td class="msg-key"><pre class="value">${esc(render(r.key, format))}</pre></td>` +
    `<td class="msg-value"><pre class="value">${esc(render(r.value, format))}</pre></td>` +
    `<td class="msg-headers">${r.headers.map((h) => `${esc(h.key)}=${esc(render(h.value, format))}`).join("<br>")}</td></tr>`);
  const offsets = p && p.high_watermark === null ? "no replica here for HW, LEO, LSO" :
    p ? `HW ${p.high_watermark}, LEO ${p.log_end_offset}, LSO ${p.last_stable_offset}` : "";
  const summary = p ? `leader ${p.leader} (epoch ${p.leader_epoch}), replicas ${p.replicas.join(", ")}, ` +
    `ISR ${p.isr.join(", ")}, ELR ${p.elr.join(", ") || "none"}, ${offsets}` : "no such partition";
  const sel = (value, current) => `<option${value === current ? " selected" : ""}>${value}</option>`;
  return `<h1>${link(`#/topic/${enc(name)}`, name)} / partition <span id="partition-index">${esc(index)}</span></h1>` +
    `<p id="partition-summary">${esc(summary)}</p>` +
    `<h2>Messages</h2><form class="controls" id="message-form">
      <label>offset <input type="number" name="offset" value="${esc(params.get("offset") || "")}"></label>
      <label>or timestamp (ms) <input type="number" name="timestamp" value="${esc(params.get("timestamp") || "")}"></label>
      <label>max <input type="number" name="max" value="${esc(max)}" min="1" max="500"></label>
      <label>show as <select name="format">${["text", "json", "hex"].map((f) => sel(f, format)).join("")}</select></label>
      <label><input type="checkbox" name="read_committed" ${isolation === "read_committed" ? "checked" : ""}> read_committed</label>
      <button type="submit">Read</button></form>` +
    (m.read_from ? `<p id="read-from" class="muted">Broker ${esc(t.this_broker)} holds no replica of this ` +
      `partition: read from its leader, broker ${esc(m.read_from.broker)}, with a Kafka ${esc(m.read_from.over)} ` +
      `request.</p>` : "") +
    `<p class="muted">${m.records.length} records (${esc(m.isolation)}, up to offset ${esc(m.bound)}), next offset ` +
    `<span id="next-offset">${esc(m.next_offset)}</span>.</p>` +
    table("messages-table", ["offset", "timestamp", "key", "value", "headers"], messages) +
    timelineHtml(tl);
}

function bindMessageForm(name, index) {
  const form = document.getElementById("message-form");
  if (!form) return;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const q = new URLSearchParams({format: data.get("format"), max: data.get("max"),
      isolation: data.get("read_committed") ? "read_committed" : "read_uncommitted"});
    if (data.get("timestamp")) q.set("timestamp", data.get("timestamp"));
    else if (data.get("offset")) q.set("offset", data.get("offset"));
    location.hash = `#/partition/${enc(name)}/${index}?${q}`;
  });
}

function describeEvent(e) {
  switch (e.kind) {
    case "created": return `created, leader ${e.leader} at epoch ${e.leader_epoch}`;
    case "election": return `leader ${e.previous_leader} → ${e.leader} (epoch ${e.previous_leader_epoch} → ${e.leader_epoch})`;
    case "unclean_election": return `UNCLEAN election: leader ${e.previous_leader} → ${e.leader} (epoch ${e.leader_epoch}), ` +
      (e.truncated_from === null || e.truncated_from === undefined ? "records past the new leader's end were truncated"
        : `records from offset ${e.truncated_from} on were truncated`);
    case "offline": return `offline: no leader (was ${e.previous_leader})`;
    case "leader_epoch_bump": return `leader ${e.leader} stays, epoch ${e.previous_leader_epoch} → ${e.leader_epoch}`;
    case "isr_change": return "ISR change";
    case "broker_fenced": return `broker ${e.broker} fenced`;
    case "broker_unfenced": return `broker ${e.broker} unfenced`;
    default: return e.kind;
  }
}

function timelineHtml(tl) {
  const rows = tl.events.map((e) => {
    const isr = [e.isr_shrink ? `shrink −${e.isr_shrink.join(",")}` : "", e.isr_expand ? `expand +${e.isr_expand.join(",")}` : ""]
      .filter(Boolean).join(" ");
    return `<tr class="${e.kind === "unclean_election" ? "unclean" : ""} event-${esc(e.kind)}">${num(e.metadata_offset)}` +
      `${cell(new Date(e.timestamp).toISOString())}${cell(describeEvent(e))}${cell(isr)}${list(e.isr)}${list(e.elr)}</tr>`;
  });
  const start = tl.history_starts_at > 0 ? ` (history from metadata offset ${tl.history_starts_at}, the controller's snapshot)` : "";
  return `<h2>Replication timeline</h2><p class="muted">From the metadata log${esc(start)}.</p>` +
    table("timeline-table", ["metadata offset", "time", "event", "ISR change", "ISR", "ELR"], rows);
}

async function groupsView() {
  const g = await api("/api/groups");
  const rows = g.groups.map((x) => `<tr><td>${link(`#/group/${enc(x.group_id)}`, x.group_id)}</td>${cell(x.type)}` +
    `${cell(x.state)}${num(x.members)}${num(x.total_lag)}${num(x.coordinator)}</tr>`);
  const unreachable = Object.entries(g.unreachable).map(([b, why]) => `broker ${b}: ${why}`).join("; ");
  return `<h1>Consumer groups</h1><p class="muted">Every live broker's groups; members and lag of those ` +
    `broker ${esc(g.this_broker)} coordinates (the others: on their page, asked of their coordinator).</p>` +
    table("groups-table", ["group", "type", "state", "members", "lag", "coordinator"], rows) +
    (unreachable ? `<p class="error">Not answered: ${esc(unreachable)}</p>` : "");
}

async function groupView(id) {
  const [g, settings] = await Promise.all([api(`/api/groups/${enc(id)}`), api("/api/console")]);
  const members = g.members.map((m) => `<tr>${cell(m.member_id)}${cell(m.client_id)}${cell(m.host)}` +
    `${cell(Object.entries(m.assignment).map(([t, ps]) => `${t}: ${ps.join(",")}`).join("; "))}</tr>`);
  const lag = g.lag.map((r) => `<tr>${cell(r.topic)}${num(r.partition)}<td class="num committed">${esc(r.committed_offset)}</td>` +
    `<td class="num end">${esc(r.end_offset ?? "—")}</td><td class="num lag">${esc(r.lag ?? "—")}</td></tr>`);
  return `<h1>Group <span id="group-id">${esc(id)}</span></h1><p>type <b>${esc(g.type)}</b>, state ` +
    `<b id="group-state">${esc(g.state)}</b>, generation ${esc(g.generation ?? "—")}, protocol ${esc(g.protocol)}, ` +
    `coordinator <span id="group-coordinator">broker ${esc(g.coordinator)}</span>` +
    `${g.coordinator === g.this_broker ? "" : " (asked from here)"}, ` +
    `coordinator partition ${esc(g.coordinator_partition)}.</p>` +
    `<h2>Members</h2>` + table("members-table", ["member", "client id", "host", "assignment"], members) +
    `<h2>Lag</h2>` + table("lag-table", ["topic", "partition", "committed offset", "end offset", "lag"], lag) +
    (settings.write_enabled && g.coordinator === g.this_broker ? `<h2>Reset offsets</h2><form class="controls" id="reset-offsets">
      <input type="text" name="topic" placeholder="topic" required value="${esc(g.lag.length ? g.lag[0].topic : "")}">
      <label>to <input type="text" name="to" value="earliest" title="earliest, latest or an offset"></label>
      <button type="submit">Reset (group must have no members)</button><span id="reset-result"></span></form>` : "");
}

function bindResetOffsets(id) {
  const form = document.getElementById("reset-offsets");
  if (!form) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const to = String(data.get("to"));
    const response = await fetch(`/api/groups/${enc(id)}/offsets`, {method: "POST",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({topic: data.get("topic"), to: /^[0-9]+$/.test(to) ? Number(to) : to})});
    const result = response.ok ? "reset" : await response.text();
    if (response.ok) await route(); // the lag from the new offsets; the result shows under it
    document.getElementById("reset-result").textContent = result;
  });
}

function sparkline(points, index) {
  const width = 240, height = 40;
  const values = points.map((p) => p[index]);
  const top = Math.max(1, ...values);
  const step = values.length > 1 ? width / (values.length - 1) : width;
  const path = values.map((v, i) => `${(i * step).toFixed(1)},${(height - (v / top) * (height - 2) - 1).toFixed(1)}`).join(" ");
  return `<svg class="spark" width="${width}" height="${height}"><polyline fill="none" stroke="#2f6fde" ` +
    `stroke-width="1.5" points="${path}"/></svg>`;
}

async function throughputView() {
  const t = await api("/api/throughput");
  const rows = Object.entries(t.topics).sort().map(([topic, points]) => {
    const last = points[points.length - 1] || [0, 0, 0];
    return `<tr>${cell(topic)}<td>${sparkline(points, 1)}</td>${num(last[1].toFixed(1))}` +
      `<td>${sparkline(points, 2)}</td>${num(last[2].toFixed(0))}</tr>`;
  });
  return `<h1>Throughput</h1><p class="muted">Per topic on broker ${esc(t.this_broker)}'s replicas, ` +
    `sampled each second while this page is open.</p>` +
    table("throughput-table", ["topic", "records/s", "now", "bytes/s", "now"], rows);
}

async function clientsView() {
  const c = await api("/api/clients");
  const rows = c.clients.map((x) => `<tr>${cell(x.client_id)}${cell(x.software_name)}${cell(x.software_version)}` +
    `${cell(x.listener)}${cell(x.principal)}${cell(x.address)}` +
    `${cell(x.apis.map((a) => `${a.api} v${a.version}`).join(", "))}</tr>`);
  return `<h1>Clients</h1><p class="muted">Connected to broker ${esc(c.this_broker)} now.</p>` +
    table("clients-table", ["client id", "software", "version", "listener", "principal", "address", "APIs used"], rows);
}

// --- routing ------------------------------------------------------------------------------

async function route() {
  if (timer !== null) { clearInterval(timer); timer = null; }
  const [path, query] = (location.hash.replace(/^#/, "") || "/brokers").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.id === `nav-${parts[0]}`);
  try {
    switch (parts[0]) {
      case "topics": main.innerHTML = await topicsView(); bindCreateTopic(); break;
      case "topic": main.innerHTML = await topicView(parts[1]); break;
      case "partition": main.innerHTML = await partitionView(parts[1], parts[2], query || ""); bindMessageForm(parts[1], parts[2]); break;
      case "groups": main.innerHTML = await groupsView(); break;
      case "group": main.innerHTML = await groupView(parts[1]); bindResetOffsets(parts[1]); break;
      case "throughput":
        main.innerHTML = await throughputView();
        timer = setInterval(async () => { main.innerHTML = await throughputView(); }, 1000);
        break;
      case "clients": main.innerHTML = await clientsView(); break;
      default: main.innerHTML = await brokersView();
    }
    main.dataset.loaded = location.hash; // the browser test waits for this
  } catch (error) {
    main.innerHTML = `<p class="error">${esc(error.message)}</p>`;
    main.dataset.loaded = location.hash;
  }
}

api("/api/console").then((c) => { document.getElementById("node").textContent = `node ${c.node_id}`; });
window.addEventListener("hashchange", route);
route();
