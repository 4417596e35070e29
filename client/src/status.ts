/**
 * What the status-bar item and the summary say, from the server's status: the answer of its
 * `brrr-trace.status` command, which it also pushes as the `brrr-trace/status` notification
 * whenever a load starts, ends or fails.
 *
 * No `vscode` import: `extension.ts` copies these fields onto a `StatusBarItem`.
 */

/** The server's method names (brrr_trace/server/names.py). */
export const STATUS_NOTIFICATION = 'brrr-trace/status';
export const CMD_STATUS = 'brrr-trace.status';
export const CMD_LIST_TRACES = 'brrr-trace.listTraces';
export const CMD_SELECT_TRACE = 'brrr-trace.selectTrace';
export const CMD_RELOAD = 'brrr-trace.reload';
export const CMD_HEAT = 'brrr-trace.heat';

/** The client's own commands (package.json `contributes.commands`). */
export const CMD_OPEN_TRACE = 'brrr-trace.openTrace';
export const CMD_SHOW_SUMMARY = 'brrr-trace.showSummary';
export const CMD_RESTART = 'brrr-trace.restartServer';
export const CMD_SHOW_LOGS = 'brrr-trace.showLogs';
export const CMD_PICK_RUN = 'brrr-trace.pickRun';

export interface ServerStatus {
  /** The loaded trace (absolute path), or null. */
  trace: string | null;
  /** The trace being loaded now, or null. */
  loading: string | null;
  /** The last load's error, as a sentence, or null. */
  error: string | null;
  lines: number;
  findings: number;
  /** Busy time over the GPU span (0..1), or null when the trace has no GPU activity. */
  gpuUtilization: number | null;
  spanNs: number;
  /** The loaded trace's run (its folder in the workspace), or null. */
  run: string | null;
  /** The rank the loaded trace names, or null. */
  rank: number | null;
  /** How many traces the server could show. */
  traces: number;
}

/** The server's answer checked field by field: anything malformed reads as "nothing loaded". */
export function parseStatus(value: unknown): ServerStatus {
  const record = (value !== null && typeof value === 'object' ? value : {}) as Record<string, unknown>;
  const str = (key: string) => (typeof record[key] === 'string' ? record[key] as string : null);
  const num = (key: string) => (typeof record[key] === 'number' && Number.isFinite(record[key])
    ? record[key] as number : null);
  return {
    trace: str('trace'),
    loading: str('loading'),
    error: str('error'),
    lines: num('lines') ?? 0,
    findings: num('findings') ?? 0,
    gpuUtilization: num('gpuUtilization'),
    spanNs: num('spanNs') ?? 0,
    run: str('run'),
    rank: num('rank'),
    traces: num('traces') ?? 0,
  };
}

/** The client's side: the server is starting, running, or could not start. */
export type ClientState =
  | { kind: 'starting' }
  | { kind: 'running'; status?: ServerStatus }
  | { kind: 'stopped'; reason: string };

export interface StatusBarView {
  text: string;
  tooltip: string;
  /** The command a click runs. */
  command: string;
  /** Shown with the error or warning background. */
  severity?: 'error' | 'warning';
}

const NAME_WIDTH = 40;

