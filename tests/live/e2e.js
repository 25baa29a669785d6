// tests/live/e2e.js WORK — the live page end to end: the real hpt-live
// following a real 2-rank hpt-train run, in headless chromium.
// - before the run: the state says it waits for the file;
// - during the run (--metrics-interval 1, rank 0 slowed to ~150 ms a step):
//   new steps appear in the page; their median delay after the step's
//   wall_time in the file is under 2 s;
// - a NaN injected at step 4 (--fault-nan-steps) fires the `nonfinite` alert:
//   the header turns red, the rule is listed;
// - kill -9 of the trainer: the state turns to "writer stopped" and the page
//   holds every flushed step, equal to what h5py reads;
// - a resumed run (same run directory) adds a segment live and finishes;
//   page values equal h5py; a reload shows the full history and the segment;
// - --on-alert ran exactly once.
// Environment: HPT_SRC, HPT_BUILD, HPT_CORPUS (or tests/corpus), MPIEXEC,
// PYTHON, HPT_LIVE_BIN (default $HPT_BUILD/src/hpt-live).
'use strict';
const { check, fail, launch, waitFor, sameArray, describe } = require('./lib.js');
const { spawn, execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const SRC = process.env.HPT_SRC, BUILD = process.env.HPT_BUILD;
const CORPUS = process.env.HPT_CORPUS || path.join(BUILD, 'tests/corpus');
const MPIEXEC = process.env.MPIEXEC || 'mpiexec';
const PYTHON = process.env.PYTHON || '/usr/bin/python3';
const LIVE = process.env.HPT_LIVE_BIN || path.join(BUILD, 'src/hpt-live');
const LATENCY_MS = 2000; /* issue 13: new points within 2 s of a flush */
const COLS = ['step', 'loss', 'lr', 'grad_norm', 'clip', 'tokens_per_s', 'mfu', 'val_step', 'val_loss'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const WORK = process.argv[2];
const RUN = path.join(WORK, 'run');
const H5 = path.join(RUN, 'metrics.h5');
const ALERTS = path.join(WORK, 'alerts.txt');
const children = [];

function h5() {
  return JSON.parse(execFileSync(PYTHON, [path.join(SRC, 'tests/live/h5points.py'), H5], { encoding: 'utf8' }));
}

function train(extra, log) {
  const args = ['-n', '2', path.join(BUILD, 'src/hpt-train'), '--model', 'tiny', '--data', CORPUS,
    '--seq-len', '32', '--batch', '2', '--eval-interval', '5', '--eval-batches', '1', '--metrics-interval', '1',
    '--save-every', '5', '--fault-slow-rank', '0', '--fault-slow-ms', '150', '--quiet', '--run-dir', RUN].concat(extra);
  const out = fs.openSync(path.join(WORK, log), 'w');
  const p = spawn(MPIEXEC, args, { stdio: ['ignore', out, out], env: Object.assign({}, process.env, { OMP_NUM_THREADS: '1' }) });
  children.push(p);
  p.done = new Promise((r) => p.on('exit', (code, sig) => r({ code, sig })));
  return p;
}

// The pids of hpt-train processes below `pid` (mpiexec -> proxy -> ranks).
function trainers(pid) {
  const rows = execFileSync('ps', ['-eo', 'pid=,ppid=,comm='], { encoding: 'utf8' }).trim().split('\n')
    .map((l) => l.trim().split(/\s+/)).map(([p, pp, c]) => ({ p: Number(p), pp: Number(pp), c }));
  const below = new Set([pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const r of rows) if (below.has(r.pp) && !below.has(r.p)) { below.add(r.p); grew = true; }
  }
  return rows.filter((r) => below.has(r.p) && r.c.startsWith('hpt-train')).map((r) => r.p);
}

async function startLive() {
  // the page's files in one directory: source share/live + the built echarts.min.js
  const assets = path.join(WORK, 'assets');
  fs.mkdirSync(assets, { recursive: true });
  for (const f of ['index.html', 'app.js', 'style.css']) fs.copyFileSync(path.join(SRC, 'share/live', f), path.join(assets, f));
  fs.copyFileSync(path.join(BUILD, 'share/live/echarts.min.js'), path.join(assets, 'echarts.min.js'));
  const p = spawn(LIVE, ['--port', '0', '--assets', assets, '--alert', 'nonfinite',
    '--on-alert', 'echo "$HPT_ALERT_RULE $HPT_ALERT_STEP" >> ' + ALERTS, RUN], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(p);
  let out = '';
  p.stderr.on('data', (d) => process.stdout.write('hpt-live: ' + d));
  const url = await new Promise((resolve) => {
    const t = setTimeout(() => resolve(null), 20000);
    p.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/http:\/\/127\.0\.0\.1:\d+\/\?token=[^\s]+/);
      if (m) { clearTimeout(t); resolve(m[0]); }
    });
    p.on('exit', () => resolve(null));
  });
  if (!url) fail('hpt-live printed no http://127.0.0.1:PORT/?token= line: ' + out);
  console.log('hpt-live: ' + url.replace(/token=.*/, 'token=...'));
  return url;
}

