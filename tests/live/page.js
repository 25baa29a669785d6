// tests/live/page.js — the live page against tests/live/fixture-server.js
// (the HTTP/JSON contract of docs/LIVE.md) in headless chromium: history
// of two runs, rows pushed over SSE appear, a reload shows the full
// history, a resume replaces the redone steps and adds a segment, states
// (writer stopped, error with its message), an alert turns the header red
// and lists the rule, events newest first, a flood of one anomaly kind is
// one entry and one shaded span, every request carries the token.
'use strict';
const { check, fail, launch, waitFor, sameArray, describe } = require('./lib.js');
const fixture = require('./fixture-server.js');

const COLS = ['step', 'loss', 'lr', 'grad_norm', 'clip', 'tokens_per_s', 'mfu', 'val_step', 'val_loss'];

async function sameAsServer(page, fx, id, what) {
  for (const c of COLS) {
    const got = await page.evaluate(([r, col]) => window.hptDebug.points(r, col), [id, c]);
    if (!sameArray(got, fx.runs[id].cols[c]))
      fail(what + ': run ' + id + ' ' + c + ' is ' + describe(got) + ', served ' + describe(fx.runs[id].cols[c]));
  }
  console.log('ok: ' + what + ': run ' + id + ' holds the served values (' + fx.runs[id].cols.step.length + ' steps)');
}

async function load(page, fx) {
  await page.goto(fx.url);
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready, null, 'the page rendered');
  await waitFor(page, () => window.hptDebug.conn() === 'connected', null, 'the page opened the event stream');
}

