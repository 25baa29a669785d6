// tests/live/bubble-resume.js URL STEPS MEASURED — open a page (a report's
// file:// URL) of one run resumed onto another pipeline schedule and check
// that its bubble line measures the last segment's STEPS steps only, the
// figure hpt-metrics summary prints (MEASURED, to both roundings)
// (tests/metrics/metrics-bubble-resume.sh).
'use strict';
const { check, waitFor, describe, openPage } = require('./lib.js');

async function main() {
  const [pageUrl, steps, measured] = process.argv.slice(2);
  const { browser, page, errors } = await openPage(pageUrl);
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready &&
    window.hptDebug.runs().length === 1 && window.hptDebug.bubble(), null, 'the bubble line', 30000);
  const b = await page.evaluate(() => window.hptDebug.bubble());
  check(b.steps === Number(steps), 'the bubble is the median of the last segment\'s ' + steps +
    ' steps (' + b.steps + '): ' + describe(b.text));
  const tol = 1e-5 * Number(measured);
  check(Math.abs(b.measured - Number(measured)) <= tol, 'measured ' + b.measured +
    ' = hpt-metrics summary\'s ' + measured);
  check(b.schedule === 'gpipe', 'the theory is the last segment\'s schedule (' + b.schedule + ')');
  check(errors.length === 0, 'no page error (' + describe(errors) + ')');
  await browser.close();
}
main().catch((e) => { console.error('FAIL: ' + (e && e.stack || e)); process.exit(1); });
