// Opens the built page (dist/) in Debian's Chromium against a running Tidings, clicks the bell so the list opens,
// waits for the notifications to render and saves a PNG.
//
//   node screenshot.mjs OUT.png --application-identifier ID --subscriber-id ID
//        [--api-url http://127.0.0.1:3000] [--subscriber-hash HEX] [--expect N]
//
// Each flag may instead come from the environment: TIDINGS_URL, TIDINGS_APPLICATION_IDENTIFIER,
// TIDINGS_SUBSCRIBER_ID, TIDINGS_SUBSCRIBER_HASH. --expect waits until at least N notifications are listed
// (default 1). The browser is /usr/bin/chromium (apt-get install -y chromium); this script never downloads one.
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { serveDist } from './serve.mjs';

const CHROMIUM = '/usr/bin/chromium';
const here = fileURLToPath(new URL('.', import.meta.url));

function fail(message) {
  console.error(`screenshot: ${message}`);
  process.exit(1);
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'api-url': { type: 'string', default: process.env.TIDINGS_URL || 'http://127.0.0.1:3000' },
    'application-identifier': { type: 'string', default: process.env.TIDINGS_APPLICATION_IDENTIFIER },
    'subscriber-id': { type: 'string', default: process.env.TIDINGS_SUBSCRIBER_ID },
    'subscriber-hash': { type: 'string', default: process.env.TIDINGS_SUBSCRIBER_HASH },
    expect: { type: 'string', default: '1' },
    timeout: { type: 'string', default: '20' },
  },
});
const out = positionals[0];
if (!out) fail('usage: node screenshot.mjs OUT.png --application-identifier ID --subscriber-id ID [--api-url URL]');
if (!values['application-identifier']) fail('--application-identifier (or TIDINGS_APPLICATION_IDENTIFIER) is required');
if (!values['subscriber-id']) fail('--subscriber-id (or TIDINGS_SUBSCRIBER_ID) is required');
if (!existsSync(CHROMIUM)) {
  fail(`${CHROMIUM} is missing. Install Debian's Chromium first: apt-get install -y chromium ` +
    '(this script never downloads a browser of its own).');
}
if (!existsSync(join(here, 'dist', 'index.html'))) fail('dist/index.html is missing: run `npm run build` first.');
const expected = Number(values.expect);
// The session token is a credential: keep it out of the log.
const redact = (text) => text.replace(/token=[^&\s']+/g, 'token=…');
const timeout = Number(values.timeout) * 1000;

const { chromium } = await import('playwright-core');
const site = await serveDist({ port: 0 });
const profile = await mkdtemp(join(tmpdir(), 'tidings-inbox-chromium-'));
let context;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
    viewport: { width: 880, height: 720 },
    deviceScaleFactor: 2,
    colorScheme: 'light',
    locale: 'en-US',
    timezoneId: 'UTC',
  });
  const page = context.pages()[0] ?? (await context.newPage());

  // What the page asked of the server, to tell a server fault from a page fault.
  const apiOrigin = new URL(values['api-url']).origin;
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') console.error(`[page ${msg.type()}] ${redact(msg.text())}`);
  });
  page.on('pageerror', (err) => console.error(`[page exception] ${err.message}`));
  page.on('requestfailed', (req) => {
    if (req.url().startsWith(apiOrigin)) console.error(`[request failed] ${req.method()} ${req.url()}: ${req.failure()?.errorText}`);
  });
  page.on('response', (res) => {
    const req = res.request();
    if (req.url().startsWith(apiOrigin) && req.method() !== 'OPTIONS') {
      console.error(`[api] ${req.method()} ${decodeURIComponent(req.url().slice(apiOrigin.length))} -> ${res.status()}`);
    }
  });
  page.on('websocket', (ws) => {
    console.error(`[socket] open ${redact(ws.url())}`);
    ws.on('close', () => console.error('[socket] closed'));
  });

  const query = new URLSearchParams({
    apiUrl: values['api-url'],
    applicationIdentifier: values['application-identifier'],
    subscriberId: values['subscriber-id'],
  });
  if (values['subscriber-hash']) query.set('subscriberHash', values['subscriber-hash']);
  await page.goto(`${site.url}?${query}`);

  // The page shows how the session went (src/main.js).
  const status = page.locator('#status');
  await page.waitForFunction(() => document.getElementById('status').dataset.state !== 'starting', null, { timeout });
  if ((await status.getAttribute('data-state')) !== 'ready') {
    await page.screenshot({ path: resolve(out) });
    fail(`the Inbox session did not start: ${await status.textContent()} (page saved to ${out})`);
  }

  // The bell is the Inbox's popover trigger; clicking it opens the notification list.
  const bell = page.locator('#inbox .nv-inboxBellButton, #inbox .nv-popoverTrigger').first();
  await bell.waitFor({ timeout });
  await bell.click();
  const items = page.locator('.nv-notification');
  try {
    await page.waitForFunction(
      (n) => document.querySelectorAll('.nv-notification').length >= n,
      expected,
      { timeout },
    );
  } catch {
    await page.screenshot({ path: resolve(out) });
    fail(`the list showed ${await items.count()} notification(s), expected at least ${expected} (page saved to ${out})`);
  }
  // Let fonts, the unread counter and the list's entrance animation settle.
  await page.waitForLoadState('networkidle', { timeout: 5000 }).catch(() => {});
  await page.waitForTimeout(800);
  await page.screenshot({ path: resolve(out) });
  console.log(`saved ${out}: ${await items.count()} notification(s) listed`);
} finally {
  await context?.close();
  site.close();
  await rm(profile, { recursive: true, force: true });
}
