// tests/live/timeline.js URL EXPECTED.json — open the page (hpt-live's URL
// or a report's file:// URL) in headless chromium and check its step
// timeline against what h5py read from /trace (EXPECTED: {"steps": [...],
// "bars": {"STEP": n}, "ranks": R}): the panel is shown, it offers every
// traced step, and for each step it draws one rectangle per compute and
// communication span and one row per rank.
'use strict';
const { check, waitFor, sameArray, describe, readJSON, openPage } = require('./lib.js');

async function main() {
  const [pageUrl, expectedPath] = process.argv.slice(2);
  const want = readJSON(expectedPath);
  const { browser, page, errors } = await openPage(pageUrl);
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready &&
    window.hptDebug.timeline().visible, null, 'the step timeline panel shown', 30000);
  const t = await page.evaluate(() => window.hptDebug.timeline());
  check(sameArray(t.steps, want.steps), 'the timeline offers the traced steps ' + describe(want.steps) +
    ' (page: ' + describe(t.steps) + ')');
  const opts = await page.$$eval('#timeline-step option', (l) => l.map((o) => Number(o.value)));
  check(sameArray(opts, want.steps), 'the step menu lists the traced steps (' + describe(opts) + ')');
  check(await page.isVisible('#chart-timeline canvas'), 'the timeline chart has a canvas');
  for (const step of want.steps) {
    await page.evaluate(([s]) => window.hptDebug.showTimeline(window.hptDebug.timeline().run, s), [step]);
    const got = await page.evaluate(() => window.hptDebug.timeline());
    check(got.step === step, 'step ' + step + ' shown');
    check(got.bars === want.bars[String(step)], 'step ' + step + ': ' + got.bars +
      ' rectangles drawn, /trace has ' + want.bars[String(step)] + ' compute and communication spans');
    check(got.rows === want.ranks, 'step ' + step + ': ' + got.rows + ' rank rows, expected ' + want.ranks);
    const drawn = await page.evaluate(() => echarts.getInstanceByDom(
      document.getElementById('chart-timeline')).getOption().series[0].data.length);
    check(drawn === got.bars + want.ranks, 'step ' + step + ': the series holds the spans and one ' +
      'step extent per rank (' + drawn + ')');
    const note = (want.notes || {})[String(step)] || '';
    check(note ? got.note.includes(note) : got.note === '', 'step ' + step + ': the note reads "' +
      got.note + '"' + (note ? ', expected "' + note + '"' : ', expected none'));
  }
  check(errors.length === 0, 'no page error (' + describe(errors) + ')');
  await browser.close();
  console.log('timeline: ok');
}

main().catch((e) => { console.error('FAIL: ' + (e && e.stack || e)); process.exit(1); });
