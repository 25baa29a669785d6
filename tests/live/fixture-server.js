// tests/live/fixture-server.js — a stand-in for hpt-live in the page tests:
// serves share/live and the HTTP/JSON contract of docs/LIVE.md from data
// made up here (two runs), with the same token rule (403 without it), and
// pushes Server-Sent Events when the test asks. Not a mock of hpt-live's
// logic: it only speaks the contract, so the page can be tested alone.
// Use: const fx = await require('./fixture-server.js').start(); fx.url ...
// or `node fixture-server.js` to look at the page by hand.
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

const SRC = process.env.HPT_SRC || path.resolve(__dirname, '..', '..');
const BUILD = process.env.HPT_BUILD || SRC;

function assetPath(name) {
  if (name === 'echarts.min.js') {
    for (const p of [path.join(BUILD, 'share/live/echarts.min.js'),
      path.join(SRC, 'node_modules/echarts/dist/echarts.min.js')])
      if (fs.existsSync(p)) return p;
    return null;
  }
  return path.join(SRC, 'share/live', name);
}

const TYPES = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html' };

// One step's columns of run `id` (deterministic, plain numbers).
function row(id, s) {
  return {
    step: s, loss: 10 - Math.log(s) - id * 0.25 + 0.01 * (s % 3), lr: 1e-4 * Math.min(1, s / 10),
    grad_norm: 1 + 0.1 * (s % 5) + id, clip: 1, tokens_per_s: 1000 + 10 * s + 100 * id,
    mfu: 0.1 + 0.001 * s, skipped: 0
  };
}

function makeRun(id, name, layout, steps) {
  const cols = { step: [], loss: [], lr: [], grad_norm: [], clip: [], tokens_per_s: [], mfu: [], skipped: [],
    val_step: [], val_loss: [] };
  const r = { id, name, path: '/fixture/' + name + '/metrics.h5', layout, attrs: {}, state: 'live', error: null,
    cols, ranks: { step: [], busy_s: [], step_s: [], flops: [] }, events: [], segments: [], alerts: [] };
  r.events.push({ step: 0, time: 1000, kind: 'run_start', rank: 0, detail: 'fixture start' });
  r.segments.push({ step: 1, time: 1000 });
  addRows(r, 1, steps);
  return r;
}

// Rows from..from+n-1: rows held from `from` on are replaced (a resume).
function addRows(r, from, n) {
  const c = r.cols, out = {};
  let cut = c.step.findIndex((s) => s >= from);
  if (cut < 0) cut = c.step.length;
  for (const k of Object.keys(c)) if (k !== 'val_step' && k !== 'val_loss') c[k].length = cut;
  let vcut = c.val_step.findIndex((s) => s >= from);
  if (vcut >= 0) { c.val_step.length = vcut; c.val_loss.length = vcut; }
  let rcut = r.ranks.step.findIndex((s) => s >= from);
  if (rcut >= 0) for (const k of Object.keys(r.ranks)) r.ranks[k].length = rcut;
  for (const k of Object.keys(c)) out[k] = [];
  const pushed = { step: [], busy_s: [], step_s: [], flops: [] };
  for (let s = from; s < from + n; s++) {
    const v = row(r.id, s);
    for (const k of Object.keys(v)) { c[k].push(v[k]); out[k].push(v[k]); }
    if (s % 5 === 0) {
      c.val_step.push(s); c.val_loss.push(v.loss + 0.1);
      out.val_step.push(s); out.val_loss.push(v.loss + 0.1);
    }
    const W = r.layout.world;
    const busy = [], st = [], fl = [];
    for (let w = 0; w < W; w++) { busy.push(0.01 * (w + 1)); st.push(0.02 + 0.001 * s); fl.push(1e9 * (w + 1)); }
    for (const [k, v2] of [['step', s], ['busy_s', busy], ['step_s', st], ['flops', fl]]) {
      r.ranks[k].push(v2);
      pushed[k].push(v2);
    }
  }
  return { columns: out, ranks: pushed };
}

