import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { readManifest } from './manifest';
import {
  CLIENT_ONLY_KEYS,
  reaction,
  serverKeys,
  serverSettings,
  settingKeys,
  settingsPayload,
  withoutClientKeys,
} from '../settings';

describe('settings: package.json is the schema', () => {
  const manifest = readManifest();

  test('the keys come from contributes.configuration, prefix removed, in order', () => {
    const keys = settingKeys(manifest);
    assert.equal(keys[0], 'interpreter');
    assert.ok(keys.includes('pathMappings') && keys.includes('threshold') && keys.includes('traces'));
    assert.ok(keys.every((key) => !key.startsWith('brrr-trace.')));
  });

  test("the server gets every key but the client's own", () => {
    const keys = serverKeys(manifest);
    assert.deepEqual(keys, settingKeys(manifest).filter((key) => key !== 'interpreter'));
    assert.deepEqual(CLIENT_ONLY_KEYS, ['interpreter']);
  });

  test('a configuration given as a list of blocks is read too', () => {
    const keys = settingKeys({ contributes: { configuration: [
      { properties: { 'brrr-trace.a': {} } }, { properties: { 'brrr-trace.b': {}, 'other.c': {} } }] } });
    assert.deepEqual(keys, ['a', 'b']);
  });
});

describe('what the server is sent', () => {
  const values: Record<string, unknown> = { threshold: 0.05, traces: ['*.json'], trace: null, interpreter: '/py' };
  const get = (key: string) => values[key];

  test('initializationOptions: the section, with the server keys that have a value', () => {
    assert.deepEqual(settingsPayload(get, ['threshold', 'traces', 'trace', 'rank']),
      { 'brrr-trace': { threshold: 0.05, traces: ['*.json'], trace: null } });
    assert.deepEqual(serverSettings(get, []), {});
  });

  test("an answer to workspace/configuration loses the client's keys", () => {
    assert.deepEqual(withoutClientKeys({ interpreter: '/py', threshold: 0.02 }), { threshold: 0.02 });
    assert.equal(withoutClientKeys(null), null);
    assert.deepEqual(withoutClientKeys([1, 2]), [1, 2]);
    assert.equal(withoutClientKeys('x'), 'x');
  });
});

describe('reaction to a settings change', () => {
  const keys = ['threshold', 'traces', 'pathMappings'];
  const touched = (...changed: string[]) => (key: string) => changed.includes(key);

  test('the interpreter restarts the server', () => {
    assert.equal(reaction(touched('interpreter'), keys), 'restart');
    assert.equal(reaction(touched('interpreter', 'threshold'), keys), 'restart');
  });

  test('a server setting is sent to the running server', () => {
    assert.equal(reaction(touched('threshold'), keys), 'notify');
    assert.equal(reaction(touched('pathMappings'), keys), 'notify');
  });

  test('anything else is ignored', () => {
    assert.equal(reaction(touched(), keys), 'none');
    assert.equal(reaction(touched('editor.fontSize'), keys), 'none');
  });
});
