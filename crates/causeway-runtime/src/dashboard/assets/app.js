// The cluster page: polls /api/cluster once a second and draws the totals, the DC map
// (SVG), the node table and four line charts (canvas). Read-only: it only GETs.
'use strict';

const PALETTE = ['#4263eb', '#f76707', '#2f9e44', '#d6336c', '#1098ad', '#ae3ec9',
  '#f59f00', '#5c940d', '#862e9c', '#495057'];
const POLL_MS = 1000;
const WINDOW_MAX_MS = 5 * 60 * 1000;
const WINDOW_MIN_MS = 60 * 1000;
const SVG_NS = 'http://www.w3.org/2000/svg';
const RUNTIME_GAUGES = ['sessions', 'client_connections', 'link_queue_depth'];
let latest = null;

const $ = (id) => document.getElementById(id);
const color = (i) => PALETTE[i % PALETTE.length];

function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return '–';
  const d = digits === undefined ? (Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2) : digits;
  return x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
}

function fmtCount(x) {
  if (x >= 1e6) return fmt(x / 1e6, 1) + 'M';
  if (x >= 1e4) return fmt(x / 1e3, 1) + 'k';
  return fmt(x, 0);
}

function lastPoint(dc) {
  return dc.series.length ? dc.series[dc.series.length - 1] : null;
}

function dcRate(dc, field) {
  const p = lastPoint(dc);
  return p && p[field] !== null ? p[field] : null;
}

function total(view, field) {
  let sum = null;
  for (const dc of view.dcs) {
    const r = dcRate(dc, field);
    if (r !== null) sum = (sum || 0) + r;
  }
  return sum;
}

function setKpi(id, value) {
  const el = $(id);
  el.textContent = fmt(value, value !== null && value < 10 ? 1 : 0);
  el.dataset.value = value === null ? '' : String(value);
}

// How the partitions are placed: in every DC, or in R of the N DCs each.
function placement(view) {
  const [p, r, n] = [view.partitions, view.replication_factor, view.dcs.length];
  if (!p || !r) return '–';
  return r >= n ? `${p} in every DC` : `${p}, each in ${r} of ${n} DCs`;
}

function renderHeader(view) {
  $('cluster').textContent = `cluster ${view.cluster}`;
  $('protocol').textContent = view.protocol;
  $('placement').textContent = placement(view);
  setKpi('total-tps', total(view, 'commits_per_s'));
  setKpi('total-aborts', total(view, 'aborts_per_s'));
  const up = view.nodes.filter((n) => n.state === 'up').length;
  $('nodes-up').textContent = `${up}/${view.nodes.length}`;
  const when = new Date(view.now_ms).toLocaleTimeString('en-GB');
  $('updated').textContent = `updated ${when}`;
}

// ---- map ----------------------------------------------------------------------------

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

function dcPositions(n) {
  const [cx, cy, rx, ry] = [230, 136, 165, 92];
  if (n === 1) return [[cx, cy]];
  return Array.from({ length: n }, (_, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / n + (n === 2 ? Math.PI / 2 : 0);
    return [cx + rx * Math.cos(a), cy + ry * Math.sin(a)];
  });
}

function dcHealth(view, dc) {
  const states = view.nodes.filter((n) => n.dc === dc.name).map((n) => n.state);
  const up = states.filter((s) => s === 'up').length;
  const stroke = up === states.length ? 'var(--up)' : up === 0 ? 'var(--down)' : 'var(--wait)';
  return { up, of: states.length, stroke };
}

function drawLinks(map, view, pos) {
  const index = new Map(view.dcs.map((d, i) => [d.name, i]));
  for (const link of view.links) {
    const [a, b] = [pos[index.get(link.a)], pos[index.get(link.b)]];
    map.appendChild(svg('line', { class: 'link', x1: a[0], y1: a[1], x2: b[0], y2: b[1] }));
    const [x, y] = [(a[0] + b[0]) / 2, (a[1] + b[1]) / 2];
    const text = `${fmt(link.rtt_ms, 0)} ms`;
    const w = text.length * 7 + 8;
    map.appendChild(svg('rect', { class: 'rtt-bg', x: x - w / 2, y: y - 9, width: w, height: 18, rx: 4 }));
    map.appendChild(svg('text', { class: 'rtt', x, y: y + 4 }, text));
  }
}

function drawDc(map, view, dc, i, p) {
  const h = dcHealth(view, dc);
  const g = svg('g', { class: 'dc', 'data-dc': dc.name });
  g.appendChild(svg('circle', { cx: p[0], cy: p[1], r: 30, fill: color(i), stroke: h.stroke }));
  g.appendChild(svg('text', { class: 'name', x: p[0], y: p[1] + 5 }, dc.name));
  const tps = dcRate(dc, 'commits_per_s');
  g.appendChild(svg('text', { class: 'tps', x: p[0], y: p[1] + 48 }, `${fmt(tps)} txn/s`));
  g.appendChild(svg('text', { class: 'up', x: p[0], y: p[1] + 62 }, `${h.up}/${h.of} nodes up`));
  map.appendChild(g);
}

