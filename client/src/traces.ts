/**
 * The "Open Trace…" picker: the server's candidates (`brrr-trace.listTraces`), newest first, and
 * a last entry to browse for any file.
 *
 * No `vscode` import: the items are plain `QuickPickItem`-shaped objects.
 */
import { basename } from './status';

export interface TraceEntry {
  path: string;
  mtimeNs: number;
  size: number;
  active: boolean;
  /** The rank the trace names (distributedInfo), or null. */
  rank: number | null;
  /** Its run: its folder in the workspace (`.` for the folder itself), or null. */
  run: string | null;
}

export interface TracePick {
  label: string;
  description?: string;
  detail?: string;
  /** The file to select; undefined for "Browse…" and separators. */
  path?: string;
  /** -1 (`QuickPickItemKind.Separator`) for a run's heading. */
  kind?: number;
}

export const BROWSE_LABEL = '$(folder-opened) Browse…';

/** The server's answer checked entry by entry (anything without a path is dropped). */
export function parseTraceEntries(value: unknown): TraceEntry[] {
  if (!Array.isArray(value)) {
    return [];
  }
  return value.flatMap((item): TraceEntry[] => {
    if (item === null || typeof item !== 'object' || typeof item.path !== 'string') {
      return [];
    }
    return [{
      path: item.path,
      mtimeNs: typeof item.mtimeNs === 'number' ? item.mtimeNs : 0,
      size: typeof item.size === 'number' ? item.size : 0,
      active: item.active === true,
      rank: typeof item.rank === 'number' && Number.isInteger(item.rank) ? item.rank : null,
      run: typeof item.run === 'string' ? item.run : null,
    }];
  });
}

/**
 * One pick per trace, grouped by run (a separator per run, runs in the order of their newest
 * trace, ranks in order within a run; the active one marked), then "Browse…". `now` is for the
 * ages (ms).
 */
export function tracePicks(entries: readonly TraceEntry[], relativeTo: (path: string) => string,
  now: number = Date.now()): TracePick[] {
  const runs = new Map<string, TraceEntry[]>();
  for (const entry of entries) {
    const run = entry.run ?? '';
    runs.set(run, [...(runs.get(run) ?? []), entry]);
  }
  const grouped = runs.size > 1 || entries.some((entry) => entry.rank !== null);
  const picks: TracePick[] = [];
  for (const [run, members] of runs) {
    if (grouped) {
      picks.push({ label: run === '.' || run === '' ? 'run: (workspace folder)' : `run: ${run}`, kind: -1 });
    }
    const ordered = [...members].sort((a, b) => (a.rank ?? Infinity) - (b.rank ?? Infinity));
    for (const entry of ordered) {
      const rank = entry.rank !== null ? `rank ${entry.rank} · ` : '';
      picks.push({
        label: `${entry.active ? '$(check) ' : ''}${rank}${basename(entry.path)}`,
        description: `${formatSize(entry.size)} · ${formatAge(now - entry.mtimeNs / 1e6)}`,
        detail: relativeTo(entry.path),
        path: entry.path,
      });
    }
  }
  picks.push({ label: BROWSE_LABEL, description: 'a .json or .json.gz trace anywhere' });
  return picks;
}

export function formatSize(bytes: number): string {
  if (bytes < 1024) {
    return `${bytes} B`;
  }
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** `just now`, `5 min ago`, `3 h ago`, `2 days ago`. */
export function formatAge(ms: number): string {
  const minutes = Math.floor(Math.max(0, ms) / 60_000);
  if (minutes < 1) {
    return 'just now';
  }
  if (minutes < 60) {
    return `${minutes} min ago`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 48) {
    return `${hours} h ago`;
  }
  return `${Math.floor(hours / 24)} days ago`;
}
