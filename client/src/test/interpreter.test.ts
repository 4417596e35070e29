import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import {
  analyzeCommand,
  checkInterpreter,
  bundledWheel,
  checkMessage,
  classifyCheck,
  DEFAULT_PYTHON,
  type Exec,
  execFileOutcome,
  expandVariables,
  IMPORT_CHECK,
  installArgs,
  installCommand,
  type Interpreter,
  resolveInterpreter,
  serverCommand,
} from '../interpreter';

const REPO = path.resolve(__dirname, '..', '..', '..');

describe('resolveInterpreter: setting, else the Python extension, else python3', () => {
  test('the setting wins over the active environment', () => {
    const got = resolveInterpreter({ setting: '/opt/py/bin/python', trusted: true, active: ['/venv/bin/python'] });
    assert.deepEqual(got, { command: '/opt/py/bin/python', args: [], source: 'setting' });
  });

  test('an empty or blank setting falls back to the active environment, wrapper arguments kept', () => {
    for (const setting of [undefined, '', '   ']) {
      const got = resolveInterpreter({ setting, trusted: true, active: ['conda', 'run', '-p', '/envs/x', 'python'] });
      assert.deepEqual(got, { command: 'conda', args: ['run', '-p', '/envs/x', 'python'], source: 'python-extension' });
    }
  });

  test('nothing configured and no Python extension: python3', () => {
    assert.deepEqual(resolveInterpreter({ trusted: true }), { command: DEFAULT_PYTHON, args: [], source: 'default' });
    assert.deepEqual(resolveInterpreter({ trusted: true, active: [''] }).source, 'default');
  });

  test("an untrusted workspace never runs the Python extension's environment", () => {
    const got = resolveInterpreter({ trusted: false, active: ['/ws/.venv/bin/python'] });
    assert.deepEqual(got, { command: 'python3', args: [], source: 'default' });
  });

  test('an untrusted workspace still runs the interpreter it was given (the user-level value)', () => {
    assert.equal(resolveInterpreter({ setting: '/usr/bin/python3.11', trusted: false }).command, '/usr/bin/python3.11');
  });

  test('variables in the setting are expanded', () => {
    const got = resolveInterpreter({
      setting: '${workspaceFolder}/.venv/bin/python',
      trusted: true,
      variables: { workspaceFolder: '/home/me/proj' },
    });
    assert.equal(got.command, '/home/me/proj/.venv/bin/python');
  });
});

describe('expandVariables', () => {
  const variables = { workspaceFolder: '/ws', userHome: '/home/me', env: { VENV: '/envs/a' } };

  test('workspaceFolder, userHome, env and ~', () => {
    assert.equal(expandVariables('${workspaceFolder}/py', variables), '/ws/py');
    assert.equal(expandVariables('${userHome}/py', variables), '/home/me/py');
    assert.equal(expandVariables('${env:VENV}/bin/python', variables), '/envs/a/bin/python');
    assert.equal(expandVariables('~/venv/bin/python', variables), '/home/me/venv/bin/python');
  });

  test('an unset env variable is empty; unknown variables and a missing folder stay as written', () => {
    assert.equal(expandVariables('${env:NOPE}python', variables), 'python');
    assert.equal(expandVariables('${config:python.path}', variables), '${config:python.path}');
    assert.equal(expandVariables('${workspaceFolder}/py', {}), '${workspaceFolder}/py');
  });
});

describe('serverCommand', () => {
  test('python -m brrr_trace serve, with no --stdio (stdio is the default)', () => {
    const { command, args } = serverCommand({ command: '/v/bin/python', args: [], source: 'setting' });
    assert.deepEqual({ command, args }, { command: '/v/bin/python', args: ['-m', 'brrr_trace', 'serve'] });
  });

  test('no import from the current folder: PYTHONSAFEPATH, on top of the editor\'s environment', () => {
    const { env } = serverCommand({ command: 'python3', args: [], source: 'default' }, { PATH: '/bin' });
    assert.deepEqual(env, { PATH: '/bin', PYTHONSAFEPATH: '1' });
  });

  test('wrapper arguments come first', () => {
    assert.deepEqual(serverCommand({ command: 'conda', args: ['run', '-n', 'x', 'python'], source: 'python-extension' }).args,
      ['run', '-n', 'x', 'python', '-m', 'brrr_trace', 'serve']);
  });
});

