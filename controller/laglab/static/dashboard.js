// laglab dashboard: plain JavaScript, no libraries, served by the controller (works offline).
"use strict";
let WINDOW = 600; // seconds of lag shown (less if the controller keeps less: LAG_WINDOW_SECONDS)
// nodes: a cluster member's own lag line (name -> [{t, lag}]), drawn beside the replica's.
const state = { points: [], markers: [], lastEpoch: 0, lastEvent: 0, nodes: {}, nodeSince: {} };
window.laglab = state; // for people poking around, and the browser test

// The token arrives once in the link `./laglab dashboard` prints (#token=..., a fragment: browsers never
// send it to a server) and is kept in this origin's localStorage, which no other port of the host can
// read (a cookie would reach every service on 127.0.0.1). Results links come signed from the API.
(function takeTokenFromLink() {
  const m = location.hash.match(/(?:^#|&)token=([^&]+)/);
  if (m) {
    localStorage.setItem("laglab-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();
function token() { return localStorage.getItem("laglab-token") || ""; }
async function api(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (token()) headers.Authorization = "Bearer " + token();
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    const t = prompt("This lab's API needs its token (./laglab dashboard prints a link that carries it; or LAB_API_TOKEN in .env):");
    if (t) { localStorage.setItem("laglab-token", t); return api(method, path, body); }
  }
  const text = await res.text();
  const data = text ? JSON.parse(text) : {};
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

// --- lag chart ---
async function pollLag() {
  const q = state.lastEpoch ? `since=${state.lastEpoch}&seconds=${WINDOW}` : `seconds=${WINDOW}`;
  const data = await api("GET", `/api/lag?${q}`);
  for (const s of data.samples) {
    state.points.push({
      t: s.epoch, lag: s.status === "ok" ? s.lag_seconds : null,
      split: s.transit_seconds == null ? null : [s.transit_seconds, s.queue_seconds, s.apply_seconds],
    });
    state.lastEpoch = Math.max(state.lastEpoch, s.epoch);
  }
  const cut = state.lastEpoch - WINDOW;
  while (state.points.length && state.points[0].t < cut) state.points.shift();
  const others = Object.entries(data.replicas || {});
  const main = data.latest ? data.latest.replica : null;
  const members = others.map(([name]) => name).filter(name => name !== main);
  await Promise.all(members.map(pollNode));
  for (const name of Object.keys(state.nodes)) if (!members.includes(name)) delete state.nodes[name];
  const list = document.getElementById("replicas");
  list.replaceChildren();
  if (others.length > 1) list.append("every replica now: ");
  if (others.length > 1) others.forEach(([name, r], i) => {
    const key = document.createElement("span");
    key.className = "key";
    key.style.color = name === main ? "#1f5fa8" : nodeColour(name);
    key.textContent = (name === main ? "" : "━ ") + `${name} ${r.status === "ok" ? lagText(r.lag_seconds) : "gap"}` +
      (r.applier_queue != null ? ` (queue ${r.applier_queue}${r.certifier_queue != null ? "/" + r.certifier_queue : ""})` : "") +
      (i < others.length - 1 ? "," : "");
    list.append(key);
  });
  const l = data.latest;
  document.getElementById("lag-now").textContent = l ? (l.status === "ok" ? lagText(l.lag_seconds) : `gap: ${l.reason}`) : "";
}

// A cluster member's samples since the last poll (GET /api/lag?replica=), kept for the chart's window.
async function pollNode(name) {
  const since = state.nodeSince[name];
  const data = await api("GET", `/api/lag?replica=${encodeURIComponent(name)}&seconds=${WINDOW}` + (since ? `&since=${since}` : ""));
  const points = state.nodes[name] || (state.nodes[name] = []);
  for (const s of data.samples) {
    points.push({ t: s.epoch, lag: s.status === "ok" ? s.lag_seconds : null });
    state.nodeSince[name] = Math.max(state.nodeSince[name] || 0, s.epoch);
  }
  while (points.length && points[0].t < state.lastEpoch - WINDOW) points.shift();
}
const NODE_COLOURS = ["#d81b60", "#8e24aa", "#f4511e", "#00897b", "#6d4c41", "#3949ab"];
function nodeColour(name) {
  const names = Object.keys(state.nodes).sort();
  return NODE_COLOURS[Math.max(0, names.indexOf(name)) % NODE_COLOURS.length];
}

async function pollEvents() {
  const data = await api("GET", `/api/events?since=${state.lastEvent}`);
  for (const e of data.events) { state.markers.push(e); state.lastEvent = Math.max(state.lastEvent, e.epoch); }
  while (state.markers.length && state.markers[0].epoch < state.lastEpoch - WINDOW) state.markers.shift();
}

// Events on the lag chart: a group is every marker within `gap` pixels of the group's first one.
const MARKER_GAP = 24;
function groupMarkers(markers, x, gap) {
  const groups = [];
  for (const mk of [...markers].sort((a, b) => a.epoch - b.epoch)) {
    const px = x(mk.epoch), open = groups[groups.length - 1];
    if (open && px - open.x < gap) open.markers.push(mk);
    else groups.push({ x: px, markers: [mk] });
  }
  return groups;
}
// The chart's tooltip: every event of the marker group under the pointer (within half a gap).
function markerDetails(groups, px) {
  const near = groups.filter(grp => px >= grp.x - MARKER_GAP / 2 && px <= grp.x + MARKER_GAP);
  return near.flatMap(grp => grp.markers).map(mk => `${mk.time.slice(11, 19)} ${mk.text}`).join("\n");
}

function draw() {
  const c = document.getElementById("lag-chart"), g = c.getContext("2d");
  const W = c.width, H = c.height, L = 55, R = 10, T = 12, B = 28;
  g.clearRect(0, 0, W, H);
  const end = state.lastEpoch || Date.now() / 1000, start = end - WINDOW;
  const lags = [state.points, ...Object.values(state.nodes)].flat().filter(p => p.lag !== null && p.t >= start).map(p => p.lag);
  const top = lags.reduce((a, b) => Math.max(a, b), 0.1) * 1.15;  // no spread: 10 ms samples are too many arguments
  const x = t => L + (t - start) / WINDOW * (W - L - R), y = v => H - B - v / top * (H - T - B);
  g.strokeStyle = "#ccc"; g.fillStyle = "#444"; g.font = "11px sans-serif"; g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4; g.beginPath(); g.moveTo(L, y(v)); g.lineTo(W - R, y(v)); g.stroke();
    g.fillText(v < 1 ? `${(v * 1000).toFixed(0)} ms` : `${v.toFixed(2)} s`, 2, y(v) + 4);
  }
  for (let k = 0; k <= 5; k++) {
    const ago = WINDOW * (1 - k / 5);
    g.fillText(ago >= 60 ? `-${(ago / 60).toFixed(ago % 60 ? 1 : 0)} min` : `-${ago.toFixed(0)} s`, x(end - ago) - 14, H - 8);
  }
  const styles = {
    shaping: ["#b35c00", [6, 3], "S"], run: ["#6a3d9a", [2, 3], "R"], load: ["#2e7d32", [6, 3], "L"],
    fault: ["#c62828", [4, 2], "F"], timeline: ["#00838f", [1, 2], "T"],
  };
  // Markers closer than a label's width are one group: one line, its kinds' letters and a count
  // ("T×5" for a burst of timeline steps); hovering the chart near it lists every event in it.
  state.groups = groupMarkers(state.markers.filter(mk => mk.epoch >= start), x, MARKER_GAP);
  for (const grp of state.groups) {
    const first = grp.markers[0];
    const [color, dash] = styles[first.kind] || ["#888", [3, 3]];
    const letters = [...new Set(grp.markers.map(mk => (styles[mk.kind] || [0, 0, "?"])[2]))].join("");
    g.strokeStyle = color; g.setLineDash(dash); g.beginPath(); g.moveTo(grp.x, T); g.lineTo(grp.x, H - B); g.stroke();
    g.setLineDash([]); g.fillStyle = color;
    g.fillText(grp.markers.length > 1 ? `${letters}×${grp.markers.length}` : letters, grp.x + 2, T + 10);
  }
  const line = (points, colour) => {
    g.strokeStyle = colour; g.lineWidth = 1.5; g.beginPath(); let pen = false;
    for (const p of points) {
      if (p.lag === null || p.t < start) { pen = false; continue; }
      if (!pen) { g.moveTo(x(p.t), y(p.lag)); pen = true; } else g.lineTo(x(p.t), y(p.lag));
    }
    g.stroke();
  };
  for (const name of Object.keys(state.nodes).sort()) line(state.nodes[name], nodeColour(name));
  line(state.points, "#1f5fa8");
  drawSplit(start, end);
}

// Stacked: transit, queue, apply of the newest applied transaction at each sample.
const SPLIT_COLOURS = ["#1f5fa8", "#e08a00", "#2e7d32"];
function drawSplit(start, end) {
  const c = document.getElementById("split-chart"), g = c.getContext("2d");
  const W = c.width, H = c.height, L = 55, R = 10, T = 8, B = 8;
  g.clearRect(0, 0, W, H);
  const pts = state.points.filter(p => p.split && p.t >= start);
  state.splitSamples = pts.length;
  const top = pts.reduce((a, p) => Math.max(a, p.split[0] + p.split[1] + p.split[2]), 0.01) * 1.15;
  const x = t => L + (t - start) / (end - start || 1) * (W - L - R), y = v => H - B - v / top * (H - T - B);
  g.fillStyle = "#444"; g.font = "11px sans-serif";
  g.fillText(top < 1 ? `${(top * 1000).toFixed(0)} ms` : `${top.toFixed(2)} s`, 2, T + 8);
  for (let layer = 2; layer >= 0; layer--) {  // the total first, then what lies under it
    g.fillStyle = SPLIT_COLOURS[layer];
    for (let i = 0; i < pts.length; i++) {
      const p = pts[i], next = pts[i + 1], w = Math.max(1, next ? x(next.t) - x(p.t) : 2);
      const v = p.split.slice(0, layer + 1).reduce((a, b) => a + b, 0);
      g.fillRect(x(p.t), y(v), w, y(0) - y(v));
    }
  }
}

// --- containers, links, shaping form ---
// A link's traffic in the unit its shaping is asked in (#53: a 2 Mbit/s link read as 0.25 MB/s).
function bytesPerSecond(v) { return v == null ? "" : v * 8 >= 1e6 ? `${(v * 8 / 1e6).toFixed(2)} Mbit/s` : `${(v * 8 / 1e3).toFixed(1)} kbit/s`; }
// The lag in ms below a second, in s above (#53: "93512 ms" read as 93 ms).
function lagText(seconds) { return seconds < 1 ? `${(seconds * 1000).toFixed(0)} ms` : `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`; }
function shapingText(list) {
  return list.map(e => `${e.peer ? "→ " + e.peer : "all"}: ` + ["delay", "jitter", "loss", "rate"].filter(k => e[k]).map(k => `${k} ${e[k]}`).join(", ")).join("; ");
}
async function pollContainers() {
  const [cs, links] = await Promise.all([api("GET", "/api/containers"), api("GET", "/api/links").catch(() => ({ latest: [] }))]);
  const byService = {};
  for (const r of links.latest) if (r.kind === "container") byService[r.service] = r;
  const tbody = document.querySelector("#containers tbody");
  tbody.innerHTML = "";
  for (const c of cs.containers) {
    const r = byService[c.service] || {};
    const tr = document.createElement("tr");
    for (const v of [c.service, c.ip || "", shapingText(c.shaping), bytesPerSecond(r.rx_bytes_per_second), bytesPerSecond(r.tx_bytes_per_second)]) {
      const td = document.createElement("td"); td.textContent = v; tr.appendChild(td);
    }
    tbody.appendChild(tr);
    for (const r2 of links.latest.filter(l => l.kind === "link" && l.service === c.service && l.tx_bytes_per_second > 1000)) {
      const tl = document.createElement("tr");
      for (const v of [`  ${c.service} → ${r2.peer}`, "", "", "", bytesPerSecond(r2.tx_bytes_per_second)]) {
        const td = document.createElement("td"); td.textContent = v; tl.appendChild(td);
      }
      tbody.appendChild(tl);
    }
  }
  const shapeable = cs.containers.filter(c => c.running && c.ip && c.shapeable).map(c => c.service);
  const faultable = cs.containers.filter(c => c.shapeable).map(c => c.service);  // stopped ones can be started
  for (const id of ["f-service", "f-peer", "fault-service"]) {
    const sel = document.getElementById(id), keep = sel.value;
    const wanted = id === "fault-service" ? faultable : (id === "f-peer" ? [""] : []).concat(shapeable);
    if ([...sel.options].map(o => o.value).join() !== wanted.join()) {
      sel.innerHTML = "";
      for (const s of wanted) { const o = document.createElement("option"); o.value = s; o.textContent = s || "(all)"; sel.appendChild(o); }
      sel.value = wanted.includes(keep) ? keep : wanted[0];
    }
  }
}

document.getElementById("shaping-form").addEventListener("submit", async ev => {
  ev.preventDefault();
  const f = new FormData(ev.target), out = document.getElementById("f-result"), body = {};
  for (const k of ["delay", "jitter", "loss", "rate"]) if (f.get(k)) body[k] = f.get(k);
  if (f.get("peer")) body.peer = f.get("peer");
  try {
    await api("PUT", `/api/shaping/${encodeURIComponent(f.get("service"))}`, body);
    out.textContent = "applied"; out.className = "ok";
  } catch (e) { out.textContent = e.message; out.className = "error"; }
  refresh();
});
document.getElementById("f-clear").addEventListener("click", async () => {
  const f = new FormData(document.getElementById("shaping-form")), out = document.getElementById("f-result");
  const q = f.get("peer") ? `?peer=${encodeURIComponent(f.get("peer"))}` : "";
  try { await api("DELETE", `/api/shaping/${encodeURIComponent(f.get("service"))}${q}`); out.textContent = "cleared"; out.className = "ok"; }
  catch (e) { out.textContent = e.message; out.className = "error"; }
  refresh();
});

// --- faults and partitions ---
async function pollFaults() {
  const [faults, parts] = await Promise.all([api("GET", "/api/faults"), api("GET", "/api/partitions")]);
  const box = document.getElementById("active-faults");
  box.innerHTML = "";
  const items = faults.active.map(f => `${f.id}: ${f.action} ${f.service} (${f.undo} when its ${f.duration_seconds}s are over)`)
    .concat(parts.partitions.map(p => `${p.id}: partition ${p.a.join(",")} ${p.oneway ? "→" : "↔"} ${p.b.join(",")}` + (p.expires_in ? `, heals in ${p.expires_in}` : "")));
  for (const text of items.length ? items : ["none active"]) { const li = document.createElement("li"); li.textContent = text; box.appendChild(li); }
}
document.getElementById("fault-form").addEventListener("submit", async ev => {
  ev.preventDefault();
  const f = new FormData(ev.target), out = document.getElementById("fault-result");
  const body = { service: f.get("service"), action: f.get("action") };
  if (f.get("duration")) body.duration = f.get("duration");
  try { const r = await api("POST", "/api/faults", body); out.textContent = `${r.id}: took effect after ${r.effect_ms} ms`; out.className = "ok"; }
  catch (e) { out.textContent = e.message; out.className = "error"; }
  refresh();
});
document.getElementById("heal-all").addEventListener("click", async () => {
  const out = document.getElementById("fault-result");
  try { await api("DELETE", "/api/partitions"); out.textContent = "healed"; out.className = "ok"; }
  catch (e) { out.textContent = e.message; out.className = "error"; }
  refresh();
});

// --- load ---
async function pollLoad() {
  const s = await api("GET", "/api/load").catch(e => ({ error: e.message }));
  const el = document.getElementById("load-status");
  const what = s.profile && s.profile.replay ? `the replay of ${s.profile.replay.profile}` : s.profile && s.profile.script;
  if (s.running && s.latest) el.textContent = `running ${what}: ${s.latest.tps.toFixed(1)} TPS, ${s.latest.qps.toFixed(1)} QPS achieved`;
  else if (s.running) el.textContent = `starting ${what}…`;
  else el.textContent = s.error ? `stopped (${s.error})` : "idle";
}
document.getElementById("load-form").addEventListener("submit", async ev => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = { script: f.get("script"), rate: +f.get("rate"), threads: +f.get("threads"), seconds: +f.get("seconds"), prepare: f.get("prepare") === "on" };
  try { await api("POST", "/api/load", body); } catch (e) { document.getElementById("load-status").textContent = e.message; }
});
document.getElementById("load-stop").addEventListener("click", () => api("DELETE", "/api/load").catch(() => {}));

// --- runs ---
function clock(s) { s = Math.round(s); return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`; }
async function pollRuns() {
  const data = await api("GET", "/api/runs");
  const box = document.getElementById("runs");
  if (!data.runs.length) { box.textContent = "No runs yet: make run SCENARIO=scenarios/<name>.yaml"; return; }
  box.innerHTML = "";
  for (const r of data.runs.slice().reverse().slice(0, 8)) {
    const p = document.createElement("p");
    const words = r.point_words ? ` (${r.point_words})` : "";
    const progress = r.status === "running" ? ` — point ${r.point || "-"}/${r.points}${words}: ${r.step}, ${clock(r.elapsed_seconds)} elapsed, ETA ${clock(r.eta_seconds)}` : "";
    // A finished run's verdict as the controller decided it (the report and `laglab run` say the same).
    const verdict = r.status === "completed" && r.outcome ? `: ${r.outcome.said || r.outcome.verdict}` : "";
    p.append(`${r.id}: ${r.status}${verdict}${progress} `);
    for (const [f, href] of Object.entries(r.links || {})) {
      const a = document.createElement("a"); a.href = href; a.textContent = f; p.append(a, " ");
    }
    box.appendChild(p);
  }
}

// Presets (GET /api/presets): choosing one fills the form for this end of a link, half the round trip
// as delay and the preset's sending rate (`up`: what the first service of a link sends).
async function loadPresets() {
  const data = await api("GET", "/api/presets");
  const sel = document.getElementById("f-preset");
  for (const [name, p] of Object.entries(data.presets).sort()) {
    const o = document.createElement("option"); o.value = name;
    o.textContent = `${name} (${p.rtt} RTT${p.up ? `, ${p.up} up / ${p.down} down` : ""})`;
    o.dataset.rtt = p.rtt; o.dataset.rate = p.up || ""; sel.appendChild(o);
  }
  sel.title = data.sources.map(t => `${t.table}: ${t.source} (${t.date})`).join("\n");
}
document.getElementById("f-preset").addEventListener("change", ev => {
  const o = ev.target.selectedOptions[0], form = document.getElementById("shaping-form");
  if (!o || !o.value) return;
  const rtt = parseFloat(o.dataset.rtt), unit = o.dataset.rtt.replace(/[\d.]/g, "");
  form.elements.delay.value = `${rtt / 2}${unit}`;
  form.elements.rate.value = o.dataset.rate;
});

async function loadScenarioList() {
  const data = await api("GET", "/api/scenarios");
  const sel = document.getElementById("run-file");
  sel.innerHTML = "";
  for (const sc of data.scenarios.filter(x => !x.error)) {
    const o = document.createElement("option"); o.value = sc.file;
    o.textContent = sc.file + (sc.timeline_steps ? ` (timeline: ${sc.timeline_steps} step${sc.timeline_steps > 1 ? "s" : ""})` : "");
    o.title = sc.description || ""; sel.appendChild(o);
  }
}
document.getElementById("run-form").addEventListener("submit", async ev => {
  ev.preventDefault();
  const f = new FormData(ev.target), out = document.getElementById("run-result");
  try { const r = await api("POST", "/api/runs", { file: f.get("file"), quick: f.get("quick") === "on" }); out.textContent = `started ${r.id}`; out.className = "ok"; }
  catch (e) { out.textContent = e.message; out.className = "error"; }
  refresh();
});

document.getElementById("lag-chart").addEventListener("mousemove", ev => {
  const c = ev.currentTarget, px = ev.offsetX * c.width / (c.clientWidth || c.width);
  c.title = markerDetails(state.groups || [], px);
});

async function pollHealth() {
  const h = await api("GET", "/api/health");
  const rec = h.recorder;
  if (rec && rec.max_window_seconds) WINDOW = Math.min(600, rec.max_window_seconds);
  document.getElementById("lag-title").firstChild.textContent = `Replication lag, last ${WINDOW >= 120 ? WINDOW / 60 + " minutes" : WINDOW + " s"} `;
  document.getElementById("status").textContent =
    `recorder ${rec && rec.running ? "running" : "stopped"} (${rec ? rec.interval_ms : "-"} ms), shaping backend ${h.shaping ? h.shaping.backend : "-"}, run folder ${h.run || "-"}`;
}

async function refresh() {
  for (const f of [pollContainers, pollFaults, pollLoad, pollRuns, pollHealth]) f().catch(e => console.warn(f.name, e));
}
async function tick() {
  try { await pollLag(); await pollEvents(); draw(); } catch (e) { document.getElementById("status").textContent = "controller unreachable: " + e.message; }
}
pollHealth().catch(() => {}).finally(() => { tick(); refresh(); loadScenarioList().catch(e => console.warn("scenarios", e)); loadPresets().catch(e => console.warn("presets", e)); });
setInterval(tick, 1000);
setInterval(refresh, 3000);