function history(r, points) {
  return {
    run: r.id, state: r.state, columns: r.cols, ranks: r.ranks,
    comm: { groups: ['tp', 'pp', 'dp'], seconds: [0, 1, 2].map((g) => Array.from({ length: r.layout.world }, (_, w) => 0.1 * (g + 1) + 0.01 * w)) },
    events: r.events, segments: r.segments, alerts: r.alerts
  };
}

function start(opts) {
  opts = opts || {};
  const token = opts.token || crypto.randomBytes(16).toString('hex');
  const names = opts.names || ['alpha', 'beta']; /* run names (the page-xss test: markup) */
  const runs = [makeRun(0, names[0], { tp: 1, pp: 1, dp: 2, world: 2 }, 20),
    makeRun(1, names[1], { tp: 2, pp: 1, dp: 1, world: 2 }, 10)];
  const clients = new Set();
  const requests = [];
  const send = (event, data) => {
    const msg = 'event: ' + event + '\ndata: ' + JSON.stringify(data) + '\n\n';
    for (const res of clients) res.write(msg);
  };
  const server = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://127.0.0.1');
    const ok = u.searchParams.get('token') === token;
    requests.push({ path: u.pathname, token: ok });
    if (!ok) { res.writeHead(403, { 'Content-Type': 'text/plain' }); res.end('403: token required\n'); return; }
    const json = (o) => { res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }); res.end(JSON.stringify(o)); };
    if (u.pathname === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(fs.readFileSync(path.join(SRC, 'share/live/index.html')));
    } else if (u.pathname.startsWith('/assets/')) {
      const name = u.pathname.slice(8);
      const p = ['app.js', 'style.css', 'echarts.min.js'].includes(name) ? assetPath(name) : null;
      if (!p) { res.writeHead(404); res.end(); return; }
      res.writeHead(200, { 'Content-Type': TYPES[path.extname(p)] });
      res.end(fs.readFileSync(p));
    } else if (u.pathname === '/api/runs') {
      json({ runs: runs.map((r) => ({ id: r.id, name: r.name, path: r.path, layout: r.layout, attrs: r.attrs, state: r.state, error: r.error })) });
    } else if (u.pathname === '/api/history') {
      const r = runs[Number(u.searchParams.get('run'))];
      if (!r) { res.writeHead(404); res.end(); return; }
      json(history(r, Number(u.searchParams.get('points'))));
    } else if (u.pathname === '/api/stream') {
      res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
      res.write(': hello\n\n');
      clients.add(res);
      req.on('close', () => clients.delete(res));
    } else {
      res.writeHead(404); res.end();
    }
  });
  return new Promise((resolve) => server.listen(opts.port || 0, '127.0.0.1', () => {
    const port = server.address().port;
    resolve({
      token, port, runs, requests,
      url: 'http://127.0.0.1:' + port + '/?token=' + token,
      clients: () => clients.size,
      pushRows(id, from, n) {
        const d = addRows(runs[id], from, n);
        send('rows', { run: id, columns: d.columns, ranks: d.ranks });
      },
      setState(id, state, error) {
        runs[id].state = state; runs[id].error = error || null;
        send('state', { run: id, state, error: error || null });
      },
      pushSegment(id, seg) { runs[id].segments.push(seg); send('segment', Object.assign({ run: id }, seg)); },
      pushEvent(id, ev) { runs[id].events.push(ev); send('event', Object.assign({ run: id }, ev)); },
      pushAlert(id, a) { runs[id].alerts.push(a); send('alert', Object.assign({ run: id }, a)); },
      close() { for (const c of clients) c.destroy(); return new Promise((r) => server.close(r)); }
    });
  }));
}

module.exports = { start };

if (require.main === module)
  start({ port: Number(process.argv[2] || 0) }).then((fx) => console.log('fixture: ' + fx.url));
