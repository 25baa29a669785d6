// tests/live/report.js REPORT.html EXPECTED.json [SCREENSHOT.png] — open the
// self-contained report of `hpt-metrics report` in headless chromium with
// every network request refused and compare what the page holds with what
// h5py read from the metrics file (tests/live/h5points.py). HPT_EXPECT_FLOOD=
// KIND:A-B: the run was given --fault-anomaly KIND:A-B, shown as one entry
// and one span.
'use strict';
const { check, fail, launch, waitFor, sameArray, describe, readJSON } = require('./lib.js');
const path = require('path');

async function main() {
  const [report, expectedPath, shot] = process.argv.slice(2);
  const want = readJSON(expectedPath);
  const pageUrl = 'file://' + path.resolve(report);
  const browser = await launch();
  const context = await browser.newContext({ viewport: { width: 1500, height: 1250 } });
  await context.setOffline(true);
  const attempted = [];
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (u === pageUrl) return route.continue();
    attempted.push(u);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('request', (r) => { if (r.url() !== pageUrl && !r.url().startsWith('data:')) attempted.push(r.url()); });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(pageUrl);
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready, null, 'the page rendered');
  check(await page.evaluate(() => window.hptDebug.offline), 'the page uses the inlined HPT_DATA');
  check(attempted.length === 0, 'no request beyond the file itself (attempted: ' + describe(attempted) + ')');
  check(await page.evaluate(() => window.hptDebug.requests()) === 0, 'the page made no fetch/stream request');
  check(pageErrors.length === 0, 'no page error (' + describe(pageErrors) + ')');

  const n = want.step.length;
  for (const col of ['step', 'loss', 'lr', 'grad_norm', 'clip', 'tokens_per_s', 'mfu', 'val_step', 'val_loss']) {
    const got = await page.evaluate(([c]) => window.hptDebug.points(0, c), [col]);
    if (!sameArray(got, want[col]))
      fail(col + ': the page holds ' + describe(got) + ', h5py reads ' + describe(want[col]));
    console.log('ok: ' + col + ' equals h5py (' + got.length + ' values)');
  }
  for (const panel of ['loss', 'lr', 'grad', 'tps', 'mfu'])
    check(await page.evaluate(([p]) => window.hptDebug.chartPoints(p, 0), [panel]) === n,
      panel + ' chart shows ' + n + ' points (the file\'s steps)');
  for (const m of ['busy_s', 'step_s']) {
    const r = await page.evaluate(([x]) => window.hptDebug.ranks(0, x), [m]);
    check(r && sameArray(r.step, want.step) && sameArray(r.values, want[m]),
      'rank x step ' + m + ' equals h5py (' + want.ranks + ' ranks)');
  }
  const comm = await page.evaluate(() => window.hptDebug.comm(0));
  // 6 significant digits on both sides (the API rounds; h5points.py rounds its own mean)
  const close = (a, b) => a === b || (a !== null && b !== null && Math.abs(a - b) <= 1e-5 * Math.abs(b));
  check(comm && comm.groups.every((g, i) => comm.seconds[i].length === want.ranks &&
    comm.seconds[i].every((v, w) => close(v, want.comm[g][w]))),
    'communication per group per rank equals h5py\'s mean s/step ' + describe(comm && comm.groups));
  const bars = await page.evaluate(() => echarts.getInstanceByDom(document.getElementById('chart-comm')).getOption().series.length);
  check(bars === comm.groups.length, 'one bar series per communication group');
  const cells = want.busy_s.reduce((a, row) => a + row.filter((v) => v !== null).length, 0);
  check(await page.evaluate(() => window.hptDebug.heatCells()) === cells, 'heat map draws ' + cells + ' cells');
  check(!(await page.evaluate(() => window.hptDebug.timeline().visible)), 'no step timeline panel for a run without /trace');
  const ev = await page.$$eval('#events li[data-run="0"]', (l) => l.map((x) => ({ step: Number(x.dataset.step),
    kind: x.dataset.rawKind, last: Number(x.dataset.lastStep), count: Number(x.dataset.count) })));
  // floods collapsed: the file's anomalies of one kind (slow_rank: and rank)
  // 1..10 steps apart are one entry (docs/LIVE.md), computed here from h5py's list
  const want_groups = [], open = {};
  for (const e of want.events) {
    const flood = ['skipped_step', 'grad_norm_spike', 'throughput_drop', 'slow_rank'].includes(e.kind);
    const gk = e.kind + (e.kind === 'slow_rank' ? '#' + e.rank : '');
    const g = flood ? open[gk] : null;
    if (g && e.step > g.last && e.step - g.last <= 10) { g.last = e.step; g.count++; continue; }
    want_groups.push(open[gk] = { kind: e.kind, step: e.step, last: e.step, count: 1 });
  }
  const key = (g) => [g.kind, g.step, g.last, g.count].join(' ');
  check(sameArray(ev.map(key).sort(), want_groups.map(key).sort()),
    '#events lists the ' + want.events.length + ' events of the file as ' + want_groups.length + ' entries ' +
    describe(ev.map(key)));
  check(ev.reduce((n, x) => n + x.count, 0) === want.events.length, 'the entries count every event of the file');
  const last = want.events[want.events.length - 1];
  check(ev[0].kind === last.kind && ev[0].step === last.step, 'newest event first (' + describe(ev[0]) + ')');
  const skipped = want.events.filter((e) => e.kind === 'skipped_step').length;
  check(ev.filter((e) => e.kind === 'skipped_step').reduce((n, x) => n + x.count, 0) === skipped,
    skipped + ' skipped_step event(s) listed with data-kind nonfinite');
  const marks = await page.evaluate(() => window.hptDebug.eventMarks(0));
  const spans = want_groups.filter((g) => g.count > 1).map((g) => [g.step - 0.5, g.last + 0.5]);
  check(marks && sameArray(marks.spans.slice().sort((a, b) => a[0] - b[0]), spans.sort((a, b) => a[0] - b[0])),
    'the loss chart shades each group of several as one span ' + describe(marks && marks.spans));
  if (process.env.HPT_EXPECT_FLOOD) { // KIND:A-B forced by hpt-train --fault-anomaly
    const [k, a, b] = process.env.HPT_EXPECT_FLOOD.split(/[:-]/);
    check(ev.filter((x) => x.kind === k && x.step <= Number(a) && x.last >= Number(b)).length === 1 &&
      marks.spans.filter((sp) => sp[0] <= Number(a) - 0.5 && sp[1] >= Number(b) + 0.5).length === 1,
      'the forced ' + k + ' at steps ' + a + '–' + b + ' is one entry and one span');
  }
  const segs = await page.evaluate(() => window.hptDebug.segments(0).map((s) => s.step));
  check(sameArray(segs, want.segments), 'segments ' + describe(segs));
  const state = await page.textContent('#state-0');
  check(/finished|writer stopped/.test(state), '#state-0: ' + state);
  if (process.env.HPT_EXPECT_STATE)
    check(await page.evaluate(() => window.hptDebug.state(0)) === process.env.HPT_EXPECT_STATE,
      'state is ' + process.env.HPT_EXPECT_STATE);
  const legend = await page.evaluate(() => window.hptDebug.runs().map((r) => r.name));
  check(legend.length === Number(process.env.HPT_EXPECT_RUNS || 1), 'runs: ' + describe(legend));
  // the goodput panel: the server's split, shown as a bar of its parts
  const gp = await page.evaluate(() => window.hptDebug.goodput(0));
  const g = gp.held;
  check(g && g.wall > 0 && g.fraction > 0 && g.fraction <= 1, 'goodput held: ' + describe(g));
  const parts = ['productive', 'redone', 'checkpoint', 'startup', 'validation', 'between', 'other'];
  const sum = parts.reduce((a, k) => a + (g[k] || 0), 0);
  check(Math.abs(sum - g.wall) <= 1e-5, 'goodput parts add up to the wall time (Unix times: ~1e-7 s rounding)');
  check(gp.text && gp.text.includes('goodput ' + (100 * g.fraction).toFixed(1) + ' %') &&
    sameArray(gp.parts, parts), 'goodput panel shows ' + describe(gp.text) + ', parts ' + describe(gp.parts));
  if (process.env.HPT_EXPECT_GOODPUT) { // `hpt-metrics goodput`'s figures, 3 decimals
    const want = JSON.parse(process.env.HPT_EXPECT_GOODPUT);
    for (const k of Object.keys(want))
      check(Math.abs(g[k] - want[k]) <= 0.0015, 'goodput ' + k + ' ' + g[k] + ' = hpt-metrics goodput ' + want[k]);
  }
  if (shot) {
    await page.evaluate(() => window.hptDebug.render());
    await page.waitForTimeout(500);
    await page.screenshot({ path: shot, fullPage: true });
    console.log('screenshot: ' + shot);
  }
  await browser.close();
  console.log('PASS: report');
}

main().catch((e) => fail(e.stack || String(e)));
