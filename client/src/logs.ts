/**
 * The server's stderr in the output channel. The server writes each of its own log records twice:
 * to stderr (for any client, and for a crash before the connection) and as `window/logMessage`,
 * which vscode-languageclient already puts in the channel at the right level (and which follows
 * `brrr-trace.logLevel`). So its own records are dropped here; everything else on stderr (pygls'
 * warnings, a traceback, stray output) is kept.
 *
 * No `vscode` import.
 */

export type Level = 'debug' | 'info' | 'warn' | 'error';

/** `brrr-trace INFO brrr_trace.server: loaded ...` (brrr_trace/server/logging.py `_FORMAT`). */
const RECORD = /^brrr-trace (DEBUG|INFO|WARNING|ERROR|CRITICAL) ([\w.]+): (.*)$/;
const LEVELS: Record<string, Level> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};

/** One stderr line as a log entry, or undefined when the channel gets it as a log message. */
export function stderrEntry(line: string): { level: Level; text: string } | undefined {
  const match = RECORD.exec(line);
  if (!match) {
    return line.trim() ? { level: 'error', text: line } : undefined;
  }
  const [, level, logger, message] = match;
  if (logger === 'brrr_trace' || logger.startsWith('brrr_trace.')) {
    return undefined;
  }
  return { level: LEVELS[level], text: `${logger}: ${message}` };
}
