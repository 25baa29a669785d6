// tests/live/page-xss.js — file-derived text (a run's name: its directory;
// an event's detail: e.g. a checkpoint path) holding HTML markup is shown
// as text by the live page: in the state line, the events list, the alert
// list and the ECharts tooltips (axis tooltip of a step panel, item tooltip
// of an event marker, heat map). Against tests/live/fixture-server.js in
// headless chromium; no markup element is created, no script runs.
'use strict';
const { check, fail, launch, waitFor, describe } = require('./lib.js');
const fixture = require('./fixture-server.js');

const IMG = '<img src=x onerror="window.__xss=1">';
const BOLD = '<b>x</b>';
const NAME = 'run' + IMG + BOLD;

async function main() {
  const fx = await fixture.start({ names: [NAME, 'beta' + BOLD] });
  fx.runs[0].events.push({ step: 5, time: 1500, kind: 'checkpoint', rank: 0, detail: '/ckpt/' + IMG + BOLD + '/step-5' });
  fx.runs[0].alerts.push({ rule: 'loss>9' + BOLD, step: 6, value: 9.5 });
  const browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(fx.url);
  await waitFor(page, () => window.hptDebug && window.hptDebug.ready, null, 'the page rendered');
  await waitFor(page, () => window.hptDebug.conn() === 'connected', null, 'the page opened the event stream');
  fx.pushEvent(0, { step: 7, time: 1600, kind: 'signal', rank: 0, detail: 'pushed ' + IMG + BOLD });
  await waitFor(page, () => window.hptDebug.events(0).length === 3, null, 'the pushed event arrived');
  await page.evaluate(() => window.hptDebug.render());

  // tooltips: axis tooltip of the loss panel, item tooltip of the event marker, heat map cell
  const tips = [];
  const showTip = async (chart, sel, action) => {
    await page.evaluate(([c, a]) => echarts.getInstanceByDom(document.getElementById('chart-' + c))
      .dispatchAction(a), [chart, action]);
    await page.waitForTimeout(300);
    const html = await page.evaluate((c) => {
      const divs = Array.from(document.getElementById('chart-' + c).querySelectorAll('div'))
        .filter((d) => d.style.position === 'absolute' && d.textContent);
      return divs.map((d) => d.textContent).join('|');
    }, chart);
    tips.push(html);
    return html;
  };
  const series = await page.evaluate(() => echarts.getInstanceByDom(document.getElementById('chart-loss'))
    .getOption().series.map((s) => s.id));
  const ev = series.indexOf('ev-0'), raw = series.indexOf('raw-0');
  check(ev >= 0 && raw >= 0, 'loss panel has the raw and event series of run 0 ' + describe(series));
  const t1 = await showTip('loss', null, { type: 'showTip', seriesIndex: raw, dataIndex: 3 });
  check(t1.includes(NAME), 'axis tooltip shows the run name as text: ' + describe(t1));
  const t2 = await showTip('loss', null, { type: 'showTip', seriesIndex: ev, dataIndex: 0 });
  check(t2.includes(IMG) || t2.includes(BOLD), 'event marker tooltip shows the detail as text: ' + describe(t2));
  const t3 = await showTip('heat', null, { type: 'showTip', seriesIndex: 0, dataIndex: 0 });
  check(/step/.test(t3), 'heat map tooltip shown: ' + describe(t3));

  const found = await page.evaluate(() => ({
    xss: window.__xss,
    elems: Array.from(document.body.querySelectorAll('img, b')).map((e) => e.outerHTML),
    states: document.getElementById('states').textContent,
    events: document.getElementById('events').textContent,
    alerts: document.getElementById('alerts').textContent
  }));
  check(found.xss === undefined, 'no script ran from file-derived text (window.__xss ' + found.xss + ')');
  check(found.elems.length === 0, 'no <img>/<b> element created from file-derived text ' + describe(found.elems));
  check(found.states.includes(NAME), 'the state line shows the run name literally');
  check(found.events.includes('/ckpt/' + IMG + BOLD), 'the events list shows the detail literally');
  check(found.alerts.includes('loss>9' + BOLD), 'the alert list shows the rule literally');
  check(errors.length === 0, 'no page error ' + describe(errors));
  await browser.close();
  await fx.close();
  console.log('PASS: live page, markup in file-derived text');
}

main().catch((e) => fail(e.stack || String(e)));
