/**
 * Which Python runs the language server, and whether brrr_trace can be imported there.
 *
 * No `vscode` import: `extension.ts` reads the setting, the workspace trust and the Python
 * extension's environment, and passes plain values in; `node --test` covers the rest.
 */
import { execFile } from 'node:child_process';

/** Where the interpreter came from; an interpreter from the Python extension follows its changes. */
export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
  /** The executable. */
  command: string;
  /** Arguments before ours (an environment manager's `conda run -p …` wrapper, for example). */
  args: string[];
  source: InterpreterSource;
}

export interface InterpreterInputs {
  /** `brrr-trace.interpreter` as configured (in an untrusted workspace: the user-level value only). */
  setting?: string;
  /** Whether the workspace is trusted. Untrusted: the Python extension's environment is not used. */
  trusted: boolean;
  /** The Python extension's active environment: the executable, then any wrapper arguments. */
  active?: readonly string[];
  /** For `${workspaceFolder}`, `${userHome}` and `${env:NAME}` in the setting. */
  variables?: Variables;
}

export interface Variables {
  workspaceFolder?: string;
  userHome?: string;
  env?: Record<string, string | undefined>;
}

/** The interpreter used when neither the setting nor the Python extension names one. */
export const DEFAULT_PYTHON = 'python3';

/**
 * The interpreter to run: the `brrr-trace.interpreter` setting, else the Python extension's active
 * environment (only in a trusted workspace: it may be a virtual environment inside the workspace),
 * else `python3` from the PATH.
 */
export function resolveInterpreter(inputs: InterpreterInputs): Interpreter {
  const setting = expandVariables(inputs.setting?.trim() ?? '', inputs.variables ?? {});
  if (setting) {
    return { command: setting, args: [], source: 'setting' };
  }
  const active = (inputs.active ?? []).filter((part) => part !== '');
  if (inputs.trusted && active.length > 0) {
    return { command: active[0], args: active.slice(1), source: 'python-extension' };
  }
  return { command: DEFAULT_PYTHON, args: [], source: 'default' };
}

/** Expand `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~/`; others stay. */
export function expandVariables(value: string, variables: Variables): string {
  let out = value.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g,
    (whole, name: string, envName: string | undefined) => {
      if (envName !== undefined) {
        return variables.env?.[envName] ?? '';
      }
      const replacement = name === 'workspaceFolder' ? variables.workspaceFolder : variables.userHome;
      return replacement ?? whole;
    });
  if ((out === '~' || out.startsWith('~/')) && variables.userHome) {
    out = variables.userHome + out.slice(1);
  }
  return out;
}

/**
 * The environment of every Python the extension starts: the editor's, plus PYTHONSAFEPATH, which
 * (Python 3.11+) keeps the current folder off `sys.path`, so that a workspace's `msgspec.py` is
 * never imported in place of the real one. The server also runs from the extension's own folder,
 * which covers Python 3.10; `python -m brrr_trace` drops that entry itself too.
 */
export function isolatedEnv(base: Record<string, string | undefined>): Record<string, string | undefined> {
  return { ...base, PYTHONSAFEPATH: '1' };
}

/** How the language server is started with an interpreter. No `--stdio`: stdio is the default. */
export function serverCommand(interpreter: Interpreter, env: Record<string, string | undefined> = process.env):
  { command: string; args: string[]; env: Record<string, string | undefined> } {
  return {
    command: interpreter.command,
    args: [...interpreter.args, '-m', 'brrr_trace', 'serve'],
    env: isolatedEnv(env),
  };
}

/** The interpreter as a person would type it, for messages and the log. */
export function describeInterpreter(interpreter: Interpreter): string {
  const where = {
    'setting': 'from brrr-trace.interpreter',
    'python-extension': "the Python extension's active environment",
    'default': 'the default; set brrr-trace.interpreter to choose another',
  }[interpreter.source];
  return `${[interpreter.command, ...interpreter.args].join(' ')} (${where})`;
}

// --- is brrr_trace there? ----------------------------------------------------------------------

/** Run in the interpreter: imports the package (not the server's dependencies: they come with it). */
export const IMPORT_CHECK = 'import sys, brrr_trace; sys.stdout.write(brrr_trace.__version__)';

export type CheckResult =
  | { ok: true; version: string }
  | { ok: false; problem: 'no-interpreter' | 'not-installed' | 'failed'; detail: string };

/** What a finished `execFile` gave: the error (null when the exit status was 0) and the output. */
export interface ExecOutcome {
  error: (Error & { code?: string | number | null }) | null;
  stdout: string;
  stderr: string;
}

export type Exec = (command: string, args: string[], cwd?: string,
  env?: Record<string, string | undefined>) => Promise<ExecOutcome>;

