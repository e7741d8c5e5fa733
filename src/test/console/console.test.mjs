// The admin console in a real headless Chromium against the packaged service.
//
// Starts target/quarkus-app/quarkus-run.jar with no database (embedded PostgreSQL, seeded `demo`
// namespace), opens a boot epoch through the public protocol, and checks that what the page
// shows is what the admin API says at that moment, and that the page follows changes by itself.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium } from 'playwright-core';
import { Service, TARGET } from './service.mjs';

const ADMIN_TOKEN = 'console-test-admin-token';
const DEPLOYMENT = 'console-test-rev-1';
const BATCH_RUNS = 100;
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const SCREENSHOT = join(TARGET, 'console-screenshot.png');

// Settings that keep the seeded state still while the page is compared with the API: the test
// does not heartbeat, so leases must outlast it; no sweep may open an epoch of its own.
const QUIET = {
  ROLLCALL_LEASE_TTL: '10m',
  ROLLCALL_BATCH_LEASE: '10m',
  ROLLCALL_SWEEP_INTERVAL: 'off',
};

/** Resolves within ms, or rejects naming what did not finish. */
function within(ms, what, promise) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, fail) => {
      timer = setTimeout(() => fail(new Error(`${what}: not done within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** The number an element shows ("1,000" → 1000; "–" → null). */
async function shown(page, testid) {
  const text = (await page.getByTestId(testid).textContent({ timeout: 5000 })).trim();
  if (text === '–') return null;
  const n = Number(text.replace(/,/g, ''));
  assert.ok(Number.isFinite(n), `${testid} shows "${text}", not a number`);
  return n;
}

/** Waits for `count` more completed refreshes of the page than it has now. */
async function refreshes(page, count = 2, timeout = 15_000) {
  const seq = Number(await page.evaluate(() => document.body.dataset.refreshSeq));
  await page.waitForFunction((n) => Number(document.body.dataset.refreshSeq) >= n, seq + count, { timeout });
}

/** The figures of an epoch as the admin API returns them, in the shape the page is read into. */
function apiFigures(epoch, namespace) {
  return {
    runsScanned: epoch.runsScanned,
    handedOut: epoch.runs.handedOut,
    enqueued: epoch.runs.enqueued,
    failed: epoch.runs.failed,
    deferred: epoch.runs.deferred,
    skipped: epoch.runs.skipped,
    batchesTotal: epoch.batches.total,
    batchesReady: epoch.batches.ready,
    batchesLeased: epoch.batches.leased,
    batchesCompleted: epoch.batches.completed,
    batchesAbandoned: epoch.batches.abandoned,
    batchesExpired: epoch.batches.expired,
    handedOutByReason: Object.fromEntries(Object.entries(epoch.handedOutByReason || {}).filter(([, n]) => n > 0)),
    claimers: Object.fromEntries((epoch.claimers || []).map((c) => [c.instanceId, { batches: c.batches, runs: c.runs }])),
    instancesLive: namespace.instances.live,
    instancesDead: namespace.instances.dead,
    openEpochs: namespace.openEpochs,
  };
}

/** The same figures as the page shows them. */
async function pageFigures(page, epoch) {
  const e = `epoch-${epoch.id}`;
  const byReason = {};
  for (const reason of Object.keys(epoch.handedOutByReason || {})) {
    if (epoch.handedOutByReason[reason] > 0) byReason[reason] = await shown(page, `${e}-handed-out-${reason}`);
  }
  const claimers = {};
  for (const c of epoch.claimers || []) {
    claimers[c.instanceId] = {
      batches: await shown(page, `${e}-claimer-${c.instanceId}-batches`),
      runs: await shown(page, `${e}-claimer-${c.instanceId}-runs`),
    };
  }
  return {
    runsScanned: await shown(page, `${e}-runs-scanned`),
    handedOut: await shown(page, `${e}-handed-out`),
    enqueued: await shown(page, `${e}-enqueued`),
    failed: await shown(page, `${e}-failed`),
    deferred: await shown(page, `${e}-deferred`),
    skipped: await shown(page, `${e}-skipped`),
    batchesTotal: await shown(page, `${e}-batches-total`),
    batchesReady: await shown(page, `${e}-batches-ready`),
    batchesLeased: await shown(page, `${e}-batches-leased`),
    batchesCompleted: await shown(page, `${e}-batches-completed`),
    batchesAbandoned: await shown(page, `${e}-batches-abandoned`),
    batchesExpired: await shown(page, `${e}-batches-expired`),
    handedOutByReason: byReason,
    claimers,
    instancesLive: await shown(page, 'ns-demo-live'),
    instancesDead: await shown(page, 'ns-demo-dead'),
    openEpochs: await shown(page, 'ns-demo-open-epochs'),
  };
}

/**
 * Compares the page with the admin API at one moment: the API is read, the page is given two
 * refreshes that started after that read, and the API is read again to prove nothing moved.
 */
async function assertPageMatchesApi(page, service, epochId) {
  const epoch = await service.admin(`epochs/${epochId}`);
  const demo = (await service.admin('namespaces')).items.find((n) => n.name === 'demo');
  await refreshes(page, 2);
  const onPage = await pageFigures(page, epoch);
  const epochAgain = await service.admin(`epochs/${epochId}`);
  const demoAgain = (await service.admin('namespaces')).items.find((n) => n.name === 'demo');
  const expected = apiFigures(epoch, demo);
  assert.deepEqual(apiFigures(epochAgain, demoAgain), expected, 'the state moved while it was compared');
  assert.deepEqual(onPage, expected, 'the page shows what GET /admin/epochs/{id} and /admin/namespaces return');
  return expected;
}

describe('admin console', { timeout: 300_000 }, () => {
  let service;
  let context;
  let page;
  let userDataDir;
  let instances;
  let epochId;
  let enqueuedRun; // a run of a completed batch
  const held = []; // [instance, batch] leased and not completed yet
  const pageErrors = [];

  before(async () => {
    assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}: install Debian's (apt-get install -y chromium)`);
    service = await Service.start({ adminToken: ADMIN_TOKEN, extraEnv: QUIET });

    // Two replicas of one deploy share its boot epoch: 5 batches of 100 runs handed out,
    // 3 completed, 2 left leased.
    instances = [await service.register('web-1', DEPLOYMENT), await service.register('web-2', DEPLOYMENT)];
    const [a, b] = instances;
    const claimed = [];
    for (const who of [a, b, a, b, a]) claimed.push([who, await service.claimBatch(who, BATCH_RUNS)]);
    epochId = claimed[0][1].epochId;
    for (const [, batch] of claimed) assert.equal(batch.epochId, epochId, 'one deploy, one boot epoch');
    for (const [who, batch] of claimed.slice(0, 3)) await service.complete(who, batch);
    enqueuedRun = claimed[0][1].runs[0].runId;
    held.push(...claimed.slice(3));

    userDataDir = mkdtempSync(join(tmpdir(), 'rollcall-console-chromium-'));
    context = await within(
      60_000,
      'launching Chromium',
      chromium.launchPersistentContext(userDataDir, {
        executablePath: CHROMIUM,
        headless: true,
        args: [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
        viewport: { width: 1280, height: 900 },
      }),
    );
    page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(10_000);
    page.on('pageerror', (e) => pageErrors.push(e.message));
  });

  after(async () => {
    // Each step bounded: a hung browser never keeps the service alive, and the service is
    // always stopped.
    if (context) await within(20_000, 'closing Chromium', context.close()).catch((e) => console.error(e.message));
    if (service) await within(40_000, 'stopping the service', service.stop()).catch((e) => console.error(e.message));
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  });

  it('refuses a wrong token with a banner and asks again', async () => {
    const res = await page.goto(`${service.base}/console/`);
    assert.equal(res.status(), 200, 'the service serves the console at /console/');
    await page.getByLabel('Admin token').fill('not-the-admin-token');
    await page.getByTestId('sign-in').click();
    const banner = page.getByTestId('banner');
    await banner.waitFor({ state: 'visible', timeout: 10_000 });
    assert.match(await banner.textContent(), /refused the admin token \((401|403)/);
    assert.ok(await page.getByTestId('token-input').isVisible(), 'the token is asked for again');
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'a refused token is not kept');
  });

  it('shows the numbers the admin API returns', async () => {
    await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
    await page.getByTestId('sign-in').click();
    await page.getByTestId(`epoch-${epochId}`).waitFor({ timeout: 15_000 });
    assert.ok(await page.getByTestId('banner').isHidden(), 'no error banner once signed in');
    assert.equal(await page.getByTestId(`epoch-${epochId}-state`).textContent(), 'open');
    assert.equal(await page.getByTestId(`epoch-${epochId}-kind`).textContent(), 'boot');

    const figures = await assertPageMatchesApi(page, service, epochId);
    // And the API agrees with what was done to it.
    assert.equal(figures.handedOut, 5 * BATCH_RUNS);
    assert.equal(figures.enqueued, 3 * BATCH_RUNS);
    assert.equal(figures.batchesCompleted, 3);
    assert.equal(figures.batchesLeased, 2);
    assert.equal(figures.instancesLive, 2);

    // Both instances listed as live, first.
    const rows = page.getByTestId('instances').locator('tbody tr');
    for (const [i, instance] of instances.entries()) {
      assert.equal(await page.getByTestId(`instance-${instance.instanceId}-state`).textContent(), 'live');
      assert.equal(await rows.nth(i).getAttribute('class'), 'live');
    }
    assert.equal(await page.getByTestId('ns-demo-boot-recovery').getAttribute('aria-checked'), 'true');
    assert.equal(await page.getByTestId('ns-demo-last-boot-id').textContent(), `#${epochId}`);
  });

  it('follows a completed batch by itself', async (t) => {
    const before = await shown(page, `epoch-${epochId}-enqueued`);
    const [who, batch] = held.shift();
    const done = await service.complete(who, batch);
    const t0 = Date.now();
    await page.waitForFunction(
      ([testid, n]) => document.querySelector(`[data-testid="${testid}"]`)?.dataset.value === String(n),
      [`epoch-${epochId}-enqueued`, before + done.enqueued],
      { timeout: 6000 },
    );
    const tookMs = Date.now() - t0;
    t.diagnostic(`the page showed the completed batch ${tookMs} ms after it was completed`);
    const figures = await assertPageMatchesApi(page, service, epochId);
    assert.equal(figures.batchesCompleted, 4);
    assert.equal(figures.batchesLeased, 1);
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
  });

  it("unfolds an epoch's batches and looks up a run's ledger", async () => {
    const batches = (await service.admin(`epochs/${epochId}/batches?limit=500`)).items;
    await page.locator(`#epoch-${epochId} details.batch-list summary`).click();
    const table = page.getByTestId(`epoch-${epochId}-batches`).locator('table');
    await table.waitFor({ timeout: 5000 });
    assert.equal(await table.locator('tbody tr').count(), batches.length);
    // Still unfolded, and still right, after the page redrew itself.
    await refreshes(page, 1);
    assert.equal(await page.getByTestId(`epoch-${epochId}-batches`).locator('tbody tr').count(), batches.length);

    const ledger = (await service.admin(`runs/${encodeURIComponent(enqueuedRun)}?namespace=demo`)).ledger;
    assert.ok(ledger.some((row) => row.outcome === 'enqueued'), 'the API knows the run was enqueued');
    await page.getByLabel('Run id').fill(enqueuedRun);
    await page.getByTestId('lookup-submit').click();
    const result = page.getByTestId('lookup-result');
    await result.locator('table').waitFor({ timeout: 5000 });
    assert.equal(await result.locator('table tbody tr').count(), ledger.length);
    assert.match(await result.textContent(), /enqueued/);
  });

  it('pauses while the tab is hidden and resumes when it shows', async () => {
    const setHidden = (hidden) =>
      page.evaluate((h) => {
        Object.defineProperty(document, 'hidden', { configurable: true, get: () => h });
        Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => (h ? 'hidden' : 'visible') });
        document.dispatchEvent(new Event('visibilitychange'));
      }, hidden);
    await refreshes(page, 1);
    await setHidden(true);
    await sleep(300); // a refresh already on its way may still land
    const seq = await page.evaluate(() => document.body.dataset.refreshSeq);
    await sleep(4500);
    assert.equal(await page.evaluate(() => document.body.dataset.refreshSeq), seq, 'no refresh while hidden');
    assert.match(await page.getByTestId('refresh-status').textContent(), /Paused/);
    await setHidden(false);
    await refreshes(page, 1, 3000);
    assert.match(await page.getByTestId('refresh-status').textContent(), /Live/);
  });

  it('asks before every operator action, then shows its outcome', async () => {
    const dialog = page.getByTestId('confirm');
    const demo = async () => (await service.admin('namespaces')).items.find((n) => n.name === 'demo');
    const confirm = async (button) => {
      await dialog.waitFor({ state: 'visible' });
      await page.getByTestId(button).click();
      await dialog.waitFor({ state: 'hidden' });
    };

    // Boot recovery: cancelled changes nothing; confirmed switches it off, then on again.
    const toggle = page.getByTestId('ns-demo-boot-recovery');
    await toggle.click();
    await confirm('confirm-cancel');
    assert.equal((await demo()).bootRecovery, true, 'a cancelled switch changes nothing');
    await toggle.click();
    await confirm('confirm-ok');
    await page.waitForSelector('[data-testid="ns-demo-boot-recovery"][aria-checked="false"]', { timeout: 5000 });
    assert.equal((await demo()).bootRecovery, false);
    await page.getByTestId('ns-demo-boot-recovery').click();
    await confirm('confirm-ok');
    await page.waitForSelector('[data-testid="ns-demo-boot-recovery"][aria-checked="true"]', { timeout: 5000 });
    assert.equal((await demo()).bootRecovery, true);

    // A manual pass opens and gets its card; a second one while it is open is refused, and the
    // refusal is shown.
    await page.getByTestId('ns-demo-manual-pass').click();
    await confirm('confirm-ok');
    await page.getByTestId('notice').filter({ hasText: 'Manual pass' }).waitFor({ timeout: 5000 }); // answered
    const manual = (await service.admin('epochs?namespace=demo&kind=manual&state=open')).items;
    assert.equal(manual.length, 1, 'one manual pass is open');
    await page.getByTestId(`epoch-${manual[0].id}`).waitFor({ timeout: 5000 });
    assert.equal(await page.getByTestId(`epoch-${manual[0].id}-kind`).textContent(), 'manual');
    assert.match(await page.getByTestId('notice').textContent(), new RegExp(`Manual pass #${manual[0].id} started`));
    await page.getByTestId('notice').evaluate((el) => (el.hidden = true));
    await page.getByTestId('ns-demo-manual-pass').click();
    await confirm('confirm-ok');
    await page.getByTestId('banner').waitFor({ state: 'visible', timeout: 5000 });
    assert.match(await page.getByTestId('banner').textContent(), /409.*already open/);
    assert.equal(await shown(page, 'ns-demo-open-epochs'), (await demo()).openEpochs);

    // Evicting web-2 fences it: the page lists it as dead, after the live one.
    const victim = instances[1];
    await page.getByTestId(`instance-${victim.instanceId}-evict`).click();
    await confirm('confirm-ok');
    await page.waitForFunction(
      (testid) => document.querySelector(`[data-testid="${testid}"]`)?.textContent === 'dead',
      `instance-${victim.instanceId}-state`,
      { timeout: 5000 },
    );
    const evicted = (await service.admin('instances?namespace=demo&state=dead')).items;
    assert.deepEqual(evicted.map((i) => i.id), [victim.instanceId]);
    const rows = page.getByTestId('instances').locator('tbody tr');
    assert.equal(await rows.nth(0).getAttribute('data-testid'), `instance-${instances[0].instanceId}`);
    assert.equal(await rows.nth(1).getAttribute('data-testid'), `instance-${victim.instanceId}`);
    await refreshes(page, 2);
    const now = await demo();
    assert.deepEqual(
      [await shown(page, 'ns-demo-live'), await shown(page, 'ns-demo-dead')],
      [now.instances.live, now.instances.dead],
    );
    assert.deepEqual([now.instances.live, now.instances.dead], [1, 1]);
    // The fullest picture of the page: a boot pass under way, a manual pass, a dead instance.
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
  });

  it('plots the last hour with the figures the timeline API returns', async () => {
    await refreshes(page, 2);
    const chart = page.getByTestId('timeline-chart');
    await chart.waitFor({ timeout: 5000 });
    const minutes = (await service.admin('timeline')).minutes;
    const api = {
      handedOut: minutes.reduce((t, m) => t + m.handedOut, 0),
      deaths: minutes.reduce((t, m) => t + m.deaths, 0),
      openPasses: minutes[minutes.length - 1].openPasses,
    };
    // What was done so far: 500 runs handed out, web-2 evicted, the boot and manual passes open.
    assert.ok(api.handedOut >= 5 * BATCH_RUNS, `handed out ${api.handedOut}`);
    assert.equal(api.deaths, 1);
    assert.ok(api.openPasses >= 2, `open now ${api.openPasses}`);
    assert.deepEqual(
      {
        handedOut: await shown(page, 'timeline-handed-out'),
        deaths: await shown(page, 'timeline-deaths'),
        openPasses: await shown(page, 'timeline-open-passes'),
      },
      api,
    );
    // Drawn, not only counted: a bar for each minute with hand-outs, a dot for the death, and
    // the open passes' line.
    const withHandOuts = minutes.filter((m) => m.handedOut > 0).length;
    assert.equal(await page.getByTestId('timeline-row-handedOut').locator('rect').count(), withHandOuts);
    assert.equal(
      await page.getByTestId('timeline-row-deaths').locator('circle').count(),
      minutes.filter((m) => m.deaths > 0).length,
    );
    assert.equal(await page.getByTestId('timeline-row-openPasses').locator('polyline').count(), 1);
    const box = await chart.boundingBox();
    assert.ok(box.width > 300 && box.height > 100, `the chart is ${box.width}×${box.height}`);
    // The busiest minute's bar fills its row (a fourth of the chart), as drawn, not only as written.
    const heights = await page
      .getByTestId('timeline-row-handedOut')
      .locator('rect')
      .evaluateAll((bars) => bars.map((b) => b.getBoundingClientRect().height));
    assert.ok(Math.max(...heights) > 0.18 * box.height, `bars ${heights} in a chart ${box.height} high`);
    await page.getByTestId('timeline').screenshot({ path: join(TARGET, 'console-screenshot-chart.png') });
  });

  it('fits a phone-sized screen without sideways scrolling', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await refreshes(page, 1);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 390, `the page is ${width} px wide at a 390 px viewport`);
    assert.ok(await page.getByTestId('ns-demo-live').isVisible());
    await page.screenshot({ path: join(TARGET, 'console-screenshot-narrow.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('closes an open pass after asking', async () => {
    const manual = (await service.admin('epochs?namespace=demo&kind=manual&state=open')).items;
    assert.equal(manual.length, 1, 'the manual pass is still open');
    const id = manual[0].id;
    const dialog = page.getByTestId('confirm');
    await page.getByTestId(`epoch-${id}-close`).click();
    await dialog.waitFor({ state: 'visible' });
    await page.getByTestId('confirm-ok').click();
    await dialog.waitFor({ state: 'hidden' });
    await page.getByTestId('notice').filter({ hasText: `Pass #${id} closed` }).waitFor({ timeout: 5000 });
    const closed = await service.admin(`epochs/${id}`);
    assert.equal(closed.state, 'closed');
    assert.equal(closed.closeReason, 'closed-by-operator');
  });

  it('shows a banner, not a blank page, when the service is gone', async () => {
    await service.stop();
    const banner = page.getByTestId('banner');
    await banner.waitFor({ state: 'visible', timeout: 15_000 });
    assert.match(await banner.textContent(), /Cannot reach the service/);
    assert.ok(await page.getByTestId(`epoch-${epochId}`).isVisible(), 'the last figures stay on the page');
    await page.screenshot({ path: join(TARGET, 'console-screenshot-offline.png') });
    assert.deepEqual(pageErrors, [], 'no script error on the page');
  });

  it('signs out', async () => {
    await page.getByTestId('sign-out').click();
    assert.ok(await page.getByTestId('token-input').isVisible());
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  });
});