describe('checking that brrr_trace imports', () => {
  const python: Interpreter = { command: '/v/bin/python', args: ['-X', 'utf8'], source: 'setting' };

  test('runs the import check in the given folder', async () => {
    const calls: Array<[string, string[], string | undefined, string | undefined]> = [];
    const exec: Exec = async (command, args, cwd, env) => {
      calls.push([command, args, cwd, env?.PYTHONSAFEPATH]);
      return { error: null, stdout: '0.1.0', stderr: '' };
    };
    assert.deepEqual(await checkInterpreter(python, '/ext', exec), { ok: true, version: '0.1.0' });
    assert.deepEqual(calls, [['/v/bin/python', ['-X', 'utf8', '-c', IMPORT_CHECK], '/ext', '1']]);
  });

  test('a missing interpreter, a missing package, and anything else', () => {
    const enoent = Object.assign(new Error('spawn /nope ENOENT'), { code: 'ENOENT' });
    assert.equal(classifyCheck({ error: enoent, stdout: '', stderr: '' }).ok, false);
    assert.deepEqual(classifyCheck({ error: enoent, stdout: '', stderr: '' }),
      { ok: false, problem: 'no-interpreter', detail: 'spawn /nope ENOENT' });
    const exit1 = Object.assign(new Error('Command failed'), { code: 1 });
    const notFound = 'Traceback (most recent call last):\n  File "<string>", line 1\nModuleNotFoundError: No module named \'brrr_trace\'\n';
    assert.deepEqual(classifyCheck({ error: exit1, stdout: '', stderr: notFound }),
      { ok: false, problem: 'not-installed', detail: "ModuleNotFoundError: No module named 'brrr_trace'" });
    const broken = 'Traceback (most recent call last):\nModuleNotFoundError: No module named \'numpy\'\n';
    assert.deepEqual(classifyCheck({ error: exit1, stdout: '', stderr: broken }),
      { ok: false, problem: 'failed', detail: "ModuleNotFoundError: No module named 'numpy'" });
  });

  test('a real interpreter that does not exist', async () => {
    const result = await checkInterpreter({ command: '/nonexistent/bin/python', args: [], source: 'setting' }, undefined, execFileOutcome);
    assert.equal(result.ok, false);
    assert.equal(!result.ok && result.problem, 'no-interpreter');
  });

  const venvPython = path.join(REPO, '.venv', 'bin', 'python');
  test('the repository venv has brrr_trace', { skip: !fs.existsSync(venvPython) && 'no .venv here' }, async () => {
    const result = await checkInterpreter({ command: venvPython, args: [], source: 'setting' }, __dirname);
    assert.ok(result.ok, JSON.stringify(result));
    assert.match(result.ok ? result.version : '', /^\d+\.\d+/);
  });

  test('a real interpreter without brrr_trace (isolated mode hides any installed copy)', async () => {
    // -I: no user site, no current folder; -S: no site-packages at all.
    const result = await checkInterpreter({ command: 'python3', args: ['-I', '-S'], source: 'default' }, __dirname);
    assert.deepEqual(result.ok ? 'imported' : result.problem, 'not-installed');
  });
});

describe('what the user is told', () => {
  test('the install command uses the same interpreter, quoted for the shell', () => {
    assert.equal(installCommand({ command: '/v/bin/python', args: [], source: 'setting' }, undefined, 'linux'),
      '/v/bin/python -m pip install brrr-trace');
    assert.equal(installCommand({ command: "/home/o'neil/my env/python", args: [], source: 'setting' }, undefined, 'linux'),
      "'/home/o'\\''neil/my env/python' -m pip install brrr-trace");
    assert.equal(installCommand({ command: 'C:\\Program Files\\Python311\\python.exe', args: [], source: 'setting' }, undefined, 'win32'),
      "& 'C:\\Program Files\\Python311\\python.exe' -m pip install brrr-trace");
  });

  test('the full-report command', () => {
    assert.equal(analyzeCommand({ command: 'python3', args: [], source: 'default' }, '/t/a b.json.gz', undefined, 'linux'),
      "python3 -m brrr_trace analyze '/t/a b.json.gz'");
    assert.equal(analyzeCommand({ command: 'python3', args: [], source: 'default' }, '/t/a.json', '/src', 'linux'),
      'python3 -m brrr_trace analyze /t/a.json --source-root /src');
  });

  test('not installed: the message says where, and how to install it', () => {
    const python: Interpreter = { command: '/v/bin/python', args: [], source: 'python-extension' };
    const text = checkMessage(python, { ok: false, problem: 'not-installed', detail: '' });
    assert.match(text, /not installed in \/v\/bin\/python \(the Python extension's active environment\)/);
    assert.ok(text.endsWith(installCommand(python)), text);
  });

  test('not installed, with the wheel the extension carries: that wheel is what pip installs', () => {
    const python: Interpreter = { command: '/venv/bin/python', args: [], source: 'setting' };
    const wheel = '/ext/wheels/brrr_trace-0.1.0-py3-none-any.whl';
    const text = checkMessage(python, { ok: false, problem: 'not-installed', detail: '' }, wheel);
    assert.match(text, /Install the brrr-trace wheel this extension carries \(its dependencies come from the package index\)/);
    assert.ok(text.endsWith('/venv/bin/python -m pip install /ext/wheels/brrr_trace-0.1.0-py3-none-any.whl'), text);
    assert.deepEqual(installArgs(wheel), ['-m', 'pip', 'install', wheel]);
    assert.deepEqual(installArgs(), ['-m', 'pip', 'install', 'brrr-trace']);
  });

  test('the bundled wheel is found among the files of its folder, newest version first', () => {
    assert.equal(bundledWheel(['README', 'brrr_trace-0.1.0-py3-none-any.whl']), 'brrr_trace-0.1.0-py3-none-any.whl');
    assert.equal(bundledWheel(['brrr_trace-0.9.0-py3-none-any.whl', 'brrr_trace-0.10.0-py3-none-any.whl']),
      'brrr_trace-0.10.0-py3-none-any.whl');
    assert.equal(bundledWheel(['brrr_trace-0.1.0.tar.gz', 'other-1.0-py3-none-any.whl']), undefined);
  });

  test('no interpreter: the message names the setting to change', () => {
    const text = checkMessage({ command: 'python3', args: [], source: 'default' },
      { ok: false, problem: 'no-interpreter', detail: 'spawn python3 ENOENT' });
    assert.match(text, /could not run the Python interpreter python3 .*brrr-trace\.interpreter/);
  });
});