/** `execFile` with a timeout, never rejecting: the outcome carries the error. */
export const execFileOutcome: Exec = (command, args, cwd, env) =>
  new Promise((resolve) => {
    const options = { cwd, env, timeout: 30_000, windowsHide: true };
    execFile(command, args, options, (error, stdout, stderr) => {
      resolve({ error, stdout: String(stdout), stderr: String(stderr) });
    });
  });

/**
 * Whether `brrr_trace` imports in the interpreter; if not, why. Run it in the folder the server
 * will run in (`-c` and `-m` both put that folder first on `sys.path`).
 */
export async function checkInterpreter(interpreter: Interpreter, cwd?: string,
  exec: Exec = execFileOutcome): Promise<CheckResult> {
  const outcome = await exec(interpreter.command, [...interpreter.args, '-c', IMPORT_CHECK], cwd,
    isolatedEnv(process.env));
  return classifyCheck(outcome);
}

export function classifyCheck({ error, stdout, stderr }: ExecOutcome): CheckResult {
  if (error === null) {
    return { ok: true, version: stdout.trim() };
  }
  if (error.code === 'ENOENT' || error.code === 'EACCES') {
    return { ok: false, problem: 'no-interpreter', detail: error.message };
  }
  const lastLine = stderr.trim().split(/\r?\n/).pop() ?? '';
  if (/^ModuleNotFoundError: No module named '?brrr_trace'?/.test(lastLine)) {
    return { ok: false, problem: 'not-installed', detail: lastLine };
  }
  return { ok: false, problem: 'failed', detail: lastLine || error.message };
}

/**
 * The wheel the .vsix carries (`wheels/brrr_trace-<version>-py3-none-any.whl`, built from the
 * checkout by `npm run package`), among the names of that folder; the newest version if several.
 */
export function bundledWheel(names: readonly string[]): string | undefined {
  const wheels = names.filter((name) => /^brrr_trace-[0-9][^-]*-py3-none-any\.whl$/.test(name));
  const version = (name: string) => name.split('-')[1].split('.').map((part) => parseInt(part, 10) || 0);
  wheels.sort((a, b) => {
    const [x, y] = [version(a), version(b)];
    for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
      if ((x[i] ?? 0) !== (y[i] ?? 0)) {
        return (y[i] ?? 0) - (x[i] ?? 0);
      }
    }
    return 0;
  });
  return wheels[0];
}

/** What pip installs: the bundled wheel (its dependencies from the index), else the package. */
export function installArgs(wheel?: string): string[] {
  return ['-m', 'pip', 'install', wheel ?? 'brrr-trace'];
}

/** `<python> -m pip install <wheel>`, quoted for a POSIX shell or for PowerShell. */
export function installCommand(interpreter: Interpreter, wheel?: string,
  platform: string = process.platform): string {
  return commandLine(interpreter, installArgs(wheel), platform);
}

/** `<python> -m brrr_trace analyze <trace> --source-root <folder>`: the full report, in a terminal. */
export function analyzeCommand(interpreter: Interpreter, trace: string, sourceRoot?: string,
  platform: string = process.platform): string {
  const args = ['-m', 'brrr_trace', 'analyze', trace];
  if (sourceRoot) {
    args.push('--source-root', sourceRoot);
  }
  return commandLine(interpreter, args, platform);
}

/** The interpreter and `args` as one line to type into a terminal. */
export function commandLine(interpreter: Interpreter, args: readonly string[],
  platform: string = process.platform): string {
  const quote = platform === 'win32' ? quotePowerShell : quotePosix;
  const words = [interpreter.command, ...interpreter.args, ...args].map(quote);
  // PowerShell runs a quoted path only after the call operator.
  if (platform === 'win32' && words[0].startsWith("'")) {
    words[0] = `& ${words[0]}`;
  }
  return words.join(' ');
}

function quotePosix(word: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

function quotePowerShell(word: string): string {
  return /^[A-Za-z0-9_./:\\=@%+-]+$/.test(word) ? word : `'${word.replace(/'/g, "''")}'`;
}

/** The one sentence shown when the server cannot start in this interpreter. */
export function checkMessage(interpreter: Interpreter, result: CheckResult, wheel?: string): string {
  const python = describeInterpreter(interpreter);
  if (result.ok) {
    return `brrr-trace ${result.version} in ${python}`;
  }
  switch (result.problem) {
    case 'no-interpreter':
      return `brrr-trace could not run the Python interpreter ${python}: ${result.detail}. ` +
        'Set brrr-trace.interpreter to a Python that has brrr-trace installed.';
    case 'not-installed':
      return `brrr-trace is not installed in ${python}. ` +
        (wheel ? 'Install the brrr-trace wheel this extension carries (its dependencies come from the package index) with: ' : 'Install it with: ') +
        installCommand(interpreter, wheel);
    case 'failed':
      return `brrr-trace could not be imported in ${python}: ${result.detail}`;
  }
}
