// tests/live/bubble.js URL EXPECTED.json — open the page (hpt-live's URL or
// a report's file:// URL) of three runs — 0: PP 2 under zb-h1 traced at one
// step, 1: PP 1, 2: the PP 2 file without the bubble columns and segment
// fields — in headless chromium and check the pipeline bubble against
// EXPECTED (tests/live/live-bubble.sh: `hpt-metrics summary`'s measured
// bubble and its step count, the segment's bubble_theory, the per-rank
// cells of /ranks/pipeline_bubble, the "weight" spans of the traced step).
'use strict';
const { check, waitFor, describe, readJSON, openPage } = require('./lib.js');

// v to the page's 3 significant digits
const digits3 = (v) => Number(v.toPrecision(3));

async function main() {
  const [pageUrl, expectedPath] = process.argv.slice(2);
  const want = readJSON(expectedPath);
  const { browser, page, errors } = await openPage(pageUrl);
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready &&
    window.hptDebug.runs().length === 3 && window.hptDebug.ranks(0, 'bubble_s') &&
    window.hptDebug.ranks(0, 'bubble_s').values.length > 0, null, 'three runs with their ranks', 30000);

  // run 0: PP 2, zb-h1
  await page.selectOption('#heat-run', '0');
  const b = await page.evaluate(() => window.hptDebug.bubble());
  check(b !== null && await page.isVisible('#bubble-line'), 'the PP 2 run shows a bubble line: ' +
    describe(b && b.text));
  check(b.schedule === 'zb-h1', 'the line names the schedule zb-h1 (' + b.schedule + ')');
  check(b.theory === want.theory, 'theory ' + b.theory + ' = the segment\'s bubble_theory ' + want.theory);
  const th = /theory \(ZB-H1\): (\S+) of the step \(PP 2, 4 micro-batches\)/.exec(b.text);
  check(th && Number(th[1]) === digits3(want.theory), 'the line shows the theory ' + (th && th[1]) +
    ' (bubble_theory to 3 digits: ' + digits3(want.theory) + ')');
  const ms = /^pipeline bubble: (\S+) of the step measured \(the most idle stage's, median of (\d+) steps\)/.exec(b.text);
  check(ms && Number(ms[2]) === want.measured_steps && b.steps === want.measured_steps,
    'the measure is the median of ' + want.measured_steps + ' steps, as the summary\'s (' + (ms && ms[2]) + ')');
  // the page's figure from 6-digit per-rank values, the summary's printed to
  // 6 digits: equal within both roundings, and equal as shown unless the
  // summary's figure lies within that distance of a 3-digit boundary
  const tol = 1e-5 * want.measured;
  check(Math.abs(b.measured - want.measured) <= tol, 'measured ' + b.measured +
    ' = hpt-metrics summary\'s ' + want.measured + ' (within ' + tol + ')');
  const boundary = digits3(want.measured - tol) !== digits3(want.measured + tol);
  check(Number(ms[1]) === digits3(b.measured) && (boundary || Number(ms[1]) === digits3(want.measured)),
    'the line shows ' + ms[1] + ', the summary\'s ' + want.measured + ' to 3 digits' +
    (boundary ? ' (at a rounding boundary)' : ''));

  // the heat map's "pipeline bubble": one cell per rank x step
  const label = await page.$eval('#heat-metric option[value="bubble_s"]', (o) => o.textContent);
  check(label === 'pipeline bubble (s)', 'the heat map offers "' + label + '"');
  await page.selectOption('#heat-metric', 'bubble_s');
  const cells = await page.evaluate(() => window.hptDebug.heatCells());
  check(cells === want.cells && cells === want.steps * want.ranks, 'pipeline bubble heat map: ' + cells +
    ' cells, /ranks/pipeline_bubble has ' + want.cells + ' finite of ' + want.steps + ' steps x ' +
    want.ranks + ' ranks');
  const sname = await page.evaluate(() =>
    echarts.getInstanceByDom(document.getElementById('chart-heat')).getOption().series[0].name);
  check(sname === 'pipeline bubble', 'the heat series is the pipeline bubble (' + sname + ')');

  // the timeline: the deferred weight-gradient passes in their own colour
  await page.evaluate(([s]) => window.hptDebug.showTimeline(0, s), [want.trace_step]);
  const tl = await page.evaluate(() => {
    const data = echarts.getInstanceByDom(document.getElementById('chart-timeline')).getOption().series[0].data;
    const w = data.filter((d) => d.value[4] === 'weight');
    const colors = {};
    data.forEach((d) => { colors[d.value[4]] = d.itemStyle.color; });
    return { weight: w.length, colors: colors, bars: window.hptDebug.timeline().bars,
      legend: document.querySelector('[data-panel="timeline"] h2').textContent };
  });
  check(tl.weight === want.weight && want.weight > 0, 'step ' + want.trace_step + ': ' + tl.weight +
    ' weight spans drawn, /trace has ' + want.weight);
  const wc = tl.colors.weight;
  check(wc && wc !== '#607d8b' && Object.keys(tl.colors).every((n) => n === 'weight' || tl.colors[n] !== wc),
    'weight spans have a colour of their own (' + wc + '; ' + describe(tl.colors) + ')');
  check(/weight/.test(tl.legend), 'the timeline\'s legend names the weight spans: ' + tl.legend);

  // run 1: PP 1, no line
  await page.selectOption('#heat-run', '1');
  check(await page.evaluate(() => window.hptDebug.bubble()) === null && !(await page.isVisible('#bubble-line')),
    'the PP 1 run shows no bubble line');

  // run 2: a file older than the bubble columns: no measure, no theory
  await page.selectOption('#heat-run', '2');
  const o = await page.evaluate(() => window.hptDebug.bubble());
  check(o !== null && o.measured === null && o.theory === null && o.schedule === null &&
    !/theory/.test(o.text), 'the older file: ' + describe(o && o.text));
  check(await page.evaluate(() => window.hptDebug.heatCells()) === 0,
    'the older file\'s pipeline bubble heat map is empty');
  const seg = await page.evaluate(() => window.hptDebug.segments(2).slice(-1)[0]);
  check(seg.pp_schedule === null && seg.pp_virtual === null && seg.bubble_theory === null,
    'its segment has no schedule, V or theory (' + describe(seg) + ')');

  check(errors.length === 0 && (await page.evaluate(() => window.hptDebug.errors())).length === 0,
    'no page error (' + describe(errors) + ')');
  await browser.close();
  console.log('bubble: ok');
}

main().catch((e) => { console.error('FAIL: ' + (e && e.stack || e)); process.exit(1); });
