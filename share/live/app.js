/* app.js — the page of hpt-live and of `hpt-metrics report` (docs/LIVE.md).
 *
 * Plain JavaScript over ECharts (window.echarts), no build step. Two modes:
 * - live: GET api/runs and api/history?run=ID&points=N, then Server-Sent
 *   Events from api/stream (rows, state, event, alert); every request
 *   carries the token of the page's own URL (?token=T);
 * - offline: window.HPT_DATA = {runs:[...], history:[...]} inlined by
 *   `hpt-metrics report`; no request at all.
 * Data held per run: columns (step-aligned arrays; val_step/val_loss their
 * own), ranks (rank x step maps), comm, events, segments, alerts, goodput
 * (the wall time's split over all segments; live: api/goodput every
 * GOODPUT_MS). After a
 * resume a step can come again: the later row wins (rows from that step on
 * are replaced), the rule of the metrics file's readers.
 * Repeated anomalies (a flood of throughput_drop, say) are collapsed: one
 * entry in the events list and one shaded span on the loss chart per run of
 * one kind (eventGroups); every event is still held.
 * Tests read what the page holds through window.hptDebug. */
(function () {
  'use strict';

  var OFFLINE = typeof window.HPT_DATA === 'object' && window.HPT_DATA !== null;
  var TOKEN = new URLSearchParams(location.search).get('token') || '';
  var POINTS = 5000; /* steps per run asked of the server (it keeps extremes) */
  var GROUP = 'hpt-steps'; /* the step-axis charts share zoom and tooltip */

  /* The step panels: columns plotted, units for the tooltips. */
  var PANELS = [
    { id: 'loss', title: 'Loss (raw, smoothed, validation)', col: 'loss', unit: 'nats/token' },
    { id: 'lr', title: 'Learning rate', col: 'lr', unit: '' },
    { id: 'grad', title: 'Gradient norm (left) and clip coefficient (right)', col: 'grad_norm',
      unit: '', right: 'clip' },
    { id: 'tps', title: 'Throughput', col: 'tokens_per_s', unit: 'tokens/s' },
    { id: 'mfu', title: 'Model FLOP utilisation', col: 'mfu', unit: '%', scale: 100 }
  ];
  var HEAT = {
    busy_s: { label: 'busy time', unit: 's' },
    step_s: { label: 'step time', unit: 's' },
    flops: { label: 'achieved FLOP/s', unit: 'FLOP/s' },
    bubble_s: { label: 'pipeline bubble', unit: 's' }
  };
  /* The pipeline schedules as hpt-train --pp-schedule names them (the
   * segments' pp_schedule), as the bubble line names their theory. */
  var SCHEDULE_LABEL = { '1f1b': '1F1B', gpipe: 'GPipe', interleaved: 'interleaved',
    'zb-h1': 'ZB-H1' };
  var STATE_LABEL = {
    waiting: 'waiting for the metrics file', live: 'live', stopped: 'writer stopped',
    finished: 'finished', error: 'error'
  };
  var KIND_COLOR = {
    nonfinite: '#d32f2f', spike: '#f57c00', throughput: '#fbc02d', slow_rank: '#7b1fa2',
    checkpoint: '#388e3c', signal: '#0288d1', segment: '#455a64', alert: '#b71c1c',
    end: '#9e9e9e', other: '#607d8b'
  };
  var PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b',
    '#e377c2'];
  var STEP_KEYS = ['step', 'loss', 'lr', 'grad_norm', 'clip', 'tokens_per_s', 'mfu'];
  /* The step timeline (--trace-steps): compute spans by name; communication
   * spans below them; the step's extent on a rank drawn first in the idle
   * colour, so what no compute span covers shows as idle. */
  var TL_COLOR = {
    forward: '#1f77b4', backward: '#2ca02c', weight: '#00441b', data: '#bcbd22',
    optimizer: '#ff7f0e', validation: '#17becf', checkpoint: '#9467bd', checkpoint_snap: '#9467bd'
  };
  var TL_IDLE = '#f6c9c9';
  var TL_COMM = { tp: '#8c564b', dp: '#e377c2', 'dp-shard': '#e377c2', 'dp-replica': '#c5b0d5',
    pp: '#7f7f7f', mp: '#aec7e8', embed: '#98df8a', world: '#c49c94' };
  /* A run of one anomaly kind: its occurrences at most FLOOD_GAP steps apart. */
  var FLOOD_GAP = 10;
  var FLOOD_CLASSES = { nonfinite: 1, spike: 1, throughput: 1, slow_rank: 1 };
  /* The goodput's parts (docs/METRICS.md, "Goodput"), in the bar's order. */
  var GOODPUT_PARTS = [
    { key: 'productive', label: 'productive steps', color: '#2e7d32' },
    { key: 'redone', label: 'steps redone after a restart', color: '#c62828' },
    { key: 'checkpoint', label: 'checkpoint stalls', color: '#f9a825' },
    { key: 'startup', label: 'start-up and loading', color: '#1565c0' },
    { key: 'validation', label: 'validation', color: '#7b1fa2' },
    { key: 'between', label: 'between segments', color: '#9e9e9e' },
    { key: 'other', label: 'other', color: '#607d8b' }
  ];
  var GOODPUT_MS = 30000; /* live: the goodput asked for again */

  var S = {
    runs: [], hist: {}, alerts: [], charts: {}, heatMetric: 'busy_s', heatRun: null,
    renderTimer: null, conn: OFFLINE ? 'offline' : 'connecting', requests: 0, renders: 0,
    errors: [], tlRun: null, tlStep: null, tlBars: 0, tlRows: 0, bubble: null
  };

  window.addEventListener('error', function (e) { S.errors.push(String(e.message)); });

  /* ------------------------------------------------------------ helpers */

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'class') e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { e.appendChild(c); });
    return e;
  }

  function url(path, params) {
    var q = new URLSearchParams(params || {});
    q.set('token', TOKEN);
    return path + '?' + q.toString();
  }

  function getJSON(path, params) {
    S.requests++;
    return fetch(url(path, params), { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
      return r.json();
    });
  }

  function fmt(v) {
    if (v === null || v === undefined || typeof v !== 'number' || !isFinite(v)) return '-';
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(3);
    return String(Number(v.toPrecision(5)));
  }

  /* Text made safe for HTML: the ECharts tooltips are HTML strings, and run
   * names (directories), event details (checkpoint paths), rules and units
   * come from files. Every other file-derived string goes in by textContent. */
  function esc(v) {
    return String(v === null || v === undefined ? '' : v).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  function withUnit(v, unit) { return fmt(v) + (unit ? ' ' + unit : ''); }

  function lowerBound(a, x) { /* first index with a[i] >= x (a sorted) */
    var lo = 0, hi = a.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  /* The event kinds of the metrics file (skipped_step, grad_norm_spike, ...)
   * and of the server's summary kinds (nonfinite, spike, ...) as classes. */
  function kindClass(k) {
    k = String(k || '');
    if (/nonfinite|skipped/.test(k)) return 'nonfinite';
    if (/spike/.test(k)) return 'spike';
    if (/throughput|drop/.test(k)) return 'throughput';
    if (/slow/.test(k)) return 'slow_rank';
    if (/checkpoint/.test(k)) return 'checkpoint';
    if (/signal/.test(k)) return 'signal';
    if (/segment|run_start|resume|layout/.test(k)) return 'segment';
    if (/alert/.test(k)) return 'alert';
    if (/run_end/.test(k)) return 'end';
    return 'other';
  }

  /* A run's events with the floods collapsed, in the order of their first
   * occurrence: {e: the first event, last: the last one, count}. Anomaly
   * events of one file kind (and, for slow_rank, one rank) join the group
   * of the previous one while each follows it by 1 to FLOOD_GAP steps (a
   * resume's redone steps start a new group); other kinds stay single. */
  function eventGroups(events) {
    var out = [], open = {};
    events.forEach(function (e) {
      var k = kindClass(e.kind);
      if (!FLOOD_CLASSES[k]) { out.push({ e: e, last: e, count: 1 }); return; }
      var key = (e.file_kind || e.kind) + (k === 'slow_rank' ? '#' + e.rank : '');
      var g = open[key];
      if (g && e.step > g.last.step && e.step - g.last.step <= FLOOD_GAP) {
        g.last = e;
        g.count++;
        return;
      }
      g = open[key] = { e: e, last: e, count: 1 };
      out.push(g);
    });
    return out;
  }

  /* "steps A–B · KIND ×N" of a group of several, "step A · KIND" of one. */
  function groupTitle(g) {
    var e = g.e;
    return (g.count > 1 ? 'steps ' + e.step + '–' + g.last.step : 'step ' + e.step) + ' · ' +
      e.kind + (g.count > 1 ? ' ×' + g.count : '') + (e.rank >= 0 ? ' · rank ' + e.rank : '');
  }

  function runById(id) {
    for (var i = 0; i < S.runs.length; i++) if (S.runs[i].id === id) return S.runs[i];
    return null;
  }

  function runIndex(id) {
    for (var i = 0; i < S.runs.length; i++) if (S.runs[i].id === id) return i;
    return 0;
  }

  function runLabel(r) {
    var l = r.layout || {};
    var name = r.name || ('run ' + r.id);
    var dup = S.runs.filter(function (o) { return o.name === r.name; }).length > 1;
    return name + (dup ? ' #' + r.id : '') + ' (tp' + (l.tp || 1) +
      (l.cp > 1 ? ' cp' + l.cp : '') + ' pp' + (l.pp || 1) + ' dp' +
      (l.dp || 1) + ', ' + (l.world || 1) + ' ranks)';
  }

  function color(id) { return PALETTE[runIndex(id) % PALETTE.length]; }

  /* --------------------------------------------------------- run data */

  function emptyHist() {
    return {
      columns: { step: [], val_step: [], val_loss: [] }, ranks: null,
      comm: null, events: [], segments: [], alerts: []
    };
  }

  /* Make every step-aligned column as long as `step` (missing: nulls). */
  function normalize(h) {
    var c = h.columns = h.columns || {};
    c.step = c.step || [];
    var n = c.step.length;
    STEP_KEYS.forEach(function (k) { if (!c[k]) c[k] = []; });
    Object.keys(c).forEach(function (k) {
      if (k === 'val_step' || k === 'val_loss') return;
      while (c[k].length < n) c[k].push(null);
      if (c[k].length > n) c[k].length = n;
    });
    c.val_step = c.val_step || [];
    c.val_loss = c.val_loss || [];
    h.events = h.events || [];
    h.segments = h.segments || [];
    h.alerts = h.alerts || [];
    h.goodput = h.goodput || null;
    return h;
  }

  function setHistory(id, h) {
    S.hist[id] = normalize(h || emptyHist());
    S.hist[id].alerts.forEach(function (a) { addAlert(id, a, true); });
    if (h && h.state && runById(id)) runById(id).state = h.state;
  }

  /* Rows pushed by the server: replace the held rows from the first pushed
   * step on (a resumed run redoes steps), then append. */
  function appendRows(id, cols, ranks) {
    var h = S.hist[id] || (S.hist[id] = normalize(emptyHist()));
    var c = h.columns;
    var steps = cols.step || [];
    var valStep = cols.val_step, valLoss = cols.val_loss;
    if (!valStep && valLoss && valLoss.length === steps.length) { /* row-aligned val_loss */
      valStep = [];
      var vl = [];
      for (var i = 0; i < steps.length; i++)
        if (valLoss[i] !== null && valLoss[i] !== undefined) {
          valStep.push(steps[i]);
          vl.push(valLoss[i]);
        }
      valLoss = vl;
    }
    if (steps.length) {
      var cut = lowerBound(c.step, steps[0]), n = c.step.length;
      Object.keys(c).forEach(function (k) {
        if (k !== 'val_step' && k !== 'val_loss' && c[k].length === n) c[k].length = cut;
      });
      Object.keys(cols).forEach(function (k) {
        if (k === 'val_step' || k === 'val_loss') return;
        if (!c[k]) { c[k] = []; while (c[k].length < cut) c[k].push(null); }
        Array.prototype.push.apply(c[k], cols[k]);
      });
      normalize(h);
      var vcut = lowerBound(c.val_step, steps[0]);
      c.val_step.length = vcut;
      c.val_loss.length = vcut;
    }
    if (valStep && valLoss) {
      var vc = valStep.length ? lowerBound(c.val_step, valStep[0]) : c.val_step.length;
      c.val_step.length = vc;
      c.val_loss.length = vc;
      Array.prototype.push.apply(c.val_step, valStep);
      Array.prototype.push.apply(c.val_loss, valLoss);
    }
    if (ranks && ranks.step && ranks.step.length) {
      if (!h.ranks) h.ranks = { step: [] };
      var rc = lowerBound(h.ranks.step, ranks.step[0]);
      Object.keys(ranks).forEach(function (k) {
        if (!Array.isArray(ranks[k])) return;
        if (!h.ranks[k]) h.ranks[k] = [];
        h.ranks[k].length = Math.min(h.ranks[k].length, rc);
        Array.prototype.push.apply(h.ranks[k], ranks[k]);
      });
    }
  }

  function addEvent(id, ev) {
    var h = S.hist[id] || (S.hist[id] = normalize(emptyHist()));
    var key = JSON.stringify([ev.step, ev.time, ev.kind, ev.rank, ev.detail]);
    for (var i = h.events.length - 1; i >= 0 && i >= h.events.length - 200; i--)
      if (JSON.stringify([h.events[i].step, h.events[i].time, h.events[i].kind, h.events[i].rank,
        h.events[i].detail]) === key) return;
    h.events.push(ev);
  }

  function addSegment(id, seg) {
    var h = S.hist[id] || (S.hist[id] = normalize(emptyHist()));
    if (h.segments.some(function (g) { return g.step === seg.step && g.time === seg.time; })) return;
    h.segments.push(seg);
  }

  function addAlert(id, a, fromHistory) {
    var key = id + '|' + a.rule + '|' + a.step;
    if (S.alerts.some(function (o) { return o.key === key; })) return;
    S.alerts.push({ key: key, run: id, rule: a.rule, step: a.step, value: a.value,
      live: !fromHistory });
  }

  /* ------------------------------------------------------------- DOM */

  function buildDom() {
    document.title = OFFLINE ? 'hpt report' : 'hpt live';
    document.body.textContent = '';
    var header = el('header', { id: 'header' }, [
      el('h1', { text: OFFLINE ? 'hpt report' : 'hpt live' }),
      el('span', { id: 'alert-banner' }),
      el('span', { id: 'conn', text: S.conn })
    ]);
    var states = el('div', { id: 'states' });
    var panels = el('div', { id: 'panels' });
    PANELS.forEach(function (p) {
      panels.appendChild(el('section', { class: 'panel', 'data-panel': p.id }, [
        el('h2', { text: p.title }), el('div', { class: 'chart', id: 'chart-' + p.id })
      ]));
    });
    var heatSel = el('select', { id: 'heat-metric' });
    Object.keys(HEAT).forEach(function (k) {
      heatSel.appendChild(el('option', { value: k, text: HEAT[k].label + ' (' + HEAT[k].unit + ')' }));
    });
    heatSel.addEventListener('change', function () { S.heatMetric = heatSel.value; render(); });
    var runSel = el('select', { id: 'heat-run' });
    runSel.addEventListener('change', function () { S.heatRun = Number(runSel.value); render(); });
    var ranks = el('div', { id: 'rank-panels' }, [
      el('section', { class: 'panel wide', 'data-panel': 'heat' }, [
        el('h2', {}, [document.createTextNode('Per rank × step: '), heatSel,
          document.createTextNode(' run '), runSel]),
        el('p', { class: 'legend-note', id: 'bubble-line', style: 'display:none' }),
        el('div', { class: 'chart tall', id: 'chart-heat' })
      ]),
      el('section', { class: 'panel wide', 'data-panel': 'comm' }, [
        el('h2', { text: 'Communication time per group per rank (mean s per step)' }),
        el('div', { class: 'chart', id: 'chart-comm' })
      ]),
      timelinePanel()
    ]);
    var goodput = el('section', { class: 'panel wide', 'data-panel': 'goodput' }, [
      el('h2', { text: 'Goodput: the wall time of every segment (restarts, requeues) split' }),
      el('div', { id: 'goodput' })
    ]);
    var side = el('aside', { id: 'side' }, [
      el('h2', { text: 'Alerts' }), el('ul', { id: 'alerts' }),
      el('h2', { text: 'Events (newest first)' }), el('ul', { id: 'events' })
    ]);
    document.body.appendChild(header);
    document.body.appendChild(states);
    document.body.appendChild(el('div', { id: 'layout' }, [
      el('main', {}, [panels, goodput, ranks]), side
    ]));
    PANELS.forEach(function (p) { initStepChart(p); });
    S.charts.heat = echarts.init(document.getElementById('chart-heat'));
    S.charts.comm = echarts.init(document.getElementById('chart-comm'));
    S.charts.timeline = echarts.init(document.getElementById('chart-timeline'));
    echarts.connect(GROUP);
    window.addEventListener('resize', function () {
      Object.keys(S.charts).forEach(function (k) { S.charts[k].resize(); });
    });
  }

  function initStepChart(p) {
    var chart = echarts.init(document.getElementById('chart-' + p.id));
    chart.group = GROUP;
    var yAxis = [{ type: 'value', scale: true, name: p.unit, axisLabel: { formatter: fmt } }];
    if (p.right) yAxis.push({ type: 'value', name: 'clip', min: 0, max: 1.05, splitLine: { show: false } });
    chart.setOption({
      animation: false,
      grid: { left: 64, right: p.right ? 56 : 24, top: 50, bottom: 52 },
      legend: { type: 'scroll', top: 0 },
      tooltip: {
        trigger: 'axis', axisPointer: { type: 'line' },
        formatter: function (items) { return tooltip(p, items); }
      },
      xAxis: { type: 'value', name: 'step', nameLocation: 'end', min: 'dataMin', max: 'dataMax' },
      yAxis: yAxis,
      dataZoom: [
        { type: 'inside', xAxisIndex: 0, filterMode: 'none' },
        { type: 'slider', xAxisIndex: 0, filterMode: 'none', height: 16, bottom: 4 }
      ],
      series: []
    });
    S.charts[p.id] = chart;
  }

  function tooltip(p, items) {
    if (!items.length) return '';
    var lines = ['step ' + esc(items[0].value[0])];
    items.forEach(function (it) {
      var unit = /clip$/.test(it.seriesName) ? '' : p.unit;
      var v = it.value[1];
      if (it.seriesType === 'scatter') {
        lines.push(it.marker + esc(it.data.label || it.seriesName));
        return;
      }
      lines.push(it.marker + esc(it.seriesName) + ': ' + esc(withUnit(v, unit)));
    });
    return lines.join('<br>');
  }

  /* ------------------------------------------------------------ charts */

  function pairs(x, y, scale) {
    var out = new Array(x.length);
    for (var i = 0; i < x.length; i++) {
      var v = y[i];
      out[i] = [x[i], v === null || v === undefined ? null : (scale ? v * scale : v)];
    }
    return out;
  }

  /* Exponential moving average, debiased (as TensorBoard's smoothing). */
  function ema(x, y, w) {
    var out = [], acc = 0, k = 0;
    for (var i = 0; i < x.length; i++) {
      var v = y[i];
      if (v === null || v === undefined || !isFinite(v)) { out.push([x[i], null]); continue; }
      acc = w * acc + (1 - w) * v;
      k++;
      out.push([x[i], acc / (1 - Math.pow(w, k))]);
    }
    return out;
  }

  /* The last finite loss at or before `step` (where an event marker sits). */
  function yAt(c, col, step) {
    var i = Math.min(lowerBound(c.step, step + 0.5), c.step.length) - 1;
    for (; i >= 0; i--) if (c[col][i] !== null && isFinite(c[col][i])) return c[col][i];
    for (i = 0; i < c.step.length; i++) if (c[col][i] !== null && isFinite(c[col][i])) return c[col][i];
    return 0;
  }

  /* Resumes, and single non-finite steps (a run of them is a span). */
  function markLines(h, groups) {
    var d = h.segments.slice(1).map(function (s) {
      return { xAxis: s.step, name: 'segment', lineStyle: { color: KIND_COLOR.segment, type: 'dashed' },
        label: { formatter: 'resume', position: 'insideEndTop' } };
    });
    groups.forEach(function (g) {
      if (g.count === 1 && kindClass(g.e.kind) === 'nonfinite')
        d.push({ xAxis: g.e.step, name: 'nonfinite',
          lineStyle: { color: KIND_COLOR.nonfinite, type: 'solid', width: 1 },
          label: { formatter: 'NaN', position: 'insideEndTop' } });
    });
    return { symbol: 'none', silent: true, animation: false, data: d };
  }

  /* One shaded span per group of several events, half a step beyond its
   * first and last. */
  function markAreas(groups) {
    var d = groups.filter(function (g) { return g.count > 1; }).map(function (g) {
      var k = kindClass(g.e.kind);
      return [{ xAxis: g.e.step - 0.5, name: groupTitle(g) + ': ' + (g.e.detail || ''),
        itemStyle: { color: KIND_COLOR[k], opacity: 0.2 } }, { xAxis: g.last.step + 0.5 }];
    });
    return { silent: false, animation: false, label: { show: false }, data: d };
  }

  function stepSeries(p) {
    var series = [];
    S.runs.forEach(function (r) {
      var h = S.hist[r.id];
      if (!h) return;
      var c = h.columns, name = runLabel(r), col = color(r.id), groups = eventGroups(h.events);
      var raw = {
        id: 'raw-' + r.id, name: name, type: 'line', showSymbol: false, connectNulls: false,
        data: pairs(c.step, c[p.col] || [], p.scale), sampling: 'lttb', yAxisIndex: 0,
        lineStyle: { width: p.id === 'loss' ? 1 : 1.5, opacity: p.id === 'loss' ? 0.35 : 1 },
        itemStyle: { color: col }, markLine: markLines(h, groups)
      };
      series.push(raw);
      if (p.id === 'loss') {
        series.push({ id: 'ema-' + r.id, name: name + ' smoothed', type: 'line', showSymbol: false,
          data: ema(c.step, c.loss, 0.9), itemStyle: { color: col }, lineStyle: { width: 2 } });
        series.push({ id: 'val-' + r.id, name: name + ' validation', type: 'line', symbol: 'circle',
          symbolSize: 5, data: pairs(c.val_step, c.val_loss), itemStyle: { color: col },
          lineStyle: { type: 'dashed', width: 1.5 } });
        var marks = groups.filter(function (g) {
          var k = kindClass(g.e.kind);
          return g.count === 1 && k !== 'end' && !(k === 'segment' && g.e.step === 0);
        }).map(function (g) {
          var e = g.e, k = kindClass(e.kind);
          return { value: [e.step, yAt(c, 'loss', e.step)], itemStyle: { color: KIND_COLOR[k] },
            label: e.kind + ' (step ' + e.step + (e.rank >= 0 ? ', rank ' + e.rank : '') + '): ' +
              (e.detail || '') };
        });
        series.push({ id: 'ev-' + r.id, name: name + ' events', type: 'scatter', symbol: 'pin',
          symbolSize: 18, data: marks, itemStyle: { color: col }, z: 5, markArea: markAreas(groups),
          tooltip: { trigger: 'item', formatter: function (it) {
            return esc(it.componentType === 'markArea' ? it.name : it.data.label);
          } } });
      }
      if (p.right) {
        series.push({ id: 'clip-' + r.id, name: name + ' clip', type: 'line', showSymbol: false,
          yAxisIndex: 1, data: pairs(c.step, c[p.right] || []), itemStyle: { color: col },
          lineStyle: { type: 'dotted', width: 1 } });
      }
    });
    return series;
  }

  function renderHeat() {
    var sel = document.getElementById('heat-run');
    var ids = S.runs.map(function (r) { return String(r.id); });
    if (Array.from(sel.options).map(function (o) { return o.value; }).join() !== ids.join()) {
      sel.textContent = '';
      S.runs.forEach(function (r) { sel.appendChild(el('option', { value: r.id, text: r.name || r.id })); });
    }
    if (S.heatRun === null || !runById(S.heatRun)) S.heatRun = S.runs.length ? S.runs[0].id : null;
    if (S.heatRun !== null) sel.value = String(S.heatRun);
    var h = S.heatRun === null ? null : S.hist[S.heatRun];
    var rk = h && h.ranks, m = S.heatMetric, meta = HEAT[m];
    var mat = (rk && rk[m]) || [], steps = (rk && rk.step) || [];
    var W = 0, data = [], lo = Infinity, hi = -Infinity;
    mat.forEach(function (row) { W = Math.max(W, (row || []).length); });
    mat.forEach(function (row, i) {
      (row || []).forEach(function (v, w) {
        if (v === null || !isFinite(v)) return;
        data.push([i, w, v]);
        lo = Math.min(lo, v);
        hi = Math.max(hi, v);
      });
    });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    var ranks = [];
    for (var w = 0; w < W; w++) ranks.push('rank ' + w);
    S.charts.heat.setOption({
      animation: false,
      grid: { left: 64, right: 90, top: 10, bottom: 40 },
      tooltip: { formatter: function (it) {
        return 'step ' + esc(steps[it.value[0]]) + ', rank ' + esc(it.value[1]) + '<br>' +
          esc(meta.label + ': ' + withUnit(it.value[2], meta.unit));
      } },
      xAxis: { type: 'category', data: steps.map(String), name: 'step' },
      yAxis: { type: 'category', data: ranks },
      visualMap: { min: lo, max: hi === lo ? lo + 1e-12 : hi, calculable: true, orient: 'vertical',
        right: 0, top: 'center', formatter: function (v) { return fmt(v); },
        inRange: { color: ['#f7fbff', '#6baed6', '#08306b'] } },
      series: [{ id: 'heat', name: meta.label, type: 'heatmap', data: data,
        progressive: data.length > 20000 ? 5000 : 0 }]
    }, { replaceMerge: ['series'] });
    renderBubble(S.heatRun === null ? null : runById(S.heatRun), h);
    var comm = h && h.comm, groups = (comm && comm.groups) || [], sec = (comm && comm.seconds) || [];
    var CW = 0;
    sec.forEach(function (row) { CW = Math.max(CW, (row || []).length); });
    var cranks = [];
    for (w = 0; w < CW; w++) cranks.push('rank ' + w);
    S.charts.comm.setOption({
      animation: false,
      grid: { left: 64, right: 24, top: 30, bottom: 30 },
      legend: { top: 0 },
      tooltip: { trigger: 'axis', valueFormatter: function (v) { return withUnit(v, 's/step'); } },
      xAxis: { type: 'category', data: cranks },
      yAxis: { type: 'value', name: 's', axisLabel: { formatter: fmt } },
      series: groups.map(function (g, i) {
        return { id: 'comm-' + g, name: g, type: 'bar', stack: 'comm', data: sec[i] || [] };
      })
    }, { replaceMerge: ['series'] });
  }

  /* The measured pipeline bubble of the rows a heat map holds from step
   * `from` on (the last segment's first: an earlier segment ran another
   * layout or schedule): per step the most idle rank's bubble_s over the
   * step's time (/steps/step_time), the median over the steps that have one
   * (hpt-metrics summary's figure); {value, steps}, value null when no step
   * has one (a file older than /ranks/pipeline_bubble). */
  function measuredBubble(rk, from) {
    var mat = (rk && rk.bubble_s) || [], st = (rk && rk.step_time) || [], r = [];
    var step = (rk && rk.step) || [];
    mat.forEach(function (row, i) {
      if (from && step[i] < from) return;
      var worst = -1;
      (row || []).forEach(function (v) { if (v !== null && isFinite(v) && v > worst) worst = v; });
      if (worst >= 0 && st[i] > 0) r.push(worst / st[i]);
    });
    r.sort(function (a, b) { return a - b; });
    var n = r.length, med = !n ? null : n % 2 ? r[(n - 1) / 2] : 0.5 * (r[n / 2 - 1] + r[n / 2]);
    return { value: med, steps: n };
  }

  function frac(v) { return String(Number(v.toPrecision(3))); }

  /* The line beside the heat map for a run whose last segment has PP > 1:
   * the measured bubble and the theory of the segment's own schedule (none
   * where the file predates bubble_theory). Hidden for PP 1. */
  function renderBubble(r, h) {
    var line = document.getElementById('bubble-line');
    var segs = (h && h.segments) || [], seg = segs.length ? segs[segs.length - 1] : null;
    var pp = seg ? seg.pp : r && r.layout ? r.layout.pp : 1;
    S.bubble = null;
    if (!r || !h || !(pp > 1)) {
      line.style.display = 'none';
      line.textContent = '';
      return;
    }
    var ga = (r.attrs || {}).grad_accum, m = measuredBubble(h.ranks, seg ? seg.step : 0);
    var th = seg && typeof seg.bubble_theory === 'number' ? seg.bubble_theory : null;
    var sched = seg && seg.pp_schedule ? SCHEDULE_LABEL[seg.pp_schedule] || seg.pp_schedule : null;
    if (sched && seg.pp_schedule === 'interleaved' && seg.pp_virtual) sched += ', V = ' + seg.pp_virtual;
    var text = 'pipeline bubble: ' + (m.value === null ? 'not recorded in this file'
      : frac(m.value) + ' of the step measured (the most idle stage\'s, median of ' + m.steps +
        ' step' + (m.steps === 1 ? '' : 's') + ')');
    if (th !== null)
      text += '; theory' + (sched ? ' (' + sched + ')' : '') + ': ' + frac(th) + ' of the step (PP ' +
        pp + (typeof ga === 'number' ? ', ' + ga + ' micro-batches' : '') + ')';
    line.textContent = text;
    line.style.display = '';
    line.setAttribute('data-run', r.id);
    S.bubble = { run: r.id, text: text, measured: m.value, steps: m.steps, theory: th,
      schedule: seg ? seg.pp_schedule : null };
  }

  /* Per run: the productive fraction, a bar of the parts, their seconds. */
  function renderGoodput() {
    var box = document.getElementById('goodput');
    box.textContent = '';
    S.runs.forEach(function (r) {
      var g = S.hist[r.id] ? S.hist[r.id].goodput : null;
      if (!g || !(g.wall > 0)) return;
      var pct = function (v) { return (100 * v / g.wall).toFixed(1) + ' %'; };
      var bar = el('div', { class: 'gp-bar' });
      var legend = el('ul', { class: 'gp-legend' });
      GOODPUT_PARTS.forEach(function (p) {
        var v = g[p.key];
        if (v === null || v === undefined) return;
        var w = Math.max(0, 100 * v / g.wall);
        bar.appendChild(el('span', { class: 'gp-part', 'data-part': p.key,
          style: 'width:' + w.toFixed(3) + '%;background:' + p.color,
          title: p.label + ': ' + fmt(v) + ' s (' + pct(v) + ')' }));
        legend.appendChild(el('li', { 'data-part': p.key, 'data-seconds': v }, [
          el('span', { class: 'dot', style: 'background:' + p.color }),
          document.createTextNode(p.label + ' ' + fmt(v) + ' s (' + pct(v) + ')' +
            (p.key === 'redone' ? ', ' + g.redone_steps + ' steps' : '') +
            (p.key === 'checkpoint' ? ', ' + g.saves + ' saves' : ''))
        ]));
      });
      box.appendChild(el('div', { class: 'gp-run', id: 'goodput-' + r.id,
        'data-run': r.id, 'data-fraction': g.fraction }, [
        el('div', { class: 'gp-head', text: (S.runs.length > 1 ? runLabel(r) + ': ' : '') +
          'goodput ' + (100 * g.fraction).toFixed(1) + ' % of ' + fmt(g.wall) + ' s (' +
          g.segments + ' segment' + (g.segments === 1 ? '' : 's') + ', ' + g.steps + ' steps)' }),
        bar, legend
      ]));
    });
    if (!box.childNodes.length) box.appendChild(el('div', { class: 'gp-none', text: 'no rows yet' }));
  }

  function renderStates() {
    var box = document.getElementById('states');
    box.textContent = '';
    S.runs.forEach(function (r) {
      var st = r.state || 'waiting';
      var text = runLabel(r) + ': ' + (STATE_LABEL[st] || st) + (r.error ? ': ' + r.error : '');
      var h = S.hist[r.id];
      var n = h ? h.columns.step.length : 0;
      if (n) text += ' — step ' + h.columns.step[n - 1];
      box.appendChild(el('div', { id: 'state-' + r.id, class: 'state state-' + st, 'data-state': st,
        text: text }));
    });
  }

  function renderAlerts() {
    var ul = document.getElementById('alerts');
    ul.textContent = '';
    S.alerts.slice().reverse().forEach(function (a) {
      var r = runById(a.run);
      ul.appendChild(el('li', { 'data-rule': a.rule, 'data-run': a.run, 'data-step': a.step,
        text: a.rule + ' — ' + (r ? r.name : 'run ' + a.run) + ', step ' + a.step + ', value ' +
          fmt(a.value) }));
    });
    var header = document.getElementById('header');
    var banner = document.getElementById('alert-banner');
    if (S.alerts.length) {
      var last = S.alerts[S.alerts.length - 1];
      header.classList.add('alerting');
      header.setAttribute('data-alert', last.rule);
      banner.textContent = 'ALERT ' + last.rule + ' at step ' + last.step +
        (S.alerts.length > 1 ? ' (+' + (S.alerts.length - 1) + ' more)' : '');
    } else {
      header.classList.remove('alerting');
      header.removeAttribute('data-alert');
      banner.textContent = '';
    }
  }

  /* One entry per event group (eventGroups), newest last occurrence first;
   * data-count and data-last-step say what a group holds. */
  function renderEvents() {
    var all = [];
    S.runs.forEach(function (r) {
      var h = S.hist[r.id];
      if (h) eventGroups(h.events).forEach(function (g, i) { all.push({ r: r, g: g, i: i }); });
    });
    all.sort(function (a, b) {
      var x = a.g.last, y = b.g.last;
      return (y.time || 0) - (x.time || 0) || y.step - x.step || b.i - a.i;
    });
    var ul = document.getElementById('events');
    ul.textContent = '';
    all.slice(0, 500).forEach(function (x) {
      var g = x.g, e = g.e, k = kindClass(e.kind);
      var li = el('li', { class: 'ev ev-' + k, 'data-kind': k, 'data-raw-kind': e.file_kind || e.kind,
        'data-run': x.r.id, 'data-step': e.step, 'data-last-step': g.last.step,
        'data-count': g.count });
      li.appendChild(el('span', { class: 'dot', style: 'background:' + KIND_COLOR[k] }));
      li.appendChild(document.createTextNode((S.runs.length > 1 ? x.r.name + ' · ' : '') +
        groupTitle(g) + (e.detail ? ': ' + e.detail : '')));
      ul.appendChild(li);
    });
  }

  /* ------------------------------------------------------ step timeline */

  function timelinePanel() {
    var runSel = el('select', { id: 'timeline-run' }), stepSel = el('select', { id: 'timeline-step' });
    runSel.addEventListener('change', function () { S.tlRun = Number(runSel.value); S.tlStep = null; render(); });
    stepSel.addEventListener('change', function () { S.tlStep = Number(stepSel.value); render(); });
    return el('section', { class: 'panel wide', 'data-panel': 'timeline', style: 'display:none' }, [
      el('h2', {}, [document.createTextNode('Step timeline (--trace-steps): run '), runSel,
        document.createTextNode(' step '), stepSel,
        el('span', { class: 'legend-note', text: ' forward blue, backward green, weight ' +
          'gradients (zb-h1\'s deferred W pass) dark green, data olive, optimizer orange, ' +
          'checkpoint purple; communication below; idle shaded red' })]),
      el('p', { class: 'legend-note', id: 'timeline-note' }),
      el('div', { class: 'chart tall', id: 'chart-timeline' })
    ]);
  }

  function setOptions(sel, values, labels) {
    if (Array.from(sel.options).map(function (o) { return o.value; }).join() === values.join()) return;
    sel.textContent = '';
    values.forEach(function (v, i) { sel.appendChild(el('option', { value: v, text: labels[i] })); });
  }

  /* One rectangle of the timeline: value [row, t0, t1, kind, ..., lane,
   * lanes] (kind 0 the step's extent, 1 compute, 2 communication: lane of
   * lanes, so that calls in flight together do not hide each other),
   * clipped to the grid. */
  function timelineItem(params, api) {
    var row = api.value(0), a = api.coord([api.value(1), row]), b = api.coord([api.value(2), row]);
    var h = api.size([0, 1])[1], kind = api.value(3), lanes = Math.max(1, api.value(9));
    var top = kind === 2 ? a[1] + 0.17 * h + api.value(8) * 0.22 * h / lanes : a[1] - 0.4 * h;
    var height = kind === 0 ? 0.8 * h : kind === 1 ? 0.55 * h : Math.max(1, 0.22 * h / lanes - 1);
    var cs = params.coordSys;
    var shape = echarts.graphic.clipRectByRect(
      { x: a[0], y: top, width: Math.max(b[0] - a[0], 1), height: height },
      { x: cs.x, y: cs.y, width: cs.width, height: cs.height });
    return shape && { type: 'rect', shape: shape, style: api.style() };
  }

  function renderTimeline() {
    var sec = document.querySelector('[data-panel="timeline"]');
    var runs = S.runs.filter(function (r) {
      var h = S.hist[r.id];
      return h && h.trace && h.trace.steps && (h.trace.steps.length || h.trace.truncated);
    });
    S.tlBars = 0;
    S.tlRows = 0;
    var shown = sec.style.display !== 'none';
    sec.style.display = runs.length ? '' : 'none';
    if (!runs.length) { S.tlRun = null; return; }
    if (!shown) S.charts.timeline.resize(); /* initialised while hidden: no width yet */
    if (S.tlRun === null || !runs.some(function (r) { return r.id === S.tlRun; })) S.tlRun = runs[0].id;
    setOptions(document.getElementById('timeline-run'), runs.map(function (r) { return String(r.id); }),
      runs.map(function (r) { return runLabel(r); }));
    document.getElementById('timeline-run').value = String(S.tlRun);
    var tr = S.hist[S.tlRun].trace, note = document.getElementById('timeline-note');
    if (S.tlStep === null || tr.steps.indexOf(S.tlStep) < 0) S.tlStep = tr.steps.length ? tr.steps[0] : null;
    var left = (tr.comm_left_out || {})[String(S.tlStep)];
    note.textContent = !tr.steps.length
      ? 'The traced steps have more spans than the page draws (100,000): open them with ' +
        'hpt-metrics trace RUN_DIR -o trace.json in Perfetto.'
      : left ? 'This step\'s ' + left + ' communication spans are left out (over the page\'s ' +
        '100,000 spans); hpt-metrics trace RUN_DIR -o trace.json has them.'
      : tr.truncated ? 'Later traced steps are left out (over the page\'s 100,000 spans); ' +
        'hpt-metrics trace has them.' : '';
    setOptions(document.getElementById('timeline-step'), tr.steps.map(String), tr.steps.map(String));
    document.getElementById('timeline-step').value = String(S.tlStep);
    var spans = tr.spans[String(S.tlStep)] || [], rows = {}, stage = {};
    spans.forEach(function (s) { rows[s[0]] = true; stage[s[0]] = s[1]; });
    var ranks = Object.keys(rows).map(Number).sort(function (a, b) { return a - b; });
    var at = {};
    ranks.forEach(function (r, i) { at[r] = i; });
    var data = [], laneEnd = {}, lanes = {};
    spans.slice().sort(function (x, y) { return x[5] - y[5]; }).forEach(function (s) {
      var stream = tr.streams[s[2]], name = tr.names[s[3]];
      var kind = stream === 'step' ? 0 : stream === 'compute' ? 1 : 2, lane = 0;
      if (kind === 2) { /* the first lane of the rank free by this span's start */
        var ends = laneEnd[s[0]] || (laneEnd[s[0]] = []);
        while (lane < ends.length && ends[lane] > s[5]) lane++;
        ends[lane] = s[6];
        lanes[s[0]] = Math.max(lanes[s[0]] || 1, lane + 1);
      }
      var color = kind === 0 ? TL_IDLE : kind === 1 ? (TL_COLOR[name] || '#607d8b')
        : (TL_COMM[stream] || '#999999');
      data.push({ value: [at[s[0]], s[5], s[6], kind, name, stream, s[4], s[7], lane, 1],
        itemStyle: { color: color } });
    });
    data.forEach(function (d) { d.value[9] = lanes[ranks[d.value[0]]] || 1; });
    data.sort(function (x, y) { return x.value[3] - y.value[3]; }); /* the step's extent first */
    S.tlBars = data.filter(function (d) { return d.value[3] > 0; }).length;
    S.tlRows = ranks.length;
    S.charts.timeline.setOption({
      animation: false,
      grid: { left: 130, right: 24, top: 10, bottom: 52 },
      tooltip: { formatter: function (it) {
        var v = it.value;
        return esc(v[4]) + (v[6] >= 0 ? ' (micro-batch ' + esc(v[6]) + ')' : '') + ' on ' +
          esc(v[5]) + '<br>' + esc(fmt(v[1])) + ' to ' + esc(fmt(v[2])) + ' ms (' +
          esc(fmt(v[2] - v[1])) + ' ms)' + (v[3] === 2 ? '<br>' + esc(fmt(v[7])) + ' bytes' : '');
      } },
      xAxis: { type: 'value', name: 'ms', min: 0, max: 'dataMax', axisLabel: { formatter: fmt } },
      yAxis: { type: 'category', inverse: true, data: ranks.map(function (r) {
        return 'rank ' + r + ' (stage ' + stage[r] + ')';
      }) },
      dataZoom: [{ type: 'inside', xAxisIndex: 0, filterMode: 'none' },
        { type: 'slider', xAxisIndex: 0, filterMode: 'none', height: 16, bottom: 4 }],
      series: [{ id: 'timeline', type: 'custom', renderItem: timelineItem, data: data,
        encode: { x: [1, 2], y: 0 } }]
    }, { replaceMerge: ['series'] });
  }

  function render() {
    if (S.renderTimer) { clearTimeout(S.renderTimer); S.renderTimer = null; }
    PANELS.forEach(function (p) {
      S.charts[p.id].setOption({ series: stepSeries(p) }, { replaceMerge: ['series'] });
    });
    renderHeat();
    renderTimeline();
    renderGoodput();
    renderStates();
    renderAlerts();
    renderEvents();
    document.getElementById('conn').textContent = S.conn;
    S.renders++;
    debug.ready = true;
  }

  function scheduleRender() {
    if (!S.renderTimer) S.renderTimer = setTimeout(render, 150);
  }

  /* ------------------------------------------------------------- modes */

  function startOffline() {
    var d = window.HPT_DATA;
    S.runs = (d.runs || []).slice();
    (d.history || []).forEach(function (h, i) {
      var id = S.runs[i] ? S.runs[i].id : i; /* history[i] belongs to runs[i] */
      setHistory(id, h);
    });
    render();
  }

  /* The run list and every run's history; resolves to the smallest "seq"
   * of the histories (the server's stream position they include), if any. */
  function loadRuns() {
    return getJSON('api/runs').then(function (d) {
      S.runs = d.runs || [];
      return Promise.all(S.runs.map(loadHistory));
    }).then(function (seqs) {
      seqs = seqs.filter(function (q) { return typeof q === 'number'; });
      return seqs.length ? Math.min.apply(null, seqs) : null;
    });
  }

  /* Live: each run's goodput again (its parts grow with the run). */
  function pollGoodput() {
    S.runs.forEach(function (r) {
      getJSON('api/goodput', { run: r.id }).then(function (d) {
        if (S.hist[r.id]) { S.hist[r.id].goodput = d.goodput; scheduleRender(); }
      }, function () { /* the next poll tries again */ });
    });
  }

  function loadHistory(r) {
    return getJSON('api/history', { run: r.id, points: POINTS }).then(function (h) {
      setHistory(r.id, h);
      return h.seq;
    });
  }

  /* The event stream; `from` (a history's seq) asks the server to replay
   * what came after that history, so no row falls between the two. */
  function openStream(from) {
    S.requests++;
    var es = new EventSource(url('api/stream', typeof from === 'number' ? { from: from } : {}));
    var broken = false;
    function on(name, f) {
      es.addEventListener(name, function (m) {
        try { f(JSON.parse(m.data)); } catch (err) { S.errors.push(name + ': ' + err.message); }
        scheduleRender();
      });
    }
    es.onopen = function () {
      S.conn = 'connected';
      if (broken) { broken = false; loadRuns().then(render, fail); } /* rows may have been missed */
      scheduleRender();
    };
    es.onerror = function () {
      broken = true;
      S.conn = 'connection lost, retrying';
      scheduleRender();
    };
    on('rows', function (d) { appendRows(d.run, d.columns || {}, d.ranks); if (d.comm) S.hist[d.run].comm = d.comm; });
    on('state', function (d) {
      var r = runById(d.run);
      if (!r) { loadRuns().then(render, fail); return; }
      r.state = d.state;
      r.error = d.error || null;
    });
    on('event', function (d) {
      addEvent(d.run, d);
      var r = runById(d.run);
      if (r && d.file_kind === 'trace') loadHistory(r).then(scheduleRender, fail); /* the new /trace */
    });
    on('alert', function (d) { addAlert(d.run, d, false); });
    on('segment', function (d) { addSegment(d.run, d); });
    on('history', function (d) { /* too many new rows to push: read the history again */
      var r = runById(d.run);
      if (r) loadHistory(r).then(scheduleRender, fail);
    });
    on('reset', function () { loadRuns().then(render, fail); }); /* the stream skipped records */
    S.stream = es;
  }

  function fail(err) {
    S.conn = 'error: ' + err.message;
    S.errors.push(err.message);
    if (document.getElementById('conn')) document.getElementById('conn').textContent = S.conn;
  }

  /* ------------------------------------------------------- test access */

  var debug = window.hptDebug = {
    ready: false,
    offline: OFFLINE,
    /* the values the page holds for a step column of a run */
    points: function (run, col) {
      var h = S.hist[run];
      return h && h.columns[col] ? h.columns[col].slice() : [];
    },
    /* a rank x step map the page holds ([step][rank]) and its steps */
    ranks: function (run, metric) {
      var h = S.hist[run];
      return h && h.ranks ? { step: (h.ranks.step || []).slice(), values: (h.ranks[metric] || []).slice() } : null;
    },
    /* points in the chart's series of a panel for a run (raw curve) */
    chartPoints: function (panel, run) {
      var s = S.charts[panel].getOption().series.filter(function (x) { return x.id === 'raw-' + run; })[0];
      return s ? s.data.length : -1;
    },
    /* the step timeline: rectangles drawn (compute and communication spans,
     * not the steps' extents), rank rows, the run and step shown */
    timeline: function () {
      return { bars: S.tlBars, rows: S.tlRows, run: S.tlRun, step: S.tlStep,
        note: document.getElementById('timeline-note').textContent,
        steps: S.tlRun === null ? [] : S.hist[S.tlRun].trace.steps.slice(),
        visible: document.querySelector('[data-panel="timeline"]').style.display !== 'none' };
    },
    showTimeline: function (run, step) { S.tlRun = run; S.tlStep = step; render(); },
    /* the pipeline bubble line beside the heat map (null: not shown) */
    bubble: function () {
      var line = document.getElementById('bubble-line');
      return S.bubble && line.style.display !== 'none' ? JSON.parse(JSON.stringify(S.bubble)) : null;
    },
    heatCells: function () {
      var s = S.charts.heat.getOption().series[0];
      return s ? s.data.length : 0;
    },
    comm: function (run) { return S.hist[run] && S.hist[run].comm ? JSON.parse(JSON.stringify(S.hist[run].comm)) : null; },
    runs: function () { return JSON.parse(JSON.stringify(S.runs)); },
    events: function (run) { return S.hist[run] ? S.hist[run].events.slice() : []; },
    /* the run's event groups: file kind, rank, first and last step, count */
    eventGroups: function (run) {
      return S.hist[run] ? eventGroups(S.hist[run].events).map(function (g) {
        return { kind: g.e.file_kind || g.e.kind, rank: g.e.rank, step: g.e.step,
          last: g.last.step, count: g.count };
      }) : [];
    },
    /* the loss chart's shaded spans of a run ([from, to] in steps) and its markers' steps */
    eventMarks: function (run) {
      var s = S.charts.loss.getOption().series.filter(function (x) { return x.id === 'ev-' + run; })[0];
      if (!s) return null;
      return { spans: ((s.markArea && s.markArea.data) || []).map(function (a) { return [a[0].xAxis, a[1].xAxis]; }),
        markers: s.data.map(function (d) { return d.value[0]; }) };
    },
    /* the goodput held for a run and what its panel shows */
    goodput: function (run) {
      var g = S.hist[run] ? S.hist[run].goodput : null, e = document.getElementById('goodput-' + run);
      return { held: g ? JSON.parse(JSON.stringify(g)) : null, text: e ? e.textContent : null,
        parts: e ? Array.from(e.querySelectorAll('.gp-part')).map(function (p) {
          return p.getAttribute('data-part'); }) : [] };
    },
    segments: function (run) { return S.hist[run] ? S.hist[run].segments.slice() : []; },
    alerts: function () { return S.alerts.map(function (a) { return { run: a.run, rule: a.rule, step: a.step, value: a.value }; }); },
    state: function (run) { var r = runById(run); return r ? r.state : null; },
    conn: function () { return S.conn; },
    requests: function () { return S.requests; },
    renders: function () { return S.renders; },
    errors: function () { return S.errors.slice(); },
    render: render
  };

  function start() {
    buildDom();
    if (OFFLINE) { startOffline(); return; }
    setInterval(pollGoodput, GOODPUT_MS);
    loadRuns().then(function (seq) { render(); openStream(seq); }, function (err) {
      fail(err);
      render();
    });
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
