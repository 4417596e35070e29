// The browser half of the end-to-end test (run by run-e2e.sh): headless Debian Chromium, driven by
// playwright-core (which never downloads a browser), against code-server at $CS_URL.
//
// Checks, on brrr_trace/data/workloads.py and the item_in_loop H200 trace:
//   - the status-bar item names the trace and the GPU utilization;
//   - line 108 `loss = (x @ w).sum()` ends with an inlay hint that says compute-bound,
//     line 109 `total += loss.item()` one that says overhead-bound;
//   - a hover on line 109 gives the evidence, and the host-sync diagnostic is in the Problems panel;
//   - clicking the status-bar item shows the summary;
//   - a changed brrr-trace.threshold reaches the running server (line 109's hint goes);
//   - setting brrr-trace.interpreter to a Python without brrr_trace ($NO_BRRR_PYTHON) restarts
//     the server there: an error that offers the install command, and the status bar says so.
// Writes PNGs to $OUT, and the README's screenshot to $SCREENSHOT.
import { chromium } from 'playwright-core';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const OUT = process.env.OUT ?? '.';
const E = {
  file: 'workloads.py',
  trace: 'item_in_loop.pt.trace.json.gz',
  computeLine: 108,
  overheadLine: 109,
  rule: 'host-sync',
  ...JSON.parse(process.env.E2E_EXPECT ?? '{}'),
};
const started = Date.now();
const step = (what) => console.log(`e2e: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'chromium-profile-'));
const context = await chromium.launchPersistentContext(profile, { // the profile goes here, never in args
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1440, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const page = context.pages()[0] ?? await context.newPage();
const shot = (name) => page.screenshot({ path: path.join(OUT, `${name}.png`) });
const keys = async (...combos) => { for (const combo of combos) await page.keyboard.press(combo); };

/** Wait until an element matching `selector` has text (NBSP read as space) matching `pattern`. */
const waitText = (selector, pattern, timeout = 30_000) => page.waitForFunction(
  ([s, source, flags]) => [...document.querySelectorAll(s)]
    .some((e) => new RegExp(source, flags).test(e.textContent.replace(/\u00a0/g, ' '))),
  [selector, pattern.source, pattern.flags], { timeout });

/** The rendered text of editor line `n` (1-based) with its inlay hints, once it is on screen. */
const lineText = (n) => page.evaluate((number) => {
  const editor = document.querySelector('.editor-instance .monaco-editor') ?? document.querySelector('.monaco-editor');
  const numbers = [...editor.querySelectorAll('.margin-view-overlays .line-numbers')];
  const label = numbers.find((e) => e.textContent.trim() === String(number));
  if (!label) return null;
  const top = label.getBoundingClientRect().top;
  const row = [...editor.querySelectorAll('.view-lines .view-line')]
    .find((e) => Math.abs(e.getBoundingClientRect().top - top) < 2);
  return row ? row.textContent.replace(/\u00a0/g, ' ') : null;
}, n);

const waitLine = async (n, pattern, timeout = 30_000) => {
  const deadline = Date.now() + timeout;
  let text = null;
  while (Date.now() < deadline) {
    text = await lineText(n);
    if (text !== null && pattern.test(text)) return text;
    await page.waitForTimeout(200);
  }
  throw new Error(`line ${n} never matched ${pattern}; last seen: ${JSON.stringify(text)}`);
};

const goToLine = async (n) => {
  await keys('Escape', 'Control+G');
  await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
  await page.keyboard.type(String(n));
  await keys('Enter');
};

/** Move the mouse onto the first token of line `n` that contains `word`. */
const hoverWord = async (n, word) => {
  const box = await page.evaluate(([number, w]) => {
    const editor = document.querySelector('.editor-instance .monaco-editor') ?? document.querySelector('.monaco-editor');
    const label = [...editor.querySelectorAll('.margin-view-overlays .line-numbers')]
      .find((e) => e.textContent.trim() === String(number));
    const top = label.getBoundingClientRect().top;
    const row = [...editor.querySelectorAll('.view-lines .view-line')]
      .find((e) => Math.abs(e.getBoundingClientRect().top - top) < 2);
    const span = [...row.querySelectorAll('span span')].find((s) => s.textContent.includes(w));
    const r = span.getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
  }, [n, word]);
  await page.mouse.move(5, 5);
  await page.mouse.move(box.x, box.y, { steps: 5 });
};

try {
  await page.goto(process.env.CS_URL);
  await page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
  step('workbench loaded');

  await keys('Control+P');
  await page.keyboard.type(E.file);
  await waitText('.quick-input-list .monaco-list-row', new RegExp(E.file.replace('.', '\\.')));
  await keys('Enter');
  await page.waitForSelector('.editor-instance .monaco-editor .view-lines', { timeout: 30_000 });
  step(`${E.file} open`);

  // The status-bar item: the trace, then the GPU utilization once it is loaded.
  await waitText('.statusbar-item', new RegExp(`${E.trace.replace(/\./g, '\\.')} · GPU \\d+%`), 60_000);
  const item = await page.locator('.statusbar-item', { hasText: E.trace }).first().innerText();
  step(`status bar: ${item.replace(/\s+/g, ' ').trim()}`);

  // Inlay hints, on the right lines.
  await goToLine(E.computeLine);
  const compute = await waitLine(E.computeLine, /x @ w.*⏱ .*compute-bound/);
  const overhead = await waitLine(E.overheadLine, /loss\.item\(\).*⏱ .*overhead-bound/);
  step(`line ${E.computeLine}: ${compute.trim()}`);
  step(`line ${E.overheadLine}: ${overhead.trim()}`);
  for (const [n, text] of [[E.computeLine - 1, await lineText(E.computeLine - 1)], [E.overheadLine + 1, await lineText(E.overheadLine + 1)]]) {
    if (text !== null && text.includes('⏱')) throw new Error(`line ${n} has a hint it should not have: ${text}`);
  }

  // The diagnostic: a squiggle on line 109 and the rule in the Problems panel.
  await page.waitForSelector('.editor-instance .monaco-editor .squiggly-warning', { timeout: 30_000 });
  await keys('Escape', 'Control+Shift+M');
  await waitText('.markers-panel', new RegExp(E.rule));
  const problem = await page.locator('.markers-panel .monaco-list-row', { hasText: E.rule }).first().innerText();
  step(`problem: ${problem.replace(/\s+/g, ' ').trim()}`);

  // Hovers: the evidence on line 109 (with its finding), then line 108 for the screenshot.
  await keys('Control+J'); // close the panel: more lines on screen, room for the hover
  await keys('Control+1'); // back to the editor (never click it: a scroll-into-view breaks Monaco's layout)
  await goToLine(E.computeLine);
  await keys('Escape');
  await hoverWord(E.overheadLine, 'item');
  await waitText('.monaco-hover', /brrr-trace.*overhead-bound/);
  await waitText('.monaco-hover', new RegExp(E.rule));
  await page.waitForTimeout(500); // the hover fades in
  await shot('hover-overhead');
  step(`hover on line ${E.overheadLine}`);
  await keys('Escape');
  await page.mouse.move(5, 5);
  await page.waitForFunction(() => ![...document.querySelectorAll('.monaco-hover')]
    .some((e) => e.offsetParent !== null && /overhead-bound/.test(e.textContent)), null, { timeout: 10_000 });
  await hoverWord(E.computeLine, 'sum');
  await waitText('.monaco-hover', /brrr-trace.*compute-bound/);
  await page.waitForTimeout(500);
  await shot('workbench');
  if (process.env.SCREENSHOT) {
    fs.mkdirSync(path.dirname(process.env.SCREENSHOT), { recursive: true });
    await page.screenshot({ path: process.env.SCREENSHOT });
  }
  step(`hover on line ${E.computeLine}; screenshot`);

  // A click on the status-bar item shows the summary.
  await page.mouse.move(5, 5);
  await keys('Escape');
  await page.locator('.statusbar-item', { hasText: E.trace }).first().click();
  await waitText('.notifications-toasts', /GPU \d+(\.\d)?% busy over a .* span/);
  await page.waitForTimeout(500); // the toast fades in
  await shot('summary');
  step('summary shown');

  // A server setting is sent to the running server: at a threshold of 50% of the GPU span only
  // line 108 (76%) keeps its hint, line 109 (23%) loses it.
  const setSetting = async (key, label, value) => {
    await keys('Escape', 'Control+,');
    await page.waitForSelector('.settings-editor', { timeout: 10_000 });
    await keys('Control+A');
    await page.keyboard.type(key);
    const input = page.locator('.settings-editor .setting-item-contents', { hasText: label }).locator('input').first();
    await input.waitFor({ timeout: 10_000 });
    await input.fill(value);
  };
  await setSetting('brrr-trace.threshold', 'Threshold', '0.5');
  await page.locator('.tabs-container .tab', { hasText: E.file }).first().click();
  await goToLine(E.computeLine);
  await waitLine(E.overheadLine, /^(?!.*⏱).*loss\.item\(\)/);
  await waitLine(E.computeLine, /⏱ .*compute-bound/);
  step('threshold 0.5: the hint of line 109 is gone, line 108 keeps its own');

  // Set the interpreter to one without brrr_trace: the extension restarts the server there, says
  // brrr_trace is missing, and offers the install command.
  if (process.env.NO_BRRR_PYTHON) {
    await setSetting('brrr-trace.interpreter', 'Interpreter', process.env.NO_BRRR_PYTHON);
    await waitText('.notifications-toasts',
      /brrr-trace is not installed in .*python-without-brrr-trace.*-m pip install brrr-trace/);
    await waitText('.notifications-toasts', /Install in Terminal/);
    await page.waitForFunction(() => [...document.querySelectorAll('.statusbar-item')]
      .some((e) => e.textContent.trim() === 'brrr-trace'), null, { timeout: 10_000 });
    await page.waitForTimeout(500);
    await shot('not-installed');
    step('interpreter without brrr_trace: restarted, install offered');
  }
  console.log('e2e: all checks passed');
} catch (error) {
  await shot('failure').catch(() => {});
  console.error(error);
  process.exitCode = 1;
} finally {
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
