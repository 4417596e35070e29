/**
 * The heat of a document's lines (the server's `brrr-trace.heat`): each measured line's time over
 * that of the hottest line of its file, in a few steps of colour, so that the hot lines stand out
 * and a cold line stays plain.
 *
 * No `vscode` import: `extension.ts` turns the steps into decorations.
 */

export interface HeatLine {
  /** 0-based. */
  line: number;
  /** The line's time over that of the file's hottest line, in (0, 1]. */
  weight: number;
  regime: string | null;
}

/** Background opacity of each step, coolest first; a line below the first cut gets none. */
export const HEAT_STEPS: readonly { from: number; alpha: number }[] = [
  { from: 0.02, alpha: 0.08 },
  { from: 0.1, alpha: 0.16 },
  { from: 0.25, alpha: 0.26 },
  { from: 0.5, alpha: 0.38 },
  { from: 0.8, alpha: 0.5 },
];

/** The server's answer checked line by line (anything malformed is dropped). */
export function parseHeat(value: unknown): HeatLine[] {
  const lines = value !== null && typeof value === 'object' ? (value as { lines?: unknown }).lines : undefined;
  if (!Array.isArray(lines)) {
    return [];
  }
  return lines.flatMap((item): HeatLine[] => {
    if (item === null || typeof item !== 'object') {
      return [];
    }
    const { line, weight, regime } = item as Record<string, unknown>;
    if (!Number.isInteger(line) || (line as number) < 0 || typeof weight !== 'number' || !(weight > 0)) {
      return [];
    }
    return [{ line: line as number, weight: Math.min(weight, 1), regime: typeof regime === 'string' ? regime : null }];
  });
}

/** The step (index into HEAT_STEPS) of a weight, or -1 for none. */
export function heatStep(weight: number): number {
  let step = -1;
  HEAT_STEPS.forEach((s, i) => {
    if (weight >= s.from) {
      step = i;
    }
  });
  return step;
}

/** The lines of each step: `result[i]` holds the 0-based lines of HEAT_STEPS[i]. */
export function heatBuckets(lines: readonly HeatLine[]): number[][] {
  const out: number[][] = HEAT_STEPS.map(() => []);
  for (const { line, weight } of lines) {
    const step = heatStep(weight);
    if (step >= 0) {
      out[step].push(line);
    }
  }
  return out;
}

/** The colour of a step: one warm hue, more opaque as the line is hotter. */
export function heatColor(step: number): string {
  return `rgba(255, 96, 32, ${HEAT_STEPS[step].alpha})`;
}
