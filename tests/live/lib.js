// tests/live/lib.js — shared by the browser tests (tests/live/live-*.sh): Debian's
// chromium, headless, driven by playwright-core from npm (never a downloaded
// browser), and small checks. Environment: HPT_SRC (node_modules there).
'use strict';
const path = require('path');
const fs = require('fs');

const SRC = process.env.HPT_SRC || path.resolve(__dirname, '..', '..');
const CHROMIUM = process.env.HPT_CHROMIUM || '/usr/bin/chromium';

function fail(msg) {
  console.log('FAIL: ' + msg);
  process.exit(1);
}

function check(cond, msg) {
  if (!cond) fail(msg);
  console.log('ok: ' + msg);
}

async function launch() {
  const { chromium } = require(path.join(SRC, 'node_modules', 'playwright-core'));
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync']
  });
}

// Wait until fn() (run in the page) is truthy; fail with `what` after ms.
async function waitFor(page, fn, arg, what, ms) {
  try {
    await page.waitForFunction(fn, arg, { timeout: ms || 20000, polling: 50 });
  } catch (e) {
    const errs = await page.evaluate(() => window.hptDebug ? window.hptDebug.errors() : ['no hptDebug']).catch(() => []);
    fail(what + ' (timed out; page errors: ' + JSON.stringify(errs) + ')');
  }
}

// Equal arrays (numbers compared exactly; null for NaN on both sides).
function sameArray(a, b) {
  if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (Array.isArray(a[i]) || Array.isArray(b[i])) { if (!sameArray(a[i], b[i])) return false; }
    else if (a[i] !== b[i]) return false;
  }
  return true;
}

function describe(a) {
  const s = JSON.stringify(a);
  return s && s.length > 300 ? s.slice(0, 300) + '...' : s;
}

function readJSON(p) { return JSON.parse(fs.readFileSync(p, 'utf8')); }

// A browser (launch) with one 1400 x 1600 page at url, the page's uncaught
// errors collected in `errors` (a test checks it stays empty).
async function openPage(url) {
  const browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1400, height: 1600 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  return { browser, page, errors };
}

module.exports = { SRC, fail, check, launch, openPage, waitFor, sameArray, describe, readJSON };
