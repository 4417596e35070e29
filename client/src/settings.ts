/**
 * The `brrr-trace.*` settings: `package.json` is their one schema. Every key there is sent to the
 * server except the client's own (`interpreter`); `tests/server/test_client_schema.py` checks the
 * rest against the server's `Settings`.
 *
 * No `vscode` import: `extension.ts` passes a getter over `WorkspaceConfiguration`.
 */

export const SECTION = 'brrr-trace';

/** Keys the extension reads itself and never sends: they choose how the server is started. */
export const CLIENT_ONLY_KEYS: readonly string[] = ['interpreter'];

/** Changing one of these restarts the server (the others are sent to the running server). */
export const RESTART_KEYS: readonly string[] = ['interpreter'];

interface PackageJson {
  contributes?: { configuration?: { properties?: Record<string, unknown> } | Array<{ properties?: Record<string, unknown> }> };
}

/** Every `brrr-trace.*` key of the manifest, without the prefix, in manifest order. */
export function settingKeys(manifest: PackageJson): string[] {
  const configuration = manifest.contributes?.configuration;
  const blocks = Array.isArray(configuration) ? configuration : configuration ? [configuration] : [];
  const prefix = `${SECTION}.`;
  return blocks
    .flatMap((block) => Object.keys(block.properties ?? {}))
    .filter((key) => key.startsWith(prefix))
    .map((key) => key.slice(prefix.length));
}

/** The keys the server understands: the manifest's, less the client's own. */
export function serverKeys(manifest: PackageJson): string[] {
  return settingKeys(manifest).filter((key) => !CLIENT_ONLY_KEYS.includes(key));
}

/** The server's settings as flat `{key: value}`, read with `get` (a `WorkspaceConfiguration` get). */
export function serverSettings(get: (key: string) => unknown, keys: readonly string[]):
  Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const value = get(key);
    if (value !== undefined) {
      out[key] = value;
    }
  }
  return out;
}

/**
 * What the server gets in `initializationOptions` and in `workspace/didChangeConfiguration`:
 * the settings under their section, as the server's `parse_settings` reads them.
 */
export function settingsPayload(get: (key: string) => unknown, keys: readonly string[]):
  Record<string, Record<string, unknown>> {
  return { [SECTION]: serverSettings(get, keys) };
}

/**
 * An answer to the server's `workspace/configuration` request, without the client's own keys
 * (the server would log them as unknown). Anything that is not an object is passed through.
 */
export function withoutClientKeys(section: unknown): unknown {
  if (section === null || typeof section !== 'object' || Array.isArray(section)) {
    return section;
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(section)) {
    if (!CLIENT_ONLY_KEYS.includes(key)) {
      out[key] = value;
    }
  }
  return out;
}

/** Given which `brrr-trace.<key>` settings a change touched: restart, tell the server, or nothing. */
export function reaction(affects: (key: string) => boolean, keys: readonly string[]):
  'restart' | 'notify' | 'none' {
  if (RESTART_KEYS.some(affects)) {
    return 'restart';
  }
  return keys.some((key) => !CLIENT_ONLY_KEYS.includes(key) && affects(key)) ? 'notify' : 'none';
}