async function main() {
  const fx = await fixture.start();
  const res = await fetch('http://127.0.0.1:' + fx.port + '/');
  check(res.status === 403, 'the stand-in refuses a request without the token (as hpt-live)');
  fx.requests.length = 0;
  const browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await load(page, fx);
  await sameAsServer(page, fx, 0, 'first load');
  await sameAsServer(page, fx, 1, 'first load');
  const legend = await page.evaluate(() => window.hptDebug.runs().map((r) => r.name));
  check(sameArray(legend, ['alpha', 'beta']), 'two runs overlaid: ' + describe(legend));
  const names = await page.evaluate(() => echarts.getInstanceByDom(document.getElementById('chart-loss'))
    .getOption().series.map((s) => s.name));
  check(names.includes('alpha (tp1 pp1 dp2, 2 ranks)') && names.includes('beta (tp2 pp1 dp1, 2 ranks)'),
    'loss legend names each run with its layout');
  check(!(await page.getAttribute('#header', 'class') || '').includes('alerting'), 'no alert: header not red');

  // new rows over SSE
  fx.pushRows(0, 21, 5);
  await waitFor(page, () => window.hptDebug.points(0, 'step').length === 25 &&
    window.hptDebug.chartPoints('loss', 0) === 25, null, 'pushed rows appear in the page and the chart');
  await sameAsServer(page, fx, 0, 'after a push');

  // reload: the full history
  await load(page, fx);
  await sameAsServer(page, fx, 0, 'after a reload');
  check(await page.evaluate(() => window.hptDebug.chartPoints('tps', 0)) === 25, 'reload: the chart shows 25 points');

  // resume from step 22: steps 23.. are redone, a segment starts
  fx.pushSegment(0, { step: 23, time: 2000, resumed_from: 22, world: 2, tp: 1, pp: 1, dp: 2 });
  fx.pushEvent(0, { step: 22, time: 2000, kind: 'segment', file_kind: 'run_start', rank: 0, detail: 'resumed from checkpoint step 22' });
  fx.pushRows(0, 23, 4);
  await waitFor(page, () => window.hptDebug.points(0, 'step').length === 26 && window.hptDebug.segments(0).length === 2,
    null, 'a resume replaces the redone steps and adds a segment');
  await sameAsServer(page, fx, 0, 'after a resume');

  // states
  fx.setState(0, 'stopped');
  await waitFor(page, () => /writer stopped/.test(document.getElementById('state-0').textContent), null,
    'state "writer stopped" displayed');
  check(await page.getAttribute('#state-0', 'data-state') === 'stopped', '#state-0 data-state=stopped');
  fx.setState(1, 'error', 'metrics.h5: damaged (HDF5: checksum)');
  await waitFor(page, () => /error: metrics.h5: damaged/.test(document.getElementById('state-1').textContent), null,
    'state error with its message displayed');

  // alert: header red, rule shown
  fx.pushAlert(0, { rule: 'grad_norm>10', step: 26, value: 12.5 });
  await waitFor(page, () => document.getElementById('header').classList.contains('alerting') &&
    document.querySelector('#alerts li[data-rule="grad_norm>10"]'), null, 'an alert turns the header red');
  const bg = await page.evaluate(() => getComputedStyle(document.getElementById('header')).backgroundColor);
  check(bg === 'rgb(198, 40, 40)', 'header background is red (' + bg + ')');
  check(/grad_norm>10/.test(await page.textContent('#alert-banner')), 'the header names the rule');

  // events newest first
  fx.pushEvent(0, { step: 26, time: 3000, kind: 'nonfinite', rank: 1, detail: 'non-finite gradient norm' });
  await waitFor(page, () => { const li = document.querySelector('#events li'); return li && li.dataset.kind === 'nonfinite'; },
    null, 'a pushed event is listed first');

  // a flood: 12 throughput_drop events at steps 3..14 are one entry and one
  // shaded span; a later one at step 40 (26 steps on) stays an entry and a marker
  for (let st = 3; st <= 14; st++)
    fx.pushEvent(0, { step: st, time: 3100 + st, kind: 'throughput_drop', file_kind: 'throughput_drop', rank: 0,
      detail: 'forced ' + st });
  fx.pushEvent(0, { step: 40, time: 3200, kind: 'throughput_drop', file_kind: 'throughput_drop', rank: 0, detail: 'forced 40' });
  await waitFor(page, () => window.hptDebug.events(0).filter((e) => e.kind === 'throughput_drop').length === 13 &&
    document.querySelectorAll('#events li[data-raw-kind="throughput_drop"]').length > 0, null, 'the flood arrived');
  await page.evaluate(() => window.hptDebug.render());
  const drops = await page.$$eval('#events li[data-raw-kind="throughput_drop"]', (l) => l.map((x) =>
    ({ step: Number(x.dataset.step), last: Number(x.dataset.lastStep), count: Number(x.dataset.count), text: x.textContent })));
  check(drops.length === 2 && drops[0].step === 40 && drops[0].count === 1 &&
    drops[1].step === 3 && drops[1].last === 14 && drops[1].count === 12 &&
    drops[1].text.includes('steps 3–14 · throughput_drop ×12 · rank 0: forced 3'),
    'the flood is one entry "steps 3–14 · throughput_drop ×12", the step-40 one its own ' + describe(drops));
  const marks = await page.evaluate(() => window.hptDebug.eventMarks(0));
  check(marks && sameArray(marks.spans, [[2.5, 14.5]]), 'the loss chart shades steps 3–14 as one span ' + describe(marks && marks.spans));
  check(marks.markers.includes(40) && !marks.markers.some((st) => st >= 3 && st <= 14),
    'the step-40 drop is a marker, none of steps 3–14 is ' + describe(marks.markers));
  const groups = await page.evaluate(() => window.hptDebug.eventGroups(0).filter((g) => g.kind === 'throughput_drop'));
  check(groups.reduce((n, g) => n + g.count, 0) === 13, 'the groups hold all 13 events');

  // shared zoom: zooming the loss panel zooms every step panel
  await page.evaluate(() => echarts.getInstanceByDom(document.getElementById('chart-loss'))
    .dispatchAction({ type: 'dataZoom', start: 20, end: 60 }));
  const zooms = await page.evaluate(() => ['lr', 'grad', 'tps', 'mfu'].map((p) => {
    const z = echarts.getInstanceByDom(document.getElementById('chart-' + p)).getOption().dataZoom[0];
    return [z.start, z.end];
  }));
  check(zooms.every((z) => z[0] === 20 && z[1] === 60), 'zoom on the step axis is shared: ' + describe(zooms));

  // heat map: metric and run selectable
  await page.selectOption('#heat-metric', 'flops');
  await page.selectOption('#heat-run', '1');
  const cells = await page.evaluate(() => window.hptDebug.heatCells());
  check(cells === 10 * 2, 'heat map of run 1, achieved FLOP/s: ' + cells + ' cells');

  // a reload keeps alert and state
  await load(page, fx);
  await waitFor(page, () => document.getElementById('header').classList.contains('alerting') &&
    /writer stopped/.test(document.getElementById('state-0').textContent), null, 'reload keeps alert and state');

  check(errors.length === 0, 'no page error ' + describe(errors));
  const bad = fx.requests.filter((r) => !r.token);
  check(bad.length === 0 && fx.requests.length > 0, 'all ' + fx.requests.length + ' requests carried the token ' + describe(bad));
  await browser.close();
  await fx.close();
  console.log('PASS: live page');
}

main().catch((e) => fail(e.stack || String(e)));
