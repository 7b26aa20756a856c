// dashboard.js: the page of `mixprec dashboard` (docs/dashboard.md). Polls /api/runs for the
// table (every 5 s) and /api/metrics for the ticked runs' new metrics.jsonl lines (every
// 1.5 s, from the byte offset it last got: the server reads only what is new), and draws them
// with Chart.js. Run names, paths and values are user input: they are only ever put in as
// text (textContent, DOM nodes), never as HTML.
// Longer than 400 lines: the page's one script (no bundler, no modules: the CSP allows only
// 'self' scripts and the server embeds these files as they are); table, charts and the
// underflow and skipped-step lists share one state object.
"use strict";

const RUNS_EVERY_MS = 5000, METRICS_EVERY_MS = 1500;
const COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777", "#4b5563", "#65a30d"];
const KNOWN_STEP_FIELDS = new Set(["type", "step", "epoch", "loss", "lr", "scale", "skipped", "time",
  "memory_bytes", "peak_memory_bytes", "overflow", "overflow_tensors", "grad_underflow", "ranks"]);
// Why a run has no gradient-underflow counts (docs/amp.md, "Underflow telemetry").
const UNDERFLOW_NOT_COUNTED = "not counted: only runs whose gradients pass through f16 (amp-fp16, o2-fp16, pure-fp16) " +
  "count them; bf16 has f32's exponent range, so nothing underflows in bf16 that f32 would keep";

const state = {
  runs: [], experiments: [], byId: new Map(),
  selected: new Set(), autoSelected: false,
  sort: { key: "path", dir: 1 },
  series: new Map(),  // id -> {offset, file, steps: [], evals: []}
  charts: new Map(),  // chart name -> {chart, figure}
  detailsId: "",      // the run whose config is shown
};

// An element with attributes (set as properties or attributes, never as HTML) and children
// (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k in e && k !== "style") e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e5 ? String(Number(v.toPrecision(4))) : v.toExponential(3));
  return String(v);
}

function colourOf(id) {
  const ids = state.runs.map(r => r.id);
  const i = ids.indexOf(id);
  return COLOURS[(i < 0 ? 0 : i) % COLOURS.length];
}

