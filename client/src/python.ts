/**
 * The Python extension (`ms-python.python`), a soft dependency: when it is installed, its active
 * environment is the interpreter (unless `brrr-trace.interpreter` names one). It is never required
 * (no `extensionDependencies`); code-server, for one, cannot install it.
 *
 * No `vscode` import: only the shapes of the two API surfaces it exports are declared here
 * (`environments`, the current one, and `settings.getExecutionDetails`, the older one).
 */

export const PYTHON_EXTENSION_ID = 'ms-python.python';

export interface Disposable {
  dispose(): unknown;
}

type Event<T> = (listener: (event: T) => unknown) => Disposable;

export interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: unknown): { id: string; path: string } | undefined;
    resolveEnvironment(environment: { id: string; path: string } | string):
      Promise<{ executable: { uri?: { fsPath: string } } } | undefined>;
    onDidChangeActiveEnvironmentPath?: Event<unknown>;
  };
  settings?: {
    getExecutionDetails(resource?: unknown): { execCommand: string[] | undefined };
    onDidChangeExecutionDetails?: Event<unknown>;
  };
}

/**
 * The active environment's interpreter as a command (the executable, then any wrapper arguments),
 * or undefined when the extension has none or fails. `resource` is the workspace folder's URI.
 */
export async function activeInterpreter(api: PythonExtensionApi | undefined, resource?: unknown):
  Promise<string[] | undefined> {
  if (!api) {
    return undefined;
  }
  try {
    const environments = api.environments;
    if (environments) {
      const path = environments.getActiveEnvironmentPath(resource);
      const resolved = path ? await environments.resolveEnvironment(path) : undefined;
      const executable = resolved?.executable.uri?.fsPath;
      if (executable) {
        return [executable];
      }
    }
    const command = api.settings?.getExecutionDetails(resource).execCommand;
    if (command && command.length > 0 && command[0]) {
      return [...command];
    }
  } catch {
    // An extension that fails to answer is an extension that is not there.
  }
  return undefined;
}

/** Subscribe to the extension's "the active interpreter changed" events (both API surfaces). */
export function onActiveInterpreterChange(api: PythonExtensionApi | undefined, listener: () => unknown):
  Disposable[] {
  if (!api) {
    return [];
  }
  const subscriptions: Disposable[] = [];
  if (api.environments?.onDidChangeActiveEnvironmentPath) {
    subscriptions.push(api.environments.onDidChangeActiveEnvironmentPath(() => listener()));
  } else if (api.settings?.onDidChangeExecutionDetails) {
    subscriptions.push(api.settings.onDidChangeExecutionDetails(() => listener()));
  }
  return subscriptions;
}