/** The status-bar item: the trace on screen and the GPU's utilization in it. */
export function statusBarView(state: ClientState): StatusBarView {
  if (state.kind === 'starting') {
    return { text: '$(loading~spin) brrr-trace', tooltip: 'brrr-trace: starting the language server…', command: CMD_SHOW_LOGS };
  }
  if (state.kind === 'stopped') {
    return { text: '$(error) brrr-trace', tooltip: `${state.reason}\nClick for the log.`, command: CMD_SHOW_LOGS, severity: 'error' };
  }
  const status = state.status;
  if (status?.loading) {
    return {
      text: `$(sync~spin) ${shorten(basename(status.loading), NAME_WIDTH)}`,
      tooltip: `brrr-trace: loading ${status.loading}`,
      command: CMD_SHOW_SUMMARY,
    };
  }
  if (status?.trace) {
    const tooltip = [`brrr-trace: ${summaryText(status)}`];
    if (status.error) {
      tooltip.push(status.error);
    }
    tooltip.push('Click for the summary.');
    const where = runText(status);
    return {
      text: `$(pulse) ${shorten(basename(status.trace), NAME_WIDTH)}${where ? ` · ${where}` : ''} · ` +
        utilizationText(status.gpuUtilization),
      tooltip: tooltip.join('\n'),
      command: CMD_SHOW_SUMMARY,
      severity: status.error ? 'warning' : undefined,
    };
  }
  if (status?.error) {
    return { text: '$(warning) brrr-trace', tooltip: `${status.error}\nClick to pick a trace.`, command: CMD_OPEN_TRACE, severity: 'warning' };
  }
  return {
    text: '$(circle-slash) brrr-trace: no trace',
    tooltip: 'brrr-trace: no trace in this workspace matches brrr-trace.traces. Click to pick one.',
    command: CMD_OPEN_TRACE,
  };
}

/** `run runs/a · rank 1`: which run and rank is shown (each part only when known). */
export function runText(status: Pick<ServerStatus, 'run' | 'rank'>): string {
  const parts = [];
  if (status.run && status.run !== '.') {
    parts.push(`run ${shorten(status.run, NAME_WIDTH)}`);
  }
  if (status.rank !== null) {
    parts.push(`rank ${status.rank}`);
  }
  return parts.join(' · ');
}

/** The picker's item: shown when the workspace has more than one trace. */
export function pickerView(status: ServerStatus | undefined): { text: string; tooltip: string } | undefined {
  if (!status || status.traces < 2) {
    return undefined;
  }
  return {
    text: `$(list-selection) ${status.traces} traces`,
    tooltip: `brrr-trace: ${status.traces} traces (runs and ranks) in this workspace; ` +
      `showing ${status.trace ? basename(status.trace) : 'none'}. Click to pick another.`,
  };
}

/** `GPU 73%`, or `no GPU activity`. */
export function utilizationText(utilization: number | null): string {
  return utilization === null ? 'no GPU activity' : `GPU ${Math.round(100 * utilization)}%`;
}

/** One sentence: the trace, its utilization and span, its lines and findings. */
export function summaryText(status: ServerStatus): string {
  if (!status.trace) {
    return status.loading ? `loading ${basename(status.loading)}` : 'no trace loaded';
  }
  const busy = status.gpuUtilization === null
    ? 'no GPU activity'
    : `GPU ${(100 * status.gpuUtilization).toFixed(1)}% busy over a ${formatDuration(status.spanNs)} span`;
  const where = runText(status);
  return `${basename(status.trace)}${where ? ` (${where})` : ''}: ${busy}; ` +
    `${plural(status.lines, 'source line')}, ${plural(status.findings, 'finding')}.`;
}

/** A duration the way the server writes it: 812 ns, 35.2 µs, 16.3 ms, 2.41 s. */
export function formatDuration(ns: number): string {
  if (ns < 1e3) {
    return `${Math.round(ns)} ns`;
  }
  if (ns < 1e6) {
    return `${(ns / 1e3).toFixed(1)} µs`;
  }
  if (ns < 1e9) {
    return `${(ns / 1e6).toFixed(1)} ms`;
  }
  return `${(ns / 1e9).toFixed(2)} s`;
}

export function basename(path: string): string {
  return path.split(/[\\/]/).filter(Boolean).pop() ?? path;
}

/** Cut the middle out of a long name, keeping its start and its extension end. */
export function shorten(text: string, width: number): string {
  if (text.length <= width) {
    return text;
  }
  const tail = Math.floor((width - 1) / 2);
  return `${text.slice(0, width - 1 - tail)}…${text.slice(text.length - tail)}`;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}
