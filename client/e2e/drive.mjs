// The browser half of the end-to-end test (run by run-e2e.sh): headless Debian Chromium, driven by
// playwright-core (which never downloads a browser), against code-server at $CS_URL.
//
// Checks, on brrr_trace/data/workloads.py beside two runs (runs/step: a training step as ranks 0
// and 1; runs/loop: the item_in_loop loop):
//   - the status bar names the trace, its run and rank (runs/step, rank 0) and offers the picker;
//   - heat: the measured lines of the training step have coloured backgrounds, the hottest the
//     strongest;
//   - line 309 `opt.step()` ends with a short hint (at most 43 characters) whose tooltip has the
//     whole text; line 306 `logits = model(inputs)` shows the inclusive time of the model;
//   - brrr-trace: Show Timeline opens the timeline beside the editor (a webview: its nested
//     iframe draws the segments); a click on the widest kernel of a line puts the editor's
//     cursor on that line, and that line's segments are then marked on the timeline;
//   - launch-overhead, found over lines 271-280 (a block's forward as a CUDA graph), is in the Problems panel on each;
//   - the run picker lists both runs and both ranks; picking the loop shows its trace;
//   - on the loop: line 108 compute, line 109 overhead, a hover, the host-sync diagnostic, the
//     summary, and a changed brrr-trace.hintShare reaching the running server;
//   - brrr-trace.interpreter set to a fresh venv without brrr_trace ($FRESH_PYTHON): the prompt
//     installs the wheel the .vsix carries, and the server starts there.
// Writes PNGs to $OUT, and the README's screenshot to $SCREENSHOT.
import { chromium } from 'playwright-core';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const OUT = process.env.OUT ?? '.';
const TIMELINE_SHOT = process.env.TIMELINE_SCREENSHOT;
const E = {
  file: 'workloads.py',
  trace: 'item_in_loop.pt.trace.json.gz',
  stepTrace: 'rank0.pt.trace.json.gz',
  modelLine: 306,
  optimizerLine: 309,
  chainRule: 'launch-overhead',
  chainMessage: 'lines 271-280 of forward', // the blocks' forward as one CUDA graph
  chainLines: [271, 272, 275, 277, 278, 279, 280],
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

  // The status bar: the trace, its run and rank, the GPU utilization; the picker beside it.
  await waitText('.statusbar-item', new RegExp(`${E.stepTrace.replace(/\./g, '\\.')} · run runs/step · rank 0 · GPU \\d+%`), 60_000);
  await waitText('.statusbar-item', /3 traces/);
  step(`status bar: ${(await page.locator('.statusbar-item', { hasText: E.stepTrace }).first().innerText()).replace(/\s+/g, ' ').trim()}`);

  // The inclusive hint on the model call, and the short hint of the optimizer line.
  await goToLine(E.modelLine + 6);
  const model = await waitLine(E.modelLine, /model\(inputs\).*⏱ \d+(\.\d)? ms incl\. · overhead \d+%/);
  const optimizer = await waitLine(E.optimizerLine, /opt\.step\(\).*⏱ \d+(\.\d)? ms · overhead · \d+%/);
  step(`line ${E.modelLine}: ${model.trim()}`);
  step(`line ${E.optimizerLine}: ${optimizer.trim()}`);
  const hintsShown = await page.evaluate(() => [...document.querySelectorAll('.editor-instance .view-lines .view-line')]
    .map((row) => row.textContent.replace(/\u00a0/g, ' ')).filter((text) => text.includes('⏱'))
    .map((text) => text.slice(text.indexOf('⏱'))));
  for (const hint of hintsShown) {
    if (hint.trim().length > 43) throw new Error(`a hint longer than 43 characters: ${hint}`);
  }
  step(`${hintsShown.length} hints on screen, all within 43 characters`);

  // Heat: whole-line backgrounds in the warm colour, on the measured lines; the hottest line
  // (309, the optimizer) the most opaque.
  const heat = await page.evaluate(() => {
    const editor = document.querySelector('.editor-instance .monaco-editor');
    const numbers = [...editor.querySelectorAll('.margin-view-overlays .line-numbers')];
    const out = {};
    for (const div of editor.querySelectorAll('.view-overlays > div > div')) {
      const colour = getComputedStyle(div).backgroundColor;
      const match = /rgba\(255, 96, 32, ([\d.]+)\)/.exec(colour);
      if (!match) continue;
      const top = div.parentElement.getBoundingClientRect().top;
      const label = numbers.find((e) => Math.abs(e.getBoundingClientRect().top - top) < 2);
      if (label) out[label.textContent.trim()] = Number(match[1]);
    }
    return out;
  });
  const hottest = Math.max(...Object.values(heat));
  if (!(heat[String(E.optimizerLine)] === hottest && heat[String(E.modelLine)] > 0 && !heat['303'])) {
    throw new Error(`heat is not as expected: ${JSON.stringify(heat)}`);
  }
  await shot('heat');
  step(`heat on ${Object.keys(heat).length} lines on screen: ${JSON.stringify(heat)}`);

  // The tooltip of a short hint: the whole text.
  const hintBox = await page.evaluate((number) => {
    const editor = document.querySelector('.editor-instance .monaco-editor');
    const label = [...editor.querySelectorAll('.margin-view-overlays .line-numbers')]
      .find((e) => e.textContent.trim() === String(number));
    const top = label.getBoundingClientRect().top;
    const row = [...editor.querySelectorAll('.view-lines .view-line')]
      .find((e) => Math.abs(e.getBoundingClientRect().top - top) < 2);
    const span = [...row.querySelectorAll('span')].filter((s) => s.children.length === 0)
      .find((s) => s.textContent.includes('⏱'));
    const r = span.getBoundingClientRect();
    return { x: r.x + Math.min(30, r.width / 2), y: r.y + r.height / 2 };
  }, E.modelLine);
  // A hover the workbench dropped (the pointer arrived while it was busy) is asked for again by
  // moving away and back; what it must say is checked the same each time.
  const tooltip = /With the code it calls \(forward and backward\): .* This line: .*-bound/;
  for (let attempt = 1; ; attempt += 1) {
    await page.mouse.move(5, 5);
    await page.mouse.move(hintBox.x, hintBox.y, { steps: 5 });
    try {
      await waitText('.monaco-hover', tooltip, 10_000);
      break;
    } catch (error) {
      if (attempt === 3) throw error;
      console.log(`e2e: no tooltip after attempt ${attempt}; moving away and back`);
    }
  }
  await page.waitForTimeout(500);
  await shot('hint-tooltip');
  step(`tooltip of the hint on line ${E.modelLine}`);
  await page.mouse.move(5, 5);

  // The timeline panel: the command opens it beside the editor; the drawing is in the webview's
  // nested iframe. A real click on the widest kernel with a line moves the editor's cursor there.
  await keys('Escape', 'F1');
  await page.waitForSelector('.quick-input-widget input', { state: 'visible' });
  await page.keyboard.type('brrr-trace: Show Timeline');
  await waitText('.quick-input-list .monaco-list-row', /brrr-trace: Show Timeline/);
  await keys('Enter');
  let timeline = null;
  for (let i = 0; i < 150 && !timeline; i += 1) {
    for (const frame of page.frames()) {
      const drawn = await frame.$('.brrr-timeline[data-drawn]').catch(() => null);
      if (drawn) timeline = frame;
    }
    if (!timeline) await page.waitForTimeout(200);
  }
  if (!timeline) throw new Error('the timeline panel never drew (no frame with .brrr-timeline[data-drawn])');
  const target = await timeline.evaluate(() => {
    const data = JSON.parse(document.querySelector('script.brrr-timeline-data').textContent);
    const dev = data.devices[0];
    let best = -1;
    for (let i = 0; i < dev.start.length; i += 1) {
      if (dev.kind[i] !== 0 || dev.place[i] < 0) continue;
      if (best < 0 || dev.end[i] - dev.start[i] > dev.end[best] - dev.start[best]) best = i;
    }
    const canvas = document.querySelector('.brrr-tl-canvas');
    const width = canvas.getBoundingClientRect().width;
    const span = Math.max(...data.devices.map((d) => d.span_ns));
    const place = data.places[dev.place[best]];
    return { x: ((dev.start[best] + dev.end[best]) / 2 / span) * width, y: 18 + 34 / 2, line: place[2], file: place[0],
      drawn: document.querySelector('.brrr-timeline').getAttribute('data-drawn') };
  });
  step(`timeline drawn (${target.drawn} segments); clicking the widest kernel, of ${target.file}:${target.line}`);
  await timeline.locator('.brrr-tl-canvas').click({ position: { x: target.x, y: target.y } });
  await waitText('.statusbar-item', new RegExp(`Ln ${target.line}, Col 1\\b`));
  await timeline.waitForSelector('.brrr-timeline[data-highlighted]:not([data-highlighted="0"])', { timeout: 10_000 });
  const marked = await timeline.evaluate(() => document.querySelector('.brrr-timeline').getAttribute('data-highlighted'));
  await page.waitForTimeout(300);
  await shot('timeline');
  if (TIMELINE_SHOT) {
    fs.mkdirSync(path.dirname(TIMELINE_SHOT), { recursive: true });
    await page.screenshot({ path: TIMELINE_SHOT });
  }
  step(`the click put the cursor on line ${target.line}; ${marked} segments of that line marked`);
  // Close the panel by its tab, then give the workbench (not the gone frame) the keyboard again.
  const panelTab = page.locator('.tabs-container .tab', { hasText: 'brrr-trace: Timeline' }).first();
  await panelTab.hover();
  await panelTab.locator('.codicon-close').first().click();
  await panelTab.waitFor({ state: 'detached', timeout: 10_000 });
  await page.locator('.tabs-container .tab', { hasText: E.file }).first().click();
  await page.waitForTimeout(500);
  await keys('Control+1');

  // A finding over three lines: in the Problems panel on each of them.
  await keys('Escape', 'Control+Shift+M');
  await waitText('.markers-panel', /brrr-trace/);
  const chainRows = async () => page.evaluate((rule) => [...document.querySelectorAll('.markers-panel .monaco-list-row')]
    .map((row) => row.textContent.replace(/\u00a0/g, ' '))
    .filter((text) => text.includes(rule)), E.chainRule);
  // Only this finding's rows, so that the list is short enough to be drawn whole (the panel
  // draws only the rows in view, and findings over many lines, such as the blocks' own chain
  // and their CUDA-graph finding, come first).
  const filter = page.locator('.viewpane-filter input, .markers-panel-action-filter input').first();
  await filter.fill(E.chainMessage).catch((error) => console.log(`e2e: no Problems filter (${error.message})`));
  await waitText('.markers-panel', new RegExp(E.chainRule));
  const seenLines = new Set();
  for (let i = 0; i < 50 && seenLines.size < E.chainLines.length; i += 1) {
    for (const text of await chainRows()) {
      const match = /\[Ln (\d+), Col \d+\]/.exec(text);
      if (match) seenLines.add(Number(match[1]));
    }
    if (seenLines.size < E.chainLines.length) await page.waitForTimeout(200);
  }
  const missing = E.chainLines.filter((n) => !seenLines.has(n));
  if (missing.length) throw new Error(`${E.chainRule} is not marked on lines ${missing}; seen ${[...seenLines]}`);
  await page.waitForTimeout(300);
  await shot('multi-line-finding');
  step(`${E.chainRule} marked on lines ${[...seenLines].sort().join(', ')}`);
  await keys('Control+J');
  await keys('Control+1');

  // The run picker: both runs, both ranks; pick the loop.
  await page.locator('.statusbar-item', { hasText: '3 traces' }).first().click();
  await waitText('.quick-input-list', /run: runs\/step/);
  await waitText('.quick-input-list', /rank 1 · rank1\.pt\.trace\.json\.gz/);
  await waitText('.quick-input-list', /run: runs\/loop/);
  await page.waitForTimeout(300);
  await shot('run-picker');
  await page.keyboard.type('item_in_loop');
  await waitText('.quick-input-list .monaco-list-row', /item_in_loop\.pt\.trace\.json\.gz/);
  await keys('Enter');
  await waitText('.statusbar-item', new RegExp(`${E.trace.replace(/\./g, '\\.')} · run runs/loop · GPU \\d+%`), 60_000);
  step('picked runs/loop in the run picker; the status bar says so');

  // The loop's hints, on the right lines.
  await goToLine(E.computeLine);
  const compute = await waitLine(E.computeLine, /x @ w.*⏱ .* · compute · \d+%/);
  const overhead = await waitLine(E.overheadLine, /loss\.item\(\).*⏱ .* · overhead · \d+%/);
  step(`line ${E.computeLine}: ${compute.trim()}`);
  step(`line ${E.overheadLine}: ${overhead.trim()}`);
  for (const [n, text] of [[E.computeLine - 1, await lineText(E.computeLine - 1)], [E.overheadLine + 1, await lineText(E.overheadLine + 1)]]) {
    if (text !== null && text.includes('⏱')) throw new Error(`line ${n} has a hint it should not have: ${text}`);
  }

  // The diagnostic: a squiggle on line 109 and the rule in the Problems panel.
  await page.waitForSelector('.editor-instance .monaco-editor .squiggly-warning', { timeout: 30_000 });
  await keys('Escape', 'Control+Shift+M');
  await filter.fill(E.rule).catch(() => {});
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

  // A server setting is sent to the running server: with hints only for lines at 50% of the
  // file's hottest line, line 108 keeps its hint and line 109 (6% of it) loses it.
  const setSetting = async (key, label, value) => {
    await keys('Escape', 'Control+,');
    await page.waitForSelector('.settings-editor', { timeout: 10_000 });
    await keys('Control+A');
    await page.keyboard.type(key);
    const input = page.locator('.settings-editor .setting-item-contents', { hasText: label }).locator('input').first();
    await input.waitFor({ timeout: 10_000 });
    await input.fill(value);
  };
  await setSetting('brrr-trace.hintShare', 'Hint Share', '0.5');
  await page.locator('.tabs-container .tab', { hasText: E.file }).first().click();
  await goToLine(E.computeLine);
  await waitLine(E.overheadLine, /^(?!.*⏱).*loss\.item\(\)/);
  await waitLine(E.computeLine, /⏱ .* · compute · /);
  step('hintShare 0.5: the hint of line 109 is gone, line 108 keeps its own');

  // Point the interpreter at a fresh venv without brrr_trace: the extension restarts the server
  // there, says brrr_trace is missing, and its prompt installs the wheel the .vsix carries.
  if (process.env.FRESH_PYTHON) {
    await setSetting('brrr-trace.interpreter', 'Interpreter', process.env.FRESH_PYTHON);
    await waitText('.notifications-toasts',
      /brrr-trace is not installed in .*fresh-venv.*the brrr-trace wheel this extension carries.*-m pip install .*brrr_trace-[\d.]+-py3-none-any\.whl/);
    await page.waitForTimeout(500);
    await shot('not-installed');
    step('interpreter without brrr_trace: the bundled wheel is offered');
    await page.locator('.notifications-toasts .monaco-button', { hasText: 'Install brrr-trace' }).first().click();
    await waitText('.notifications-toasts', /installing brrr_trace-[\d.]+-py3-none-any\.whl/, 20_000)
      .then(() => shot('installing'), () => console.log('e2e: the install progress was not seen'));
    await waitText('.notifications-toasts', /installed brrr_trace-[\d.]+-py3-none-any\.whl; starting the server/, 540_000);
    // A new server: the newest trace again (the picker's choice lived in the old one).
    await waitText('.statusbar-item', /\.pt\.trace\.json\.gz · run runs\/\w+ · (rank \d · )?GPU \d+%/, 120_000);
    await page.waitForTimeout(500);
    await shot('installed');
    step('installed the bundled wheel into the fresh venv; the server runs there');
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