function renderMap(view) {
  const map = $('map');
  map.replaceChildren();
  const pos = dcPositions(view.dcs.length);
  drawLinks(map, view, pos);
  view.dcs.forEach((dc, i) => drawDc(map, view, dc, i, pos[i]));
}

// ---- node table -----------------------------------------------------------------------

function cell(row, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

function protocolGauges(gauges) {
  return Object.entries(gauges)
    .filter(([k]) => !RUNTIME_GAUGES.includes(k))
    .map(([k, v]) => `${k} ${fmtCount(v)}`)
    .join(' · ');
}

function nodeRow(view, n) {
  const row = document.createElement('tr');
  row.dataset.node = n.name;
  cell(row, n.name);
  const dcIndex = view.dcs.findIndex((d) => d.name === n.dc);
  const dc = cell(row, n.dc);
  const swatch = document.createElement('span');
  swatch.className = 'swatch';
  swatch.style.background = color(dcIndex);
  dc.prepend(swatch);
  const state = cell(row, n.state, `state-${n.state}`);
  state.prepend(Object.assign(document.createElement('span'), { className: 'dot' }));
  if (n.error) state.title = n.error;
  const age = n.last_scrape_ms === null ? '–' : `${fmt((view.now_ms - n.last_scrape_ms) / 1000, 1)} s ago`;
  cell(row, age);
  cell(row, fmt(n.commits_per_s));
  cell(row, n.latency_mean_ms === null ? '–' : `${fmt(n.latency_mean_ms)} ms`);
  cell(row, fmtCount(n.gauges.sessions ?? 0));
  cell(row, fmtCount(n.gauges.link_queue_depth ?? 0));
  const gauges = protocolGauges(n.gauges);
  cell(row, gauges).title = gauges;
  return row;
}

function renderNodes(view) {
  const body = $('nodes').querySelector('tbody');
  body.replaceChildren(...view.nodes.map((n) => nodeRow(view, n)));
}

function ms(x) {
  return x === null || x === undefined ? '–' : `${fmt(x)} ms`;
}

function dcRow(view, dc, i) {
  const row = document.createElement('tr');
  row.dataset.dc = dc.name;
  const name = cell(row, dc.name);
  name.prepend(Object.assign(document.createElement('span'), { className: 'swatch' }));
  name.firstChild.style.background = color(i);
  const h = dcHealth(view, dc);
  cell(row, `${h.up}/${h.of}`, h.up === h.of ? 'state-up' : 'state-down');
  cell(row, dc.partitions ? String(dc.partitions) : '–');
  const p = lastPoint(dc) || { samples_ms: {} };
  const tps = cell(row, fmt(p.commits_per_s ?? null), 'dc-tps');
  tps.dataset.value = p.commits_per_s ?? '';
  cell(row, fmt(p.aborts_per_s ?? null));
  cell(row, ms(p.latency_mean_ms));
  cell(row, ms(p.latency_p99_ms));
  cell(row, ms(p.samples_ms.gss_lag));
  cell(row, ms(p.samples_ms.remote_visibility));
  return row;
}

function renderDcs(view) {
  const body = $('dcs').querySelector('tbody');
  body.replaceChildren(...view.dcs.map((dc, i) => dcRow(view, dc, i)));
}

// ---- charts ---------------------------------------------------------------------------

// The top of the y axis: above the 98th percentile of the values (a start-up spike is
// clipped at the top rather than flattening everything else).
function yTop(values) {
  if (!values.length) return 1;
  const sorted = [...values].sort((a, b) => a - b);
  const high = sorted[Math.floor(0.98 * (sorted.length - 1))];
  return niceMax(high * 1.1);
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 4, 8, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function setupCanvas(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 600;
  const h = canvas.clientHeight || 170;
  canvas.width = Math.round(w * ratio);
  canvas.height = Math.round(h * ratio);
  const ctx = canvas.getContext('2d');
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return { ctx, w, h };
}

// The time shown: the data's span rounded up to a minute, from one to five minutes.
function windowOf(view) {
  const first = Math.min(...view.dcs.map((d) => (d.series.length ? d.series[0].t_ms : view.now_ms)));
  const minutes = Math.ceil((view.now_ms - first) / 60000);
  return Math.min(WINDOW_MAX_MS, Math.max(WINDOW_MIN_MS, minutes * 60000));
}

// Digits of the y labels: the four steps of a nice top are whole from a top of 4 up.
function axisDigits(yMax) {
  const step = yMax / 4;
  return step >= 1 ? 0 : step >= 0.1 ? 1 : 2;
}

function drawAxes(c, box, yMax, span) {
  const { ctx } = c;
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#6b7785';
  ctx.strokeStyle = '#e6eaef';
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = box.y + box.h - (box.h * i) / 4;
    ctx.beginPath(); ctx.moveTo(box.x, y); ctx.lineTo(box.x + box.w, y); ctx.stroke();
    ctx.textAlign = 'right';
    ctx.fillText(fmt((yMax * i) / 4, axisDigits(yMax)), box.x - 6, y + 4);
  }
  ctx.textAlign = 'center';
  const step = span <= WINDOW_MIN_MS ? 10000 : 60000;
  for (let t = 0; t <= span; t += step) {
    const x = box.x + box.w - (box.w * t) / span;
    const label = t === 0 ? 'now' : step < 60000 ? `-${t / 1000} s` : `-${t / 60000} min`;
    ctx.fillText(label, x, box.y + box.h + 14);
  }
}

function drawLine(c, box, yMax, time, line) {
  const { ctx } = c;
  ctx.strokeStyle = line.color;
  ctx.lineWidth = line.dash ? 1.2 : 2;
  ctx.setLineDash(line.dash ? [4, 3] : []);
  ctx.beginPath();
  let pen = false;
  for (const [t, v] of line.points) {
    const age = time.now - t;
    if (v === null || v === undefined || age > time.span) { pen = false; continue; }
    const x = box.x + box.w - (box.w * age) / time.span;
    const y = box.y + box.h - (box.h * Math.min(v, yMax)) / yMax;
    if (pen) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    pen = true;
  }
  ctx.stroke();
  ctx.setLineDash([]);
}

function drawLegend(c, box, lines) {
  const { ctx } = c;
  let x = box.x + 4;
  ctx.textAlign = 'left';
  ctx.font = '11px system-ui, sans-serif';
  for (const line of lines.filter((l) => !l.dash)) {
    ctx.fillStyle = line.color;
    ctx.fillRect(x, box.y - 12, 10, 3);
    ctx.fillStyle = '#44505e';
    ctx.fillText(line.label, x + 14, box.y - 8);
    x += ctx.measureText(line.label).width + 30;
  }
}

function drawEmpty(c, box, text) {
  c.ctx.fillStyle = '#6b7785';
  c.ctx.textAlign = 'center';
  c.ctx.font = '13px system-ui, sans-serif';
  c.ctx.fillText(text, box.x + box.w / 2, box.y + box.h / 2);
}

function lineChart(canvas, lines, time, emptyText) {
  const c = setupCanvas(canvas);
  const box = { x: 52, y: 18, w: c.w - 64, h: c.h - 40 };
  const values = lines.flatMap((l) => l.points.map((p) => p[1])).filter((v) => v !== null);
  const yMax = yTop(values);
  drawAxes(c, box, yMax, time.span);
  if (!values.length) return drawEmpty(c, box, emptyText);
  for (const line of lines) drawLine(c, box, yMax, time, line);
  drawLegend(c, box, lines);
}

function seriesOf(view, pick, dash) {
  return view.dcs.map((dc, i) => ({
    label: dc.name,
    color: color(i),
    dash,
    points: dc.series.map((p) => [p.t_ms, pick(p)]),
  }));
}

function sample(name) {
  return (p) => (p.samples_ms[name] === undefined ? null : p.samples_ms[name]);
}

function renderCharts(view) {
  const now = { now: view.now_ms, span: windowOf(view) };
  const missing = (what) => `protocol ${view.protocol} reports no ${what} sample (yet)`;
  lineChart($('c-tps'), seriesOf(view, (p) => p.commits_per_s), now, 'no node answered yet');
  const latency = seriesOf(view, (p) => p.latency_mean_ms)
    .concat(seriesOf(view, (p) => p.latency_p99_ms, true));
  lineChart($('c-lat'), latency, now, 'no transaction committed in this window');
  lineChart($('c-gss'), seriesOf(view, sample('gss_lag')), now, missing('gss_lag'));
  lineChart($('c-vis'), seriesOf(view, sample('remote_visibility')), now, missing('remote_visibility'));
}

// ---- polling --------------------------------------------------------------------------

function render(view) {
  renderHeader(view);
  renderMap(view);
  renderNodes(view);
  renderDcs(view);
  renderCharts(view);
}

async function poll() {
  try {
    const answer = await fetch('/api/cluster', { cache: 'no-store' });
    if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
    latest = await answer.json();
    render(latest);
  } catch (e) {
    $('updated').textContent = `cannot reach the cluster page's server: ${e.message}`;
  }
}

window.addEventListener('resize', () => latest && renderCharts(latest));
poll();
setInterval(poll, POLL_MS);
