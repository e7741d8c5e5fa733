// Rollcall console: reads the admin API every 2 s and draws namespaces, epochs and instances.
// Plain browser JavaScript, no build step. Every figure on the page comes from one refresh, so
// the numbers of a card always belong together.
'use strict';

(() => {
  const REFRESH_MS = 2000;
  const REQUEST_TIMEOUT_MS = 8000;
  const CLOSED_EPOCHS_SHOWN = 5;
  const ENDED_INSTANCES_SHOWN = 20;
  const PAGE_LIMIT = 100;
  const MAX_PAGES = 10;
  const TOKEN_KEY = 'rollcall.adminToken';
  // The admin API lives beside the console: /console/ -> /admin/ (also under a path prefix).
  const API = new URL('../admin/', location.href);

  const $ = (id) => document.getElementById(id);
  const numberFormat = new Intl.NumberFormat('en-US');

  let token = sessionStorage.getItem(TOKEN_KEY);
  let timer = null;
  let refreshing = false;
  let refreshSeq = 0;
  let lastGood = null; // {at: Date, data}
  let serverSkewMs = 0; // server clock minus ours, from the Date header
  const openDetails = new Set(); // epoch ids whose batch list is unfolded
  const instanceNames = new Map(); // instance id -> name, from the last refresh
  const batchCache = new Map(); // epoch id -> last batch list drawn, so a redraw does not flicker

  // ---------------------------------------------------------------------------------------------
  // DOM helpers

  /** h('td', {class: 'num', dataset: {testid: 'x'}}, 'text', child…) */
  function h(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  /** An SVG element, as {@link h} makes HTML ones. */
  function svg(tag, attrs, ...children) {
    return build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
  }

  function build(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k === 'testid') el.dataset.testid = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  /** Replaces a container's children, keeping keyboard focus on the same control if it is redrawn. */
  function replace(container, ...children) {
    const active = document.activeElement;
    const focusedId = active && container.contains(active) ? active.dataset.testid : null;
    container.replaceChildren(...children.flat().filter(Boolean));
    if (focusedId) {
      const again = container.querySelector(`[data-testid="${CSS.escape(focusedId)}"]`);
      if (again) again.focus();
    }
  }

  /** Names every cell after its column, for the stacked layout of narrow screens. */
  function labelCells(tbody) {
    const heads = [...tbody.closest('table').tHead.rows[0].cells].map((c) => c.textContent.trim());
    for (const row of tbody.rows) {
      [...row.cells].forEach((cell, i) => {
        if (heads[i] && !cell.hasAttribute('colspan')) cell.dataset.label = heads[i];
      });
    }
  }

  const fmt = (n) => (n === null || n === undefined ? '–' : numberFormat.format(n));
  const slug = (s) => String(s).toLowerCase().replace(/[^a-z0-9_-]+/g, '-');

  function num(testid, n) {
    return h('span', { class: 'n', testid, dataset: { value: n ?? '' } }, fmt(n));
  }

  function serverNow() {
    return Date.now() + serverSkewMs;
  }

  function duration(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return '–';
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return `${s} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${s % 60} s`;
    const hrs = Math.floor(m / 60);
    if (hrs < 48) return `${hrs} h ${m % 60} min`;
    return `${Math.floor(hrs / 24)} d ${hrs % 24} h`;
  }

  function time(iso, text) {
    if (!iso) return h('span', { class: 'muted' }, '–');
    const d = new Date(iso);
    return h('time', { datetime: iso, title: d.toLocaleString() }, text ?? d.toLocaleTimeString());
  }

  function ago(iso) {
    if (!iso) return h('span', { class: 'muted' }, '–');
    return time(iso, `${duration(serverNow() - Date.parse(iso))} ago`);
  }

  function until(iso) {
    if (!iso) return h('span', { class: 'muted' }, '–');
    const left = Date.parse(iso) - serverNow();
    return left >= 0 ? time(iso, `in ${duration(left)}`) : time(iso, `expired ${duration(-left)} ago`);
  }

  function badge(text, kind, testid) {
    return h('span', { class: `badge ${kind || slug(text)}`, testid }, text);
  }

  // ---------------------------------------------------------------------------------------------
  // The admin API

  class ApiError extends Error {
    constructor(status, problem, message) {
      super(message);
      this.status = status; // 0: the service could not be reached
      this.problem = problem;
    }
  }

  async function api(path, { method = 'GET', body } = {}) {
    const controller = new AbortController();
    const timeout = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    const headers = { Authorization: `Bearer ${token}`, Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(new URL(path, API), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
        credentials: 'omit',
        signal: controller.signal,
      });
    } catch (e) {
      const why = e.name === 'AbortError' ? `no answer within ${REQUEST_TIMEOUT_MS / 1000} s` : e.message;
      throw new ApiError(0, null, `Cannot reach the service (${why}).`);
    } finally {
      clearTimeout(timeout);
    }
    const date = res.headers.get('Date');
    if (date) {
      const skew = Date.parse(date) - Date.now();
      // The header has whole seconds: only a larger difference is a real clock skew.
      serverSkewMs = Math.abs(skew) > 1500 ? skew : 0;
    }
    if (!res.ok) {
      let problem = null;
      try {
        problem = await res.json();
      } catch (_) {
        /* not JSON */
      }
      const what = problem && (problem.detail || problem.title);
      throw new ApiError(res.status, problem, `The service answered ${res.status}${what ? `: ${what}` : ''}.`);
    }
    if (res.status === 204) return null;
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }

  /** Every item of a list, following nextCursor (at most MAX_PAGES pages). */
  async function list(path, params = {}, maxPages = MAX_PAGES) {
    const items = [];
    let cursor = null;
    for (let page = 0; page < maxPages; page++) {
      const q = new URLSearchParams({ limit: params.limit ?? PAGE_LIMIT });
      for (const [k, v] of Object.entries(params)) if (k !== 'limit' && v !== undefined) q.set(k, v);
      if (cursor) q.set('cursor', cursor);
      const body = await api(`${path}?${q}`);
      items.push(...(body.items || []));
      cursor = body.nextCursor;
      if (!cursor) return { items, more: false };
    }
    return { items, more: true };
  }

  async function load() {
    const [namespaces, open, closed, live, dead, left, timeline] = await Promise.all([
      list('namespaces'),
      list('epochs', { state: 'open' }),
      // Lists come newest first: one short page is the last few closed passes.
      list('epochs', { state: 'closed', limit: CLOSED_EPOCHS_SHOWN }, 1),
      list('instances', { state: 'live' }),
      list('instances', { state: 'dead', limit: ENDED_INSTANCES_SHOWN }, 1),
      list('instances', { state: 'left', limit: ENDED_INSTANCES_SHOWN }, 1),
      api('timeline'),
    ]);
    return { namespaces, open, closed, live, dead, left, timeline };
  }

  // ---------------------------------------------------------------------------------------------
  // Refresh loop: one refresh at a time, every REFRESH_MS, paused while the tab is hidden.

  function schedule(ms = REFRESH_MS) {
    clearTimeout(timer);
    timer = null;
    if (token && !document.hidden) timer = setTimeout(refresh, ms);
  }

  async function refresh() {
    clearTimeout(timer);
    timer = null;
    if (!token || refreshing) return;
    if (document.hidden) {
      setStatus('Paused while the tab is hidden');
      return;
    }
    refreshing = true;
    try {
      const data = await load();
      lastGood = { at: new Date(), data };
      render(data);
      if ($('banner').dataset.kind !== 'action') hideBanner();
      refreshSeq++;
      setStatus(`Live · updated ${lastGood.at.toLocaleTimeString()}`, 'ok');
    } catch (e) {
      failed(e);
    } finally {
      refreshing = false;
      document.body.dataset.refreshSeq = String(refreshSeq);
      $('refresh-status').dataset.refreshSeq = String(refreshSeq);
      schedule();
    }
  }

  function failed(e) {
    if (!(e instanceof ApiError)) {
      console.error(e);
      showBanner(`The page could not show the answer: ${e.message}`);
      return;
    }
    if (e.status === 401 || e.status === 403) {
      const what = e.status === 401 ? '401 Unauthorized' : '403 Forbidden';
      const detail = e.problem && e.problem.detail ? `: ${e.problem.detail}` : '';
      signOut();
      showBanner(`The service refused the admin token (${what}${detail}). Enter the token again.`, 'auth');
      return;
    }
    const stale = lastGood ? ` The figures below are from ${lastGood.at.toLocaleTimeString()}.` : '';
    if (e.status === 0) {
      showBanner(`${e.message} Retrying every ${REFRESH_MS / 1000} s.${stale}`, 'network');
      setStatus('Offline · retrying', 'bad');
    } else if (e.status === 404) {
      showBanner(`This service has no admin API here (404 at ${API.pathname}).${stale}`, 'http');
      setStatus('Admin API missing', 'bad');
    } else {
      showBanner(`${e.message} Retrying every ${REFRESH_MS / 1000} s.${stale}`, 'http');
      setStatus(`Error ${e.status} · retrying`, 'bad');
    }
  }

  function setStatus(text, kind) {
    const el = $('refresh-status');
    el.textContent = text;
    el.className = `refresh ${kind || ''}`;
  }

  let bannerTimer = null;

  /**
   * An error over the page. A refresh that works clears an error of the refresh itself; the
   * refusal of an operator's action stays until dismissed, or for 15 s.
   */
  function showBanner(text, kind = 'error') {
    const el = $('banner');
    clearTimeout(bannerTimer);
    el.dataset.kind = kind;
    if (kind === 'action') {
      el.replaceChildren(
        h('span', {}, text),
        h('button', { type: 'button', class: 'dismiss', 'aria-label': 'Dismiss', testid: 'banner-dismiss', onclick: hideBanner }, '×'),
      );
      bannerTimer = setTimeout(hideBanner, 15_000);
    } else {
      el.textContent = text;
    }
    el.hidden = false;
  }

  function hideBanner() {
    clearTimeout(bannerTimer);
    $('banner').hidden = true;
    $('banner').textContent = '';
    delete $('banner').dataset.kind;
  }

  let noticeTimer = null;
  function notice(text) {
    const el = $('notice');
    el.textContent = text;
    el.hidden = false;
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => (el.hidden = true), 8000);
  }

  // ---------------------------------------------------------------------------------------------
  // Rendering

  function render(d) {
    const names = instanceNames;
    for (const i of [...d.live.items, ...d.dead.items, ...d.left.items]) names.set(i.id, i.name);
    renderNamespaces(d.namespaces.items);
    renderTimeline(d.timeline.minutes);
    renderEpochs(d.open.items, d.closed.items, names);
    renderInstances(d);
    renderLookupNamespaces(d.namespaces.items);
  }

  // ---------------------------------------------------------------------------------------------
  // The last hour: three rows of one minute each (GET /admin/timeline), drawn as inline SVG.

  const CHART = { width: 720, label: 150, row: 46, gap: 10 };

  /**
   * Hand-outs per minute (bars), passes open (a step line) and deaths (a dot per minute with any,
   * its title the longest detection time), oldest minute on the left, this minute on the right.
   * Each row is scaled to its own largest value, written at its right end.
   */
  function renderTimeline(minutes) {
    const n = minutes.length;
    const plot = CHART.width - CHART.label - 50;
    const step = plot / Math.max(1, n);
    const x = (i) => CHART.label + i * step;
    const clock = (iso) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
    const rows = [
      { key: 'handedOut', label: 'Hand-outs / min', kind: 'bars' },
      { key: 'openPasses', label: 'Open passes', kind: 'steps' },
      { key: 'deaths', label: 'Deaths · detection', kind: 'dots' },
    ];
    const totals = {
      handedOut: minutes.reduce((t, m) => t + m.handedOut, 0),
      deaths: minutes.reduce((t, m) => t + m.deaths, 0),
      openPasses: n ? minutes[n - 1].openPasses : 0,
    };
    const detections = minutes.map((m) => m.detectionMs).filter((v) => v !== null && v !== undefined);
    const drawn = rows.map((row, r) => {
      const top = r * (CHART.row + CHART.gap);
      const base = top + CHART.row;
      const max = Math.max(1, ...minutes.map((m) => m[row.key]));
      const y = (v) => base - (v / max) * (CHART.row - 4);
      const marks = [];
      if (row.kind === 'bars') {
        minutes.forEach((m, i) => {
          if (!m.handedOut) return;
          marks.push(
            svg(
              'rect',
              { class: 'tl-bar', x: x(i) + 1, y: y(m.handedOut), width: Math.max(1, step - 2), height: base - y(m.handedOut) },
              svg('title', {}, `${clock(m.at)}: ${fmt(m.handedOut)} handed out`),
            ),
          );
        });
      } else if (row.kind === 'steps') {
        const points = minutes.flatMap((m, i) => [`${x(i)},${y(m.openPasses)}`, `${x(i) + step},${y(m.openPasses)}`]);
        marks.push(svg('polyline', { class: 'tl-steps', points: points.join(' ') }));
      } else {
        minutes.forEach((m, i) => {
          if (!m.deaths) return;
          const detected = m.detectionMs === null || m.detectionMs === undefined ? '' : `, detected within ${duration(m.detectionMs)}`;
          marks.push(
            svg(
              'circle',
              { class: 'tl-death', cx: x(i) + step / 2, cy: top + CHART.row / 2, r: Math.min(9, 3 + m.deaths) },
              svg('title', {}, `${clock(m.at)}: ${m.deaths} declared dead${detected}`),
            ),
          );
        });
      }
      const right =
        row.kind === 'dots'
          ? detections.length
            ? `≤ ${duration(Math.max(...detections))}`
            : ''
          : fmt(Math.max(...minutes.map((m) => m[row.key]), 0));
      return svg(
        'g',
        { class: 'tl-row', testid: `timeline-row-${row.key}` },
        svg('text', { class: 'tl-label', x: 0, y: top + CHART.row / 2 + 4 }, row.label),
        svg('line', { class: 'tl-axis', x1: CHART.label, x2: CHART.label + plot, y1: base, y2: base }),
        marks,
        svg('text', { class: 'tl-max', x: CHART.label + plot + 6, y: top + 12 }, right),
      );
    });
    const height = rows.length * (CHART.row + CHART.gap) + 14;
    const axis = n
      ? [
          svg('text', { class: 'tl-tick', x: CHART.label, y: height - 2 }, clock(minutes[0].at)),
          svg('text', { class: 'tl-tick tl-end', x: CHART.label + plot, y: height - 2 }, 'now'),
        ]
      : [];
    const chart = svg(
      'svg',
      {
        viewBox: `0 0 ${CHART.width} ${height}`,
        role: 'img',
        'aria-label': `Last hour: ${totals.handedOut} runs handed out, ${totals.deaths} deaths, ${totals.openPasses} passes open now`,
        testid: 'timeline-chart',
      },
      drawn,
      axis,
    );
    chart.dataset.handedOut = String(totals.handedOut);
    chart.dataset.deaths = String(totals.deaths);
    chart.dataset.openPasses = String(totals.openPasses);
    replace(
      $('timeline'),
      h(
        'p',
        { class: 'legend' },
        num('timeline-handed-out', totals.handedOut),
        ' runs handed out · ',
        num('timeline-deaths', totals.deaths),
        ' deaths · ',
        num('timeline-open-passes', totals.openPasses),
        ' passes open now',
      ),
      chart,
    );
  }

  function renderNamespaces(items) {
    const rows = items.map((ns) => {
      const id = `ns-${slug(ns.name)}`;
      const inst = ns.instances || {};
      const boot = ns.lastBootEpoch;
      const on = !!ns.bootRecovery;
      return h(
        'tr',
        { testid: id },
        h('th', { scope: 'row' }, ns.name),
        h('td', {}, h('span', { class: 'kind' }, ns.sourceKind), ' ', h('code', { class: 'source' }, ns.source)),
        h(
          'td',
          {},
          h(
            'button',
            {
              type: 'button',
              role: 'switch',
              class: `switch ${on ? 'on' : 'off'}`,
              'aria-checked': String(on),
              'aria-label': `Boot recovery for ${ns.name}`,
              testid: `${id}-boot-recovery`,
              dataset: { value: on ? 'on' : 'off' },
              onclick: () => toggleBootRecovery(ns.name, !on),
            },
            h('span', { class: 'knob', 'aria-hidden': 'true' }),
            on ? 'on' : 'off',
          ),
        ),
        h('td', { class: 'num' }, num(`${id}-live`, inst.live)),
        h('td', { class: 'num' }, num(`${id}-dead`, inst.dead)),
        h('td', { class: 'num' }, num(`${id}-left`, inst.left)),
        h('td', { class: 'num' }, num(`${id}-open-epochs`, ns.openEpochs)),
        h(
          'td',
          { testid: `${id}-last-boot` },
          boot
            ? [
                h('a', { href: `#epoch-${boot.id}`, testid: `${id}-last-boot-id` }, `#${boot.id}`),
                ' ',
                badge(boot.state, null, `${id}-last-boot-state`),
                ' ',
                h('span', { class: 'muted' }, boot.deploymentId),
                h('br'),
                h('small', { class: 'muted' }, boot.closedAt ? ['closed ', ago(boot.closedAt)] : ['opened ', ago(boot.createdAt)]),
              ]
            : h('span', { class: 'muted' }, 'none yet'),
        ),
        h(
          'td',
          { class: 'actions' },
          h(
            'button',
            { type: 'button', testid: `${id}-manual-pass`, onclick: () => startManualPass(ns.name) },
            'Start manual pass',
          ),
        ),
      );
    });
    if (!rows.length) rows.push(emptyRow(9, 'No namespaces are configured.'));
    replace($('namespaces-body'), rows);
    labelCells($('namespaces-body'));
  }

  function emptyRow(span, text) {
    return h('tr', {}, h('td', { colspan: span, class: 'empty' }, text));
  }

  function renderEpochs(open, closed, names) {
    open = [...open].sort((a, b) => a.id - b.id);
    closed = [...closed].sort((a, b) => b.id - a.id).slice(0, CLOSED_EPOCHS_SHOWN);
    $('open-count').textContent = `(${open.length})`;
    replace($('open-epochs'), open.length ? open.map((e) => epochCard(e, names)) : h('p', { class: 'empty' }, 'No recovery pass is running.'));
    replace($('closed-epochs'), closed.length ? closed.map((e) => epochCard(e, names)) : h('p', { class: 'empty' }, 'No pass has closed yet.'));
  }

  function epochCard(e, names) {
    const id = `epoch-${e.id}`;
    const runs = e.runs || {};
    const b = e.batches || {};
    const done = (b.completed || 0) + (b.abandoned || 0);
    const total = b.total || 0;
    const pct = total ? Math.round((100 * done) / total) : e.state === 'closed' ? 100 : 0;
    // While the scan still cuts batches the total is not known yet: the batches cut so far fill
    // only part of the bar, and the striped rest stands for what the scan has not reached.
    const scanning = e.state === 'open' && !e.scanDone;
    const scale = scanning ? 0.8 : 1;
    const seg = (key, n) =>
      n > 0 ? h('span', { class: `seg ${key}`, style: `width:${(100 * scale * n) / total}%`, title: `${fmt(n)} ${key}` }) : null;
    const subject =
      e.kind === 'boot'
        ? ['deploy ', h('code', {}, e.deploymentId)]
        : e.subjectInstanceId
          ? ['instance ', h('code', { title: e.subjectInstanceId }, names.get(e.subjectInstanceId) || short(e.subjectInstanceId))]
          : [];
    const elapsed = e.durationMs ?? (e.createdAt ? serverNow() - Date.parse(e.createdAt) : null);
    const progressLabel = scanning
      ? total
        ? `${fmt(done)} of the ${fmt(total)} batches cut so far done; the scan goes on`
        : 'no batch cut yet: the scan starts with the next claim'
      : total
        ? `${fmt(done)} of ${fmt(total)} batches done`
        : 'nothing to hand out';

    return h(
      'article',
      { class: `epoch ${e.state}`, id, testid: id, 'aria-labelledby': `${id}-title`, dataset: { state: e.state } },
      h(
        'header',
        {},
        h(
          'h3',
          { id: `${id}-title` },
          badge(e.kind, `kind-${slug(e.kind)}`, `${id}-kind`),
          ' ',
          h('span', {}, `#${e.id}`),
          ' ',
          h('span', { class: 'ns', testid: `${id}-namespace` }, e.namespace),
        ),
        h(
          'p',
          { class: 'meta' },
          badge(e.state, null, `${id}-state`),
          e.closeReason ? [' ', h('span', { class: 'muted', testid: `${id}-close-reason` }, e.closeReason)] : null,
          subject.length ? [' · ', ...subject] : null,
          ' · ',
          e.state === 'open' ? ['open for ', duration(elapsed)] : ['took ', duration(elapsed), ' · closed ', ago(e.closedAt)],
          e.state === 'open'
            ? [' ', h('button', { type: 'button', class: 'danger', testid: `${id}-close`, onclick: () => closeEpoch(e) }, 'Close')]
            : null,
        ),
      ),
      h(
        'div',
        { class: 'progress' },
        h(
          'div',
          {
            class: `bar ${scanning ? 'scanning' : ''}`,
            role: 'progressbar',
            'aria-valuemin': 0,
            'aria-valuemax': 100,
            'aria-valuenow': scanning ? null : pct,
            'aria-valuetext': progressLabel,
            'aria-label': `Epoch ${e.id} progress`,
            testid: `${id}-progress`,
          },
          total ? [seg('completed', b.completed), seg('abandoned', b.abandoned), seg('leased', b.leased), seg('ready', b.ready)] : null,
        ),
        h('p', { class: 'bar-label' }, h('strong', {}, scanning ? 'Scanning' : total ? `${pct} %` : e.state === 'closed' ? 'Done' : '0 %'), ' · ', progressLabel),
      ),
      h(
        'div',
        { class: 'figures' },
        stats('Runs', [
          ['scanned', 'runs-scanned', e.runsScanned],
          ['handed out', 'handed-out', runs.handedOut],
          ['enqueued', 'enqueued', runs.enqueued],
          ['failed', 'failed', runs.failed, 'warn'],
          ['deferred', 'deferred', runs.deferred],
          ['skipped', 'skipped', runs.skipped],
          ['to re-check', 'pending-recheck', runs.pendingRecheck],
        ], id),
        stats('Batches', [
          ['total', 'batches-total', b.total],
          ['ready', 'batches-ready', b.ready],
          ['leased', 'batches-leased', b.leased],
          ['completed', 'batches-completed', b.completed],
          ['abandoned', 'batches-abandoned', b.abandoned, 'warn'],
          ['lease expired', 'batches-expired', b.expired, 'warn'],
        ], id),
      ),
      h(
        'div',
        { class: 'reasons' },
        reasons('Handed out by reason', e.handedOutByReason, `${id}-handed-out`),
        reasons('Skipped by reason', e.skippedByReason, `${id}-skipped`),
      ),
      claimers(e, names, id),
      batchesDetails(e, id),
    );
  }

  function stats(title, rows, id) {
    return h(
      'div',
      { class: 'stats' },
      h('h4', {}, title),
      h(
        'dl',
        {},
        rows.map(([label, key, n, warn]) =>
          h('div', { class: `stat ${warn && n > 0 ? 'warn' : ''}` }, h('dt', { title: label }, label), h('dd', {}, num(`${id}-${key}`, n))),
        ),
      ),
    );
  }

  function reasons(title, byReason, prefix) {
    const entries = Object.entries(byReason || {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
    return h(
      'div',
      { class: 'reason-group' },
      h('h4', {}, title),
      entries.length
        ? h(
            'ul',
            { class: 'chips' },
            entries.map(([reason, n]) =>
              h('li', { class: `chip reason-${slug(reason)}` }, h('span', { class: 'label' }, reason), num(`${prefix}-${slug(reason)}`, n)),
            ),
          )
        : h('p', { class: 'muted small' }, 'none'),
    );
  }

  function claimers(e, names, id) {
    const list = e.claimers || [];
    if (!list.length) return h('p', { class: 'muted small claimers-none' }, 'No claimer yet.');
    return h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'grid small', testid: `${id}-claimers` },
        h('caption', {}, 'Claimers'),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Instance'), h('th', { scope: 'col', class: 'num' }, 'Batches'), h('th', { scope: 'col', class: 'num' }, 'Runs'))),
        h(
          'tbody',
          {},
          list.map((c) =>
            h(
              'tr',
              { testid: `${id}-claimer-${c.instanceId}` },
              h('th', { scope: 'row' }, h('span', { title: c.instanceId }, names.get(c.instanceId) || short(c.instanceId))),
              h('td', { class: 'num' }, num(`${id}-claimer-${c.instanceId}-batches`, c.batches)),
              h('td', { class: 'num' }, num(`${id}-claimer-${c.instanceId}-runs`, c.runs)),
            ),
          ),
        ),
      ),
    );
  }

  /** A fold with the epoch's batches, read when unfolded and on every refresh while it stays so. */
  function batchesDetails(e, id) {
    const body = h('div', { class: 'batches', testid: `${id}-batches` }, batchCache.get(e.id) || h('p', { class: 'muted small' }, 'Loading…'));
    const details = h('details', { class: 'batch-list' }, h('summary', {}, 'Batches'), body);
    if (openDetails.has(e.id)) {
      details.open = true;
      loadBatches(e.id, body);
    }
    details.addEventListener('toggle', () => {
      if (details.open) {
        openDetails.add(e.id);
        loadBatches(e.id, body);
      } else {
        openDetails.delete(e.id);
        batchCache.delete(e.id);
      }
    });
    return details;
  }

  async function loadBatches(epochId, body) {
    try {
      const { items, more } = await list(`epochs/${epochId}/batches`, {}, 1);
      const drawn = [batchTable(items, epochId), more ? h('p', { class: 'muted small' }, `First ${items.length} shown.`) : null].filter(Boolean);
      batchCache.set(epochId, drawn);
      replace(body, drawn);
    } catch (e) {
      replace(body, h('p', { class: 'error small' }, e.message));
    }
  }

  function renderInstances(d) {
    const live = [...d.live.items].sort(byNamespaceThenName);
    const ended = [...d.dead.items, ...d.left.items]
      .sort((a, b) => String(b.endedAt || '').localeCompare(String(a.endedAt || '')))
      .slice(0, ENDED_INSTANCES_SHOWN);
    const rows = [...live, ...ended].map((i) => {
      const id = `instance-${i.id}`;
      return h(
        'tr',
        { testid: id, class: i.state },
        h('td', {}, i.namespace),
        h('th', { scope: 'row' }, h('span', { title: i.id }, i.name)),
        h('td', {}, h('code', {}, i.deploymentId)),
        h('td', {}, badge(i.state, null, `${id}-state`), i.endReason ? [' ', h('small', { class: 'muted' }, i.endReason)] : null),
        h('td', { testid: `${id}-heartbeat` }, ago(i.lastHeartbeatAt)),
        h('td', { testid: `${id}-lease` }, i.state === 'live' ? until(i.leaseExpiresAt) : i.endedAt ? ['ended ', ago(i.endedAt)] : '–'),
        h('td', { class: 'num' }, num(`${id}-in-flight`, i.inFlight)),
        h(
          'td',
          { class: 'actions' },
          i.state === 'live'
            ? h('button', { type: 'button', class: 'danger', testid: `${id}-evict`, onclick: () => evict(i) }, 'Evict')
            : null,
        ),
      );
    });
    if (!rows.length) rows.push(emptyRow(8, 'No instance has registered.'));
    replace($('instances-body'), rows);
    labelCells($('instances-body'));
    const counts = $('instances-count');
    counts.textContent = `(${live.length} live)`;
    counts.dataset.live = String(live.length);
    const note = [];
    if (d.live.more) note.push(`Only the first ${fmt(d.live.items.length)} live instances are shown.`);
    const endedTotal = d.dead.items.length + d.left.items.length;
    if (d.dead.more || d.left.more || endedTotal > ended.length) note.push('Older dead and departed instances are not shown.');
    $('instances-note').textContent = note.join(' ');
    $('instances-note').hidden = !note.length;
  }

  function byNamespaceThenName(a, b) {
    return a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name) || a.id.localeCompare(b.id);
  }

  const short = (uuid) => (uuid ? String(uuid).slice(0, 8) : '–');

  /** An instance by name (its id on hover), or the start of its id when its name is not known. */
  function instance(id) {
    if (!id) return h('span', { class: 'muted' }, '–');
    return h('span', { title: id }, instanceNames.get(id) || short(id));
  }

  function smallTable(testid, heads, rows, emptyText) {
    if (!rows.length) return h('p', { class: 'muted small' }, emptyText);
    return h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        { class: 'grid small', testid },
        h('thead', {}, h('tr', {}, heads.map(([label, cls]) => h('th', { scope: 'col', class: cls }, label)))),
        h('tbody', {}, rows),
      ),
    );
  }

  function batchTable(items, epochId) {
    return smallTable(
      `epoch-${epochId}-batch-table`,
      [['Batch'], ['State'], ['Runs', 'num'], ['Fence', 'num'], ['Attempts', 'num'], ['Claimer'], ['Lease / completed'], ['Retry of']],
      items.map((b) =>
        h(
          'tr',
          { testid: `batch-${b.id}` },
          h('th', { scope: 'row' }, `#${b.id}`),
          h('td', {}, badge(b.state, `batch-${slug(b.state)}`)),
          h('td', { class: 'num' }, fmt(b.runCount)),
          h('td', { class: 'num' }, fmt(b.fence)),
          h('td', { class: 'num' }, fmt(b.attempts)),
          h('td', {}, instance(b.claimerId)),
          h('td', {}, b.state === 'leased' ? until(b.leaseExpiresAt) : b.completedAt ? time(b.completedAt) : h('span', { class: 'muted' }, '–')),
          h('td', {}, b.retryOf ? `#${b.retryOf}` : h('span', { class: 'muted' }, '–')),
        ),
      ),
      'No batch has been cut yet.',
    );
  }

  function runLedger(r) {
    return h(
      'div',
      { class: 'run-ledger' },
      h(
        'p',
        {},
        h('code', {}, r.runId),
        ' in ',
        h('strong', {}, r.namespace),
        ' · ',
        r.owner
          ? ['run by ', instance(r.owner.instanceId), ' (reported ', ago(r.owner.since), ')']
          : h('span', { class: 'muted' }, 'no live instance reports it in flight'),
      ),
      smallTable(
        'run-ledger',
        [['Recorded'], ['Epoch'], ['Batch'], ['Fence', 'num'], ['Instance'], ['Reason'], ['Outcome'], ['Detail'], ['Resolved']],
        (r.ledger || []).map((l) =>
          h(
            'tr',
            {},
            h('td', {}, time(l.recordedAt)),
            h('td', {}, h('a', { href: `#epoch-${l.epochId}` }, `#${l.epochId}`), ' ', h('span', { class: 'muted' }, l.epochKind)),
            h('td', {}, l.batchId ? `#${l.batchId}` : h('span', { class: 'muted' }, '–')),
            h('td', { class: 'num' }, fmt(l.fence)),
            h('td', {}, instance(l.instanceId)),
            h('td', {}, l.reason),
            h('td', {}, badge(l.outcome, `outcome-${slug(l.outcome)}`)),
            h('td', {}, l.detail || h('span', { class: 'muted' }, '–')),
            h('td', {}, time(l.resolvedAt)),
          ),
        ),
        'No pass has handed out, deferred or skipped this run.',
      ),
    );
  }

  function renderLookupNamespaces(items) {
    const select = $('lookup-namespace');
    const want = items.map((n) => n.name);
    const have = [...select.options].map((o) => o.value);
    if (want.join('\n') === have.join('\n')) return;
    const current = select.value;
    select.replaceChildren(...want.map((n) => h('option', { value: n }, n)));
    if (want.includes(current)) select.value = current;
  }

  async function lookUpRun(ev) {
    ev.preventDefault();
    const ns = $('lookup-namespace').value;
    const run = $('lookup-run').value.trim();
    const out = $('lookup-result');
    if (!run) return;
    replace(out, h('p', { class: 'muted small' }, 'Looking up…'));
    try {
      const body = await api(`runs/${encodeURIComponent(run)}?${new URLSearchParams({ namespace: ns })}`);
      replace(out, runLedger(body));
    } catch (e) {
      if (e.status === 401 || e.status === 403) return failed(e);
      replace(out, h('p', { class: 'error small' }, e.status === 404 ? `No run ${run} is known in ${ns}.` : e.message));
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Actions: each one asks first, then refreshes at once.

  function confirmAction(title, text, okLabel) {
    const dialog = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = okLabel;
    dialog.returnValue = '';
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
      dialog.showModal();
    });
  }

  async function act(what, call) {
    try {
      const result = await call();
      if ($('banner').dataset.kind === 'action') hideBanner();
      notice(what(result));
    } catch (e) {
      if (e.status === 401 || e.status === 403) return failed(e);
      showBanner(e.message, 'action');
    }
    refresh();
  }

  async function startManualPass(namespace) {
    const ok = await confirmAction(
      `Start a manual pass over ${namespace}?`,
      'Every active run of the namespace is scanned and handed out to its live instances, as a boot pass would.',
      'Start pass',
    );
    if (!ok) return;
    act(
      (epoch) => `Manual pass${epoch && epoch.id ? ` #${epoch.id}` : ''} started for ${namespace}.`,
      () => api('epochs', { method: 'POST', body: { namespace, kind: 'manual' } }),
    );
  }

  async function closeEpoch(epoch) {
    const ok = await confirmAction(
      `Close ${epoch.kind} pass #${epoch.id} of ${epoch.namespace}?`,
      'Nothing more is handed out in it: its ready and leased batches are given up (a holder may still complete its batch).',
      'Close pass',
    );
    if (!ok) return;
    act(
      () => `Pass #${epoch.id} closed.`,
      () => api(`epochs/${encodeURIComponent(epoch.id)}/close`, { method: 'POST' }),
    );
  }

  async function toggleBootRecovery(namespace, bootRecovery) {
    const ok = await confirmAction(
      `Turn boot recovery ${bootRecovery ? 'on' : 'off'} for ${namespace}?`,
      bootRecovery
        ? 'The next deploy that claims opens a boot pass again.'
        : 'New deploys will no longer open a boot pass; takeovers of dead instances and sweeps go on.',
      bootRecovery ? 'Turn on' : 'Turn off',
    );
    if (!ok) return;
    act(
      () => `Boot recovery is ${bootRecovery ? 'on' : 'off'} for ${namespace}.`,
      () => api(`namespaces/${encodeURIComponent(namespace)}/recovery`, { method: 'PUT', body: { bootRecovery } }),
    );
  }

  async function evict(instance) {
    const ok = await confirmAction(
      `Evict ${instance.name}?`,
      `Instance ${instance.id} of ${instance.namespace} is fenced at once (its next call gets 410) and its runs are taken over by its peers.`,
      'Evict',
    );
    if (!ok) return;
    act(
      () => `${instance.name} was evicted.`,
      () => api(`instances/${encodeURIComponent(instance.id)}/evict`, { method: 'POST' }),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Signing in and out

  function showSignedIn() {
    $('sign-in-section').hidden = true;
    $('dashboard').hidden = false;
    $('sign-out').hidden = false;
  }

  function signOut() {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    clearTimeout(timer);
    timer = null;
    lastGood = null;
    $('dashboard').hidden = true;
    $('sign-out').hidden = true;
    $('sign-in-section').hidden = false;
    $('token-input').value = '';
    setStatus('Not signed in');
    $('token-input').focus();
  }

  function start() {
    $('sign-in').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const value = $('token-input').value.trim();
      if (!value) return;
      token = value;
      sessionStorage.setItem(TOKEN_KEY, token);
      $('token-input').value = '';
      hideBanner();
      showSignedIn();
      setStatus('Loading…');
      refresh();
    });
    $('sign-out').addEventListener('click', (ev) => {
      ev.preventDefault();
      signOut();
      hideBanner();
    });
    $('run-lookup').addEventListener('submit', lookUpRun);
    document.addEventListener('visibilitychange', () => {
      if (document.hidden) {
        clearTimeout(timer);
        timer = null;
        if (token) setStatus('Paused while the tab is hidden');
      } else if (token) {
        refresh();
      }
    });
    document.body.dataset.refreshSeq = '0';
    if (token) {
      showSignedIn();
      setStatus('Loading…');
      refresh();
    } else {
      signOut();
    }
  }

  start();
})();