function isLanguageModel(run) {
  const c = run.config || {};
  return c.model === "gpt-tiny" || c.model === "gpt" || c.dataset === "kjv" || c.dataset === "text";
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// ---- the table ------------------------------------------------------------------------

// What a row shows in each column; hyperparameter columns are the config keys that differ
// between the runs listed (a sweep's searched values), after the usual ones.
function columns() {
  const cols = [
    { key: "name", label: "run", get: r => r.name },
    { key: "path", label: "path", get: r => r.path },
    { key: "state", label: "state", get: r => r.state },
    { key: "precision", label: "precision", get: r => r.config.precision },
    { key: "model", label: "model", get: r => r.config.model },
    { key: "step", label: "step", get: r => r.latest.step && r.latest.step.step, num: true },
    { key: "loss", label: "loss", get: r => r.latest.step && r.latest.step.loss, num: true },
    { key: "accuracy", label: "test acc / bits/byte", num: true,
      get: r => r.latest.eval ? (isLanguageModel(r) ? r.latest.eval.loss / Math.LN2 : r.latest.eval.accuracy) : null },
    { key: "best", label: "best acc", get: r => r.latest.best_accuracy, num: true },
    { key: "lr_now", label: "lr now", get: r => r.latest.step && r.latest.step.lr, num: true },
    { key: "scale", label: "loss scale", get: r => r.latest.step && r.latest.step.scale, num: true },
    { key: "skipped", label: "skipped", get: r => r.latest.skipped_steps, num: true },
  ];
  const shown = new Set(["precision", "model"]);
  const keys = new Set();
  for (const r of state.runs) for (const k of Object.keys(r.config)) keys.add(k);
  for (const k of [...keys].sort()) {
    if (shown.has(k)) continue;
    const values = new Set(state.runs.map(r => JSON.stringify(r.config[k])));
    if (values.size > 1) cols.push({ key: "cfg:" + k, label: k, get: r => r.config[k], num: true });
  }
  return cols;
}

function compare(a, b) {
  const na = typeof a === "number", nb = typeof b === "number";
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;  // blanks last either way
  if (b === null || b === undefined) return -1;
  if (na && nb) return a - b;
  return String(a).localeCompare(String(b));
}

function renderTable() {
  const cols = columns();
  const head = document.getElementById("runs-head");
  head.replaceChildren(el("th", {}, ""));
  for (const c of cols) {
    const cls = state.sort.key === c.key ? (state.sort.dir > 0 ? "sorted-asc" : "sorted-desc") : "";
    head.append(el("th", { class: cls, "data-key": c.key, onclick: () => {
      state.sort = { key: c.key, dir: state.sort.key === c.key ? -state.sort.dir : 1 };
      writeHash();
      renderTable();
    } }, c.label));
  }
  const col = cols.find(c => c.key === state.sort.key) || cols[1];
  const sorted = [...state.runs].sort((a, b) => {
    const blank = x => x === null || x === undefined;
    const va = col.get(a), vb = col.get(b);
    if (blank(va) || blank(vb)) return compare(va, vb);
    return state.sort.dir * compare(va, vb);
  });
  const body = document.getElementById("runs-body");
  body.replaceChildren();
  const groups = [["", null], ...state.experiments.map(e => [e.id, e])];
  for (const [gid, exp] of groups) {
    const members = sorted.filter(r => r.experiment === gid);
    if (members.length === 0) continue;
    if (exp) body.append(el("tr", { class: "group" }, el("td", { colSpan: cols.length + 1 }, "experiment " + exp.path + " (" + members.length + " trials)")));
    for (const r of members) body.append(runRow(r, cols));
  }
}

function runRow(r, cols) {
  const box = el("input", { type: "checkbox", checked: state.selected.has(r.id), "data-id": r.id, onchange: e => {
    if (e.target.checked) state.selected.add(r.id); else state.selected.delete(r.id);
    pollMetrics();
  } });
  const tr = el("tr", { "data-id": r.id }, el("td", {}, el("span", { class: "swatch", "data-colour": colourOf(r.id) }), box));
  tr.firstChild.firstChild.style.background = colourOf(r.id);
  for (const c of cols) {
    const v = c.get(r);
    if (c.key === "name") tr.append(el("td", {}, el("span", { class: "name", onclick: () => showDetails(r.id) }, v)));
    else if (c.key === "state") tr.append(el("td", { class: "state-" + v }, v));
    else tr.append(el("td", { class: typeof v === "number" ? "num" : "" }, fmt(v)));
  }
  return tr;
}

function renderExperiments() {
  const box = document.getElementById("experiments");
  document.getElementById("experiments-section").hidden = state.experiments.length === 0;
  box.replaceChildren();
  for (const e of state.experiments) {
    const trials = state.runs.filter(r => r.experiment === e.id);
    const running = trials.filter(r => r.state === "running").length;
    const best = trials.filter(r => r.latest.best_accuracy !== null && r.latest.best_accuracy !== undefined)
      .sort((a, b) => b.latest.best_accuracy - a.latest.best_accuracy)[0];
    const div = el("div", { class: "experiment" },
      el("strong", {}, e.path), " — " + trials.length + " trials, " + running + " running",
      best ? " — best test accuracy " + fmt(best.latest.best_accuracy) + " (" + best.name + ")" : "");
    for (const f of e.state_files) {
      div.append(el("div", {}, "state file " + f.file + (f.error ? ": " + f.error : "")));
      if (f.fields && typeof f.fields === "object") div.append(fieldsTable(f.fields));
    }
    box.append(div);
  }
}

function shortText(v) {
  const text = v !== null && typeof v === "object" ? JSON.stringify(v) : fmt(v);
  return text.length > 300 ? text.slice(0, 300) + "…" : text;
}

// A JSON object's top-level fields, whatever the writer's schema: values as text, a list of
// objects (a sweep's trials) as a table of their fields, other nested values as short JSON.
function fieldsTable(obj) {
  const t = el("table", { class: "fields" });
  for (const [k, v] of Object.entries(obj)) {
    const rows = Array.isArray(v) && v.length > 0 && v.every(x => x !== null && typeof x === "object" && !Array.isArray(x));
    t.append(el("tr", {}, el("td", {}, k), el("td", {}, rows ? objectsTable(v) : shortText(v))));
  }
  return t;
}

// Objects as rows; columns are their keys in order of appearance, an object-valued field
// spread one level ("hyperparameters.lr"). The first 200 rows.
function objectsTable(list) {
  const flat = list.slice(0, 200).map(o => {
    const row = {};
    for (const [k, v] of Object.entries(o)) {
      if (v !== null && typeof v === "object" && !Array.isArray(v)) for (const [k2, v2] of Object.entries(v)) row[k + "." + k2] = v2;
      else row[k] = v;
    }
    return row;
  });
  const keys = [...new Set(flat.flatMap(r => Object.keys(r)))];
  const t = el("table", { class: "objects" }, el("tr", {}, ...keys.map(k => el("th", {}, k))));
  for (const r of flat) t.append(el("tr", {}, ...keys.map(k => el("td", {}, k in r ? shortText(r[k]) : ""))));
  if (list.length > 200) t.append(el("tr", {}, el("td", { colSpan: keys.length }, "… " + (list.length - 200) + " more")));
  return t;
}

// The sort and the run shown are kept in the address (#sort=step&dir=-1&run=ID), so a
// reload or a shared link shows the same.
function writeHash() {
  const p = new URLSearchParams({ sort: state.sort.key, dir: String(state.sort.dir) });
  if (state.detailsId) p.set("run", state.detailsId);
  history.replaceState(null, "", "#" + p.toString());
}

async function showDetails(id) {
  state.detailsId = id;
  writeHash();
  const d = await getJSON("/api/run?id=" + encodeURIComponent(id));
  document.getElementById("details-section").hidden = false;
  document.getElementById("details-name").textContent = d.path;
  const copy = el("button", { onclick: () => navigator.clipboard && navigator.clipboard.writeText(d.reproduce) }, "copy");
  document.getElementById("details").replaceChildren(
    el("div", {}, "Reproduce: ", copy), el("pre", { id: "reproduce" }, d.reproduce),
    el("div", {}, "config.json:"), fieldsTable(d.config || {}));
}

async function refreshRuns() {
  try {
    const data = await getJSON("/api/runs");
    state.runs = data.runs;
    state.experiments = data.experiments;
    state.byId = new Map(data.runs.map(r => [r.id, r]));
    if (!state.autoSelected) {  // a few runs: all drawn at once; many: the first
      for (const r of data.runs.slice(0, data.runs.length <= 5 ? 5 : 1)) state.selected.add(r.id);
      state.autoSelected = true;
    }
    for (const id of [...state.selected]) if (!state.byId.has(id)) state.selected.delete(id);
    renderExperiments();
    renderTable();
    const running = data.runs.filter(r => r.state === "running").length;
    document.getElementById("status").textContent = data.runs.length + " runs (" + running + " running)" +
      (data.truncated ? ", list stopped at 5000" : "") + " — updated " + new Date().toLocaleTimeString();
    document.body.dataset.runs = String(data.runs.length);
  } catch (err) {
    document.getElementById("status").textContent = "cannot reach the dashboard: " + err.message;
  }
}

// ---- the charts -----------------------------------------------------------------------

async function pollMetrics() {
  for (const id of state.selected) {
    let s = state.series.get(id);
    if (!s) state.series.set(id, s = { offset: 0, file: "", steps: [], evals: [] });
    for (let more = true, rounds = 0; more && rounds < 16; ++rounds) {
      let m;
      try {
        m = await getJSON("/api/metrics?id=" + encodeURIComponent(id) + "&from=" + s.offset + "&file=" + encodeURIComponent(s.file));
      } catch (err) { break; }
      if (m.reset) { s.steps = []; s.evals = []; }
      for (const rec of m.records) (rec.type === "eval" ? s.evals : rec.type === "step" ? s.steps : []).push(rec);
      s.offset = m.offset; s.file = m.file; more = m.more;
    }
  }
  drawCharts();
}

// Samples per second between a logged step and the one `window` records earlier.
function throughput(run, steps) {
  const batch = (run.config.batch_size || 1) * (run.config.accumulate || 1), out = [];
  for (let i = 1; i < steps.length; ++i) {
    const j = Math.max(0, i - 10), dt = steps[i].time - steps[j].time;
    if (dt > 0) out.push({ x: steps[i].step, y: (steps[i].step - steps[j].step) * batch / dt });
  }
  return out;
}

function cumulativeSkips(steps) {
  let n = 0;
  return steps.map(s => ({ x: s.step, y: (n += s.skipped ? 1 : 0) }));
}

// Each chart: a title, a note for what is not recorded, and per run its points.
const CHARTS = [
  { name: "loss", title: "training loss", points: (r, s) => s.steps.map(p => ({ x: p.step, y: p.loss })) },
  { name: "test_loss", title: "test loss", points: (r, s) => s.evals.map(p => ({ x: p.step, y: p.loss })) },
  { name: "accuracy", title: "test accuracy (classifiers)", points: (r, s) => isLanguageModel(r) ? [] : s.evals.map(p => ({ x: p.step, y: p.accuracy })) },
  { name: "bits_per_byte", title: "test bits/byte (language models)", points: (r, s) => isLanguageModel(r) ? s.evals.map(p => ({ x: p.step, y: p.loss / Math.LN2 })) : [] },
  { name: "lr", title: "learning rate", points: (r, s) => s.steps.map(p => ({ x: p.step, y: p.lr })) },
  { name: "throughput", title: "throughput (samples/s)", points: (r, s) => throughput(r, s.steps) },
  { name: "scale", title: "loss scale", log: true, points: (r, s) => s.steps.map(p => ({ x: p.step, y: p.scale })) },
  { name: "skipped", title: "skipped steps (cumulative)", points: (r, s) => cumulativeSkips(s.steps) },
  { name: "memory", title: "tensor memory held after each step (MiB)",
    note: "the tracking allocator's bytes (runs older than this field draw nothing)",
    points: (r, s) => s.steps.filter(p => typeof p.memory_bytes === "number").map(p => ({ x: p.step, y: p.memory_bytes / 1048576 })) },
  { name: "peak_memory", title: "peak tensor memory so far (MiB)",
    points: (r, s) => s.steps.filter(p => typeof p.peak_memory_bytes === "number").map(p => ({ x: p.step, y: p.peak_memory_bytes / 1048576 })) },
  { name: "underflow", title: "gradient underflow in f16 (scaled gradients, values)",
    note: "per counted step (--underflow-every): elements f16 keeps only as subnormals (2^-25 < |g| < 2^-14) and flushes to 0 (0 < |g| <= 2^-25); f16 runs only",
    sets: (r, s) => {
      const counted = s.steps.filter(p => p.grad_underflow && typeof p.grad_underflow === "object");
      return [["subnormal", "subnormal"], ["flushed", "flushed to 0"]].map(([k, label]) => ({
        label: r.name + " " + label,
        data: counted.filter(p => typeof p.grad_underflow[k] === "number").map(p => ({ x: p.step, y: p.grad_underflow[k] })) }));
    } },
  { name: "other", title: "other logged values", note: "numbers in step lines beyond step, loss, lr, scale, time",
    points: () => [] },
];

function ensureChart(def) {
  if (state.charts.has(def.name)) return state.charts.get(def.name);
  const canvas = el("canvas", {});
  const figure = el("figure", { class: "chart", "data-chart": def.name, "data-points": "0" },
    el("figcaption", {}, def.title), def.note ? el("div", { class: "note" }, def.note) : null, el("div", { class: "chart-box" }, canvas));
  document.getElementById("charts").append(figure);
  const chart = new Chart(canvas, {
    type: "line", data: { datasets: [] },
    options: {
      animation: false, parsing: false, normalized: true, maintainAspectRatio: false, spanGaps: true,
      scales: { x: { type: "linear", title: { display: true, text: "step" } }, y: { type: def.log ? "logarithmic" : "linear" } },
      plugins: { legend: { labels: { boxWidth: 10 } }, decimation: { enabled: true, algorithm: "lttb", samples: 600 } },
      elements: { line: { borderWidth: 1.5 } },
    },
  });
  const entry = { chart, figure };
  state.charts.set(def.name, entry);
  return entry;
}

// Extra numeric step fields (newer writers' fields this page does not know yet), one line each.
function otherDatasets(run, s) {
  const keys = new Set();
  for (const p of s.steps) for (const [k, v] of Object.entries(p)) if (!KNOWN_STEP_FIELDS.has(k) && typeof v === "number") keys.add(k);
  return [...keys].map(k => ({ label: run.name + " " + k, data: s.steps.filter(p => typeof p[k] === "number").map(p => ({ x: p.step, y: p[k] })) }));
}

function drawCharts() {
  if (typeof Chart === "undefined") return;
  for (const def of CHARTS) {
    const { chart, figure } = ensureChart(def);
    const datasets = [];
    for (const id of state.selected) {
      const run = state.byId.get(id), s = state.series.get(id);
      if (!run || !s) continue;
      const colour = colourOf(id);
      const sets = def.name === "other" ? otherDatasets(run, s) : def.sets ? def.sets(run, s) : [{ label: run.name, data: def.points(run, s) }];
      for (const d of sets) datasets.push({ ...d, borderColor: colour, backgroundColor: colour, pointRadius: d.data.length > 60 ? 0 : 2 });
    }
    // Counted before the update: Chart.js's decimation then swaps each dataset's data for at
    // most 600 drawn samples, and data-points is what the page holds, not what it draws.
    figure.dataset.points = String(datasets.reduce((n, d) => n + d.data.length, 0));
    chart.data.datasets = datasets;
    chart.update("none");
  }
  drawUnderflowList();
  drawSkippedList();
}

// Each ticked run's latest gradient-underflow count with its worst tensors, or why it has
// none. Tensor names come from model files: set as text by el(), never as HTML.
function drawUnderflowList() {
  const box = document.getElementById("underflow");
  box.replaceChildren();
  for (const id of state.selected) {
    const run = state.byId.get(id), s = state.series.get(id);
    if (!run || !s) continue;
    const counted = s.steps.filter(p => p.grad_underflow && typeof p.grad_underflow === "object");
    if (counted.length === 0) {
      box.append(el("div", { class: "underflow-run" }, run.name + ": gradient underflow " + UNDERFLOW_NOT_COUNTED));
      continue;
    }
    const last = counted[counted.length - 1], u = last.grad_underflow;
    const worst = Array.isArray(u.worst) ? u.worst : [];
    const div = el("div", { class: "underflow-run" }, run.name + ": step " + fmt(last.step) + ", of " + fmt(u.values) +
      " gradient values (scaled by " + fmt(last.scale) + ") " + fmt(u.subnormal) + " are f16 subnormals and " + fmt(u.flushed) +
      " flush to 0, in " + fmt(u.tensors) + " tensors" + (worst.length ? "; the worst:" : ""));
    if (worst.length) {
      const list = el("ul", {});
      for (const w of worst)
        list.append(el("li", { class: "underflow-tensor" }, String(w.tensor) + ": " + fmt(w.subnormal) + " subnormal, " +
          fmt(w.flushed) + " flushed, of " + fmt(w.values)));
      if (u.tensors > worst.length) list.append(el("li", {}, "and " + (u.tensors - worst.length) + " more tensors"));
      div.append(list);
    }
    box.append(div);
  }
}

// The skipped steps of the ticked runs, with whatever a step line says beyond the usual
// fields. Names are set as text by el(), never as HTML (tensor names come from model files).
function drawSkippedList() {
  const box = document.getElementById("skipped");
  box.replaceChildren();
  for (const id of state.selected) {
    const run = state.byId.get(id), s = state.series.get(id);
    if (!run || !s) continue;
    const skipped = s.steps.filter(p => p.skipped);
    if (skipped.length === 0) continue;
    const list = el("ul", {});
    for (const p of skipped.slice(-50)) {
      const extra = Object.entries(p).filter(([k]) => !KNOWN_STEP_FIELDS.has(k)).map(([k, v]) => k + " " + fmt(typeof v === "object" ? JSON.stringify(v) : v));
      // The GradScaler's attribution: which tensors held inf/NaN, with how many values.
      const where = Array.isArray(p.overflow) && p.overflow.length
        ? " in " + p.overflow.map(o => String(o.tensor) + " (" + fmt(o.values) + ")").join(", ") +
          (p.overflow_tensors > p.overflow.length ? " and " + (p.overflow_tensors - p.overflow.length) + " more" : "")
        : "";
      list.append(el("li", {}, "step " + p.step + ": inf/NaN gradients" + where + ", loss scale " + fmt(p.scale) + (extra.length ? " — " + extra.join(", ") : "")));
    }
    box.append(el("div", {}, run.name + ": " + skipped.length + " skipped steps" + (skipped.length > 50 ? " (the last 50)" : "")), list);
  }
}

async function start() {
  const hash = new URLSearchParams(location.hash.slice(1));  // #sort=step&dir=-1
  if (hash.get("sort")) state.sort = { key: hash.get("sort"), dir: hash.get("dir") === "-1" ? -1 : 1 };
  if (hash.get("run")) showDetails(hash.get("run")).catch(err => {
    document.getElementById("details-section").hidden = false;
    document.getElementById("details").textContent = "run " + hash.get("run") + ": " + err.message;
  });
  await refreshRuns();
  await pollMetrics();
  setInterval(refreshRuns, RUNS_EVERY_MS);
  let busy = false;
  setInterval(async () => {
    if (busy) return;
    busy = true;
    try { await pollMetrics(); } finally { busy = false; }
  }, METRICS_EVERY_MS);
}

start();