async function sameAsFile(page, what) {
  const want = h5();
  for (const c of COLS) {
    const got = await page.evaluate(([col]) => window.hptDebug.points(0, col), [c]);
    if (!sameArray(got, want[c])) fail(what + ': ' + c + ' in the page ' + describe(got) + ', h5py ' + describe(want[c]));
  }
  console.log('ok: ' + what + ': the page holds the ' + want.step.length + ' steps h5py reads, equal values');
  return want;
}

async function main() {
  const url = await startLive();
  const browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready, null, 'the page rendered');
  await waitFor(page, () => /waiting/.test((document.getElementById('state-0') || {}).textContent || ''), null,
    'before the run: state says waiting for the file');

  // the run: record when each step first shows in the page
  const t1 = train(['--steps', '400', '--fault-nan-steps', '4', '--fault-nan-rank', '1'], 'train1.out');
  const seen = {};
  const t0 = Date.now();
  let last = 0;
  while (last < 14) {
    if (Date.now() - t0 > 180000) fail('the page did not reach step 14 within 180 s (has ' + last + ')');
    const steps = await page.evaluate(() => window.hptDebug.points(0, 'step'));
    const now = Date.now();
    for (const s of steps) if (!(s in seen)) seen[s] = now;
    last = steps.length ? steps[steps.length - 1] : 0;
    await sleep(50);
  }
  check(await page.evaluate(() => window.hptDebug.state(0)) === 'live', 'state live while the run writes');

  // the NaN at step 4: alert in the page
  await waitFor(page, () => document.getElementById('header').classList.contains('alerting') &&
    document.querySelector('#alerts li[data-rule="nonfinite"]'), null, 'the nonfinite alert turns the header red');
  check(await page.evaluate(() => !!document.querySelector('#events li[data-kind="nonfinite"]')), 'the skipped step is listed as an event');

  // kill -9 the trainer
  const pids = trainers(t1.pid);
  check(pids.length >= 1, 'found the trainer processes ' + describe(pids));
  for (const p of pids) process.kill(p, 'SIGKILL');
  await t1.done;
  await waitFor(page, () => /writer stopped/.test(document.getElementById('state-0').textContent), null,
    'kill -9: state "writer stopped"', 30000);
  await sleep(500);
  const want1 = await sameAsFile(page, 'after kill -9');

  // latency of the steps pushed while the page was open
  const lat = want1.step.filter((s) => s in seen && seen[s] > t0 + 100).map((s, i) => seen[s] - 1000 * want1.wall_time[want1.step.indexOf(s)]);
  lat.sort((a, b) => a - b);
  check(lat.length >= 5, lat.length + ' steps seen arriving live');
  const median = lat[lat.length >> 1];
  console.log('delays after the step (ms): median ' + median.toFixed(0) + ', max ' + lat[lat.length - 1].toFixed(0));
  check(median < LATENCY_MS, 'new points appear within 2 s of the step (median ' + median.toFixed(0) + ' ms)');

  // resume: a new segment appears live, then the run finishes
  const lastStep = want1.step[want1.step.length - 1];
  const t2 = train(['--steps', String(lastStep + 4)], 'train2.out');
  await waitFor(page, () => window.hptDebug.segments(0).length === 2, null, 'the resumed run adds a segment live', 120000);
  const r2 = await t2.done;
  if (r2.code !== 0) fail('resumed run exited ' + r2.code + ': ' + fs.readFileSync(path.join(WORK, 'train2.out'), 'utf8'));
  await waitFor(page, () => window.hptDebug.state(0) === 'finished', null, 'state finished after the resumed run', 30000);
  await sleep(500);
  const want2 = await sameAsFile(page, 'after the resume');
  check(want2.segments.length === 2, 'the file has 2 segments');

  // reload: full history
  await page.reload();
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready && window.hptDebug.points(0, 'step').length > 0, null, 'reload rendered');
  await sameAsFile(page, 'after a reload');
  const segs = await page.evaluate(() => window.hptDebug.segments(0).map((s) => s.step));
  check(sameArray(segs, want2.segments), 'reload: segments ' + describe(segs));
  check(await page.evaluate(() => !!document.querySelector('#alerts li[data-rule="nonfinite"]')), 'reload: the alert is still shown');

  const lines = fs.existsSync(ALERTS) ? fs.readFileSync(ALERTS, 'utf8').trim().split('\n').filter(Boolean) : [];
  check(lines.length === 1 && /^nonfinite 4$/.test(lines[0]), '--on-alert ran exactly once: ' + describe(lines));
  check(errors.length === 0, 'no page error ' + describe(errors));
  await browser.close();
  console.log('PASS: live end to end');
}

function cleanup() {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) { try { c.kill('SIGKILL'); } catch (e) { /* gone */ } }
}
process.on('exit', cleanup);
main().then(() => { cleanup(); process.exit(0); }, (e) => { cleanup(); fail(e.stack || String(e)); });
