/** Test helper: the extension's package.json (out/test/ -> ../../package.json). */
import * as fs from 'node:fs';
import * as path from 'node:path';

export const CLIENT_ROOT = path.resolve(__dirname, '..', '..');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function readManifest(): any {
  return JSON.parse(fs.readFileSync(path.join(CLIENT_ROOT, 'package.json'), 'utf8'));
}
