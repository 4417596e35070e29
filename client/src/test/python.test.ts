import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { activeInterpreter, onActiveInterpreterChange, type PythonExtensionApi } from '../python';

const disposable = { dispose: () => undefined };

describe("the Python extension's active environment", () => {
  test('the environments API: the resolved executable', async () => {
    const seen: unknown[] = [];
    const api: PythonExtensionApi = {
      environments: {
        getActiveEnvironmentPath: (resource) => { seen.push(resource); return { id: 'x', path: '/envs/x' }; },
        resolveEnvironment: async () => ({ executable: { uri: { fsPath: '/envs/x/bin/python' } } }),
      },
    };
    assert.deepEqual(await activeInterpreter(api, 'file:///ws'), ['/envs/x/bin/python']);
    assert.deepEqual(seen, ['file:///ws']);
  });

  test('the older settings API: the whole execution command', async () => {
    const api: PythonExtensionApi = { settings: { getExecutionDetails: () => ({ execCommand: ['conda', 'run', '-n', 'x', 'python'] }) } };
    assert.deepEqual(await activeInterpreter(api), ['conda', 'run', '-n', 'x', 'python']);
  });

  test('an environment without an executable falls back to the settings API', async () => {
    const api: PythonExtensionApi = {
      environments: { getActiveEnvironmentPath: () => undefined, resolveEnvironment: async () => undefined },
      settings: { getExecutionDetails: () => ({ execCommand: ['/usr/bin/python3'] }) },
    };
    assert.deepEqual(await activeInterpreter(api), ['/usr/bin/python3']);
  });

  test('no extension, no environment, or an extension that throws: undefined', async () => {
    assert.equal(await activeInterpreter(undefined), undefined);
    assert.equal(await activeInterpreter({ settings: { getExecutionDetails: () => ({ execCommand: undefined }) } }), undefined);
    const throwing: PythonExtensionApi = {
      environments: {
        getActiveEnvironmentPath: () => { throw new Error('not ready'); },
        resolveEnvironment: async () => undefined,
      },
    };
    assert.equal(await activeInterpreter(throwing), undefined);
  });

  test('change events: the environments API if there is one, else the settings API', () => {
    const subscribed: string[] = [];
    const both: PythonExtensionApi = {
      environments: {
        getActiveEnvironmentPath: () => undefined,
        resolveEnvironment: async () => undefined,
        onDidChangeActiveEnvironmentPath: () => { subscribed.push('environments'); return disposable; },
      },
      settings: {
        getExecutionDetails: () => ({ execCommand: undefined }),
        onDidChangeExecutionDetails: () => { subscribed.push('settings'); return disposable; },
      },
    };
    assert.equal(onActiveInterpreterChange(both, () => undefined).length, 1);
    assert.deepEqual(subscribed, ['environments']);
    assert.deepEqual(onActiveInterpreterChange(undefined, () => undefined), []);
  });
});
