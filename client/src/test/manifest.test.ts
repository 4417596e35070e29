/**
 * package.json is the settings schema and the command list. The server-side half of the contract
 * (every key is one of the server's settings, with the same default) is
 * tests/server/test_client_schema.py; the last test here repeats it when a Python with brrr_trace
 * is at hand.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { CLIENT_ROOT, readManifest } from './manifest';
import { CLIENT_ONLY_KEYS, serverKeys, settingKeys } from '../settings';
import { CMD_OPEN_TRACE, CMD_PICK_RUN, CMD_RESTART, CMD_SHOW_LOGS, CMD_SHOW_SUMMARY } from '../status';
import { CMD_SHOW_TIMELINE } from '../timeline';

const manifest = readManifest();
const properties: Record<string, Record<string, unknown>> = manifest.contributes.configuration.properties;

describe('package.json', () => {
  test('every setting has a type, a default, a scope and a description', () => {
    for (const [key, schema] of Object.entries(properties)) {
      assert.ok(key.startsWith('brrr-trace.'), key);
      for (const field of ['type', 'default', 'scope', 'markdownDescription']) {
        assert.ok(field in schema, `${key} has no ${field}`);
      }
      if (Array.isArray(schema.enum)) {
        assert.ok(schema.enum.includes(schema.default), `${key}: default not in its enum`);
      }
    }
  });

  test('each default has the declared type', () => {
    const typeOf = (value: unknown) => value === null ? 'null' : Array.isArray(value) ? 'array'
      : Number.isInteger(value) ? 'integer' : typeof value;
    for (const [key, schema] of Object.entries(properties)) {
      const types = ([] as unknown[]).concat(schema.type);
      const actual = typeOf(schema.default);
      assert.ok(types.includes(actual) || (actual === 'integer' && types.includes('number')),
        `${key}: default ${JSON.stringify(schema.default)} is not ${types.join(' | ')}`);
    }
  });

  test('untrusted workspaces: limited, and the interpreter setting is restricted', () => {
    assert.deepEqual(manifest.capabilities.untrustedWorkspaces.supported, 'limited');
    assert.deepEqual(manifest.capabilities.untrustedWorkspaces.restrictedConfigurations, ['brrr-trace.interpreter']);
  });

  test('the Python extension is a soft dependency', () => {
    assert.equal(manifest.extensionDependencies, undefined);
    assert.equal(manifest.extensionPack, undefined);
  });

  test('the six commands, and the client registers exactly those', () => {
    const commands = manifest.contributes.commands.map((c: { command: string }) => c.command);
    assert.deepEqual(commands, [CMD_OPEN_TRACE, CMD_PICK_RUN, CMD_SHOW_SUMMARY, CMD_SHOW_TIMELINE, CMD_RESTART, CMD_SHOW_LOGS]);
    const source = fs.readFileSync(path.join(CLIENT_ROOT, 'src', 'extension.ts'), 'utf8');
    const registered = [...source.matchAll(/registerCommand\((CMD_[A-Z_]+)/g)].map((m) => m[1]);
    assert.deepEqual(registered, ['CMD_OPEN_TRACE', 'CMD_PICK_RUN', 'CMD_SHOW_SUMMARY', 'CMD_SHOW_TIMELINE', 'CMD_RESTART',
      'CMD_SHOW_LOGS']);
  });

  test('the bundle is the entry point; the engine is not newer than the typings or code-server 1.100', () => {
    assert.equal(manifest.main, './dist/extension.js');
    assert.equal(manifest.engines.vscode, '^1.91.0');
    assert.equal(manifest.devDependencies['@types/vscode'], '1.91.0');
    for (const [name, version] of Object.entries({ ...manifest.dependencies, ...manifest.devDependencies })) {
      assert.match(String(version), /^\d+\.\d+\.\d+$/, `${name} is not pinned`);
    }
  });

  test('only extension.ts imports vscode', () => {
    const src = path.join(CLIENT_ROOT, 'src');
    const importers = fs.readdirSync(src).filter((name) => name.endsWith('.ts'))
      .filter((name) => /from ['"]vscode(-languageclient[^'"]*)?['"]/.test(fs.readFileSync(path.join(src, name), 'utf8')));
    assert.deepEqual(importers, ['extension.ts']);
  });
});

/** A Python that can import brrr_trace: $BRRR_TRACE_PYTHON, the repository's .venv, or python3. */
function findPython(): string | undefined {
  const candidates = [process.env.BRRR_TRACE_PYTHON, path.join(CLIENT_ROOT, '..', '.venv', 'bin', 'python'), 'python3'];
  for (const python of candidates) {
    if (!python) {
      continue;
    }
    try {
      execFileSync(python, ['-c', 'import brrr_trace.server.settings'], { cwd: path.join(CLIENT_ROOT, '..'), stdio: 'ignore' });
      return python;
    } catch {
      // next one
    }
  }
  return undefined;
}

const python = findPython();

test('the settings are the server\'s settings, with its defaults', { skip: !python && 'no Python with brrr_trace' }, () => {
  const script = 'import json; from brrr_trace.server.settings import defaults_by_key; print(json.dumps(defaults_by_key()))';
  const server: Record<string, unknown> = JSON.parse(execFileSync(python!, ['-c', script], {
    cwd: path.join(CLIENT_ROOT, '..'), encoding: 'utf8' }));
  assert.deepEqual([...serverKeys(manifest)].sort(), Object.keys(server).sort());
  for (const key of serverKeys(manifest)) {
    assert.deepEqual(properties[`brrr-trace.${key}`].default, server[key], `default of brrr-trace.${key}`);
  }
  assert.ok(CLIENT_ONLY_KEYS.every((key) => settingKeys(manifest).includes(key) && !(key in server)));
});
