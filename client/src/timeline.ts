/**
 * The timeline panel (issue #16): the page a webview shows, and the messages between it and the
 * editor. The drawing is the HTML report's own script (brrr_trace/render/assets/timeline.js,
 * shipped in dist/ by esbuild.mjs); its protocol is in docs/html-report.md. No `vscode` here.
 */
import { randomBytes } from 'node:crypto';

export const CMD_SHOW_TIMELINE = 'brrr-trace.showTimeline';
export const CMD_TIMELINE = 'brrr-trace.timeline'; // the server's: the data, or null
export const TIMELINE_SCRIPT = 'timeline.js';
export const TIMELINE_STYLE = 'report.css';
export const TIMELINE_VIEW_TYPE = 'brrr-trace.timeline';

/** A click on a kernel or gap, as the script posts it; a line the editor can go to. */
export interface Reveal {
  path: string | null; // the local file (null when the server found none under the source root)
  file: string; // the trace's name for it
  line: number; // 1-based
}

/** A fresh nonce for one page: the only script allowed to run is the one that carries it. */
export function makeNonce(): string {
  return randomBytes(18).toString('base64');
}

/** Only the timeline's rules of the report's style (the page's own would restyle the webview). */
export function timelineRules(css: string): string {
  return css.split('\n').filter((line) => line.startsWith('.brrr-tl-')).join('\n');
}

/**
 * JSON that can sit inside a `<script type="application/json">`: trace strings may hold
 * `</script>`, so `<`, `>`, `&` and the line separators become `\u` escapes.
 */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export interface PageParts {
  cspSource: string; // webview.cspSource
  nonce: string;
  script: string; // timeline.js
  style: string; // its rules
  data: unknown; // the server's answer; null: no trace loaded
  note?: string; // shown above the timeline (what is loaded, or why nothing is)
}

/** The webview's page: nothing loads from the network; only the nonced script and style apply. */
export function timelinePage(parts: PageParts): string {
  const { cspSource, nonce } = parts;
  const csp = [
    "default-src 'none'",
    `img-src ${cspSource}`,
    `script-src 'nonce-${nonce}'`,
    `style-src ${cspSource} 'nonce-${nonce}'`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  const body = parts.data === null || parts.data === undefined
    ? `<p class="brrr-panel-note">${escapeHtml(parts.note ?? 'No trace is loaded yet.')}</p>`
    : (parts.note ? `<p class="brrr-panel-note">${escapeHtml(parts.note)}</p>` : '')
      + '<div class="brrr-timeline" id="timeline">'
      + `<script type="application/json" class="brrr-timeline-data">${scriptJson(parts.data)}</script></div>`;
  const style = `body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 8px 12px; }\n`
    + '.brrr-tl-canvas { background: #fff; }\n'
    + parts.style.replace(/<\//g, '<\\/');
  return '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    + `<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">`
    + '<meta name="viewport" content="width=device-width, initial-scale=1">'
    + `<title>brrr-trace timeline</title><style nonce="${nonce}">${style}</style></head><body>`
    + body
    + `<script nonce="${nonce}">${parts.script.replace(/<\/script/gi, '<\\/script')}</script>`
    + '</body></html>';
}

/** A message from the webview, if it is a reveal with a usable line (the page is not trusted). */
export function parseReveal(message: unknown): Reveal | undefined {
  if (typeof message !== 'object' || message === null) {
    return undefined;
  }
  const m = message as Record<string, unknown>;
  if (m.type !== 'reveal' || typeof m.line !== 'number' || !Number.isInteger(m.line) || m.line < 1) {
    return undefined;
  }
  const path = typeof m.path === 'string' && m.path !== '' ? m.path : null;
  const file = typeof m.file === 'string' ? m.file : '';
  if (path === null && file === '') {
    return undefined;
  }
  return { path, file, line: m.line };
}

/** What the panel is told when the cursor moves: the script's lines are 1-based, the editor's not. */
export function highlightMessage(path: string | null, zeroBasedLine: number): { type: 'highlight'; path: string | null; line: number } {
  return { type: 'highlight', path, line: zeroBasedLine + 1 };
}
