/**
 * The VS Code side of brrr-trace: start `python -m brrr_trace serve` with vscode-languageclient,
 * keep a status-bar item, and register its commands. The only module that imports `vscode`;
 * what it decides is in the modules beside it (tested with `node --test`).
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type { Readable } from 'node:stream';
import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
  State,
} from 'vscode-languageclient/node';
import {
  analyzeCommand,
  bundledWheel,
  type CheckResult,
  checkInterpreter,
  checkMessage,
  describeInterpreter,
  installArgs,
  installCommand,
  type Interpreter,
  isolatedEnv,
  resolveInterpreter,
  serverCommand,
} from './interpreter';
import {
  activeInterpreter,
  onActiveInterpreterChange,
  PYTHON_EXTENSION_ID,
  type PythonExtensionApi,
} from './python';
import { stderrEntry } from './logs';
import { reaction, SECTION, serverKeys, settingsPayload, withoutClientKeys } from './settings';
import {
  type ClientState,
  CMD_HEAT,
  CMD_LIST_TRACES,
  CMD_OPEN_TRACE,
  CMD_PICK_RUN,
  CMD_RESTART,
  CMD_SELECT_TRACE,
  CMD_SHOW_LOGS,
  CMD_SHOW_SUMMARY,
  CMD_STATUS,
  parseStatus,
  pickerView,
  STATUS_NOTIFICATION,
  statusBarView,
  summaryText,
} from './status';
import { parseTraceEntries, tracePicks } from './traces';
import { HEAT_STEPS, heatBuckets, heatColor, parseHeat } from './heat';
import {
  CMD_SHOW_TIMELINE,
  CMD_TIMELINE,
  highlightMessage,
  makeNonce,
  parseReveal,
  type Reveal,
  TIMELINE_SCRIPT,
  TIMELINE_STYLE,
  TIMELINE_VIEW_TYPE,
  timelinePage,
  timelineRules,
} from './timeline';

let controller: Controller | undefined;
const RESTART_DELAY_MS = 500;

export function activate(context: vscode.ExtensionContext): void {
  controller = new Controller(context);
  context.subscriptions.push(controller);
  void controller.restart();
}

export async function deactivate(): Promise<void> {
  await controller?.stopClient();
}

function eachLine(input: Readable, handle: (line: string) => void): void {
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on('line', handle);
}

class Controller implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private interpreter: Interpreter | undefined;
  private state: ClientState = { kind: 'starting' };
  private queue: Promise<void> = Promise.resolve();
  private pythonApi: PythonExtensionApi | undefined;
  private pythonApiLoaded = false;
  private readonly keys: string[];
  private readonly log: vscode.LogOutputChannel;
  private readonly item: vscode.StatusBarItem;
  private readonly pickerItem: vscode.StatusBarItem;
  private readonly heatTypes: vscode.TextEditorDecorationType[];
  private heatGeneration = 0;
  private panel: vscode.WebviewPanel | undefined;
  private panelTrace: string | null | undefined; // the trace the panel draws
  private readonly disposables: vscode.Disposable[] = [];
  private clientDisposables: vscode.Disposable[] = [];
  private restartTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.keys = serverKeys(context.extension.packageJSON);
    this.log = vscode.window.createOutputChannel('brrr-trace', { log: true });
    this.item = vscode.window.createStatusBarItem('brrr-trace.status', vscode.StatusBarAlignment.Left, 10);
    this.item.name = 'brrr-trace';
    this.pickerItem = vscode.window.createStatusBarItem('brrr-trace.runs', vscode.StatusBarAlignment.Left, 9);
    this.pickerItem.name = 'brrr-trace: runs and ranks';
    this.pickerItem.command = CMD_PICK_RUN;
    this.heatTypes = HEAT_STEPS.map((_, step) => vscode.window.createTextEditorDecorationType({
      isWholeLine: true,
      backgroundColor: heatColor(step),
      overviewRulerColor: step >= 2 ? heatColor(step) : undefined,
      overviewRulerLane: vscode.OverviewRulerLane.Left,
    }));
    this.render();
    this.item.show();
    this.disposables.push(
      this.log,
      this.item,
      this.pickerItem,
      ...this.heatTypes,
      vscode.window.onDidChangeVisibleTextEditors(() => void this.refreshHeat()),
      vscode.workspace.onDidChangeTextDocument((event) => {
        if (vscode.window.visibleTextEditors.some((e) => e.document === event.document)) {
          void this.refreshHeat();
        }
      }),
      vscode.commands.registerCommand(CMD_OPEN_TRACE, () => this.openTrace()),
      vscode.commands.registerCommand(CMD_PICK_RUN, () => this.openTrace()),
      vscode.commands.registerCommand(CMD_SHOW_SUMMARY, () => this.showSummary()),
      vscode.commands.registerCommand(CMD_SHOW_TIMELINE, () => this.showTimeline()),
      vscode.commands.registerCommand(CMD_RESTART, () => this.restart()),
      vscode.commands.registerCommand(CMD_SHOW_LOGS, () => this.log.show()),
      vscode.window.onDidChangeTextEditorSelection((event) => this.highlightInPanel(event.textEditor)),
      vscode.workspace.onDidChangeConfiguration((event) => this.onSettingsChanged(event)),
      vscode.workspace.onDidGrantWorkspaceTrust(() => this.restart()),
    );
  }

  dispose(): void {
    clearTimeout(this.restartTimer);
    this.disposables.forEach((d) => d.dispose());
    this.panel?.dispose();
  }

  /** Stop the server if it runs, then start it again; calls are queued, never interleaved. */
  restart(): Promise<void> {
    this.queue = this.queue.then(() => this.start()).catch((error) => {
      this.log.error(`restarting the server failed: ${error}`);
    });
    return this.queue;
  }

  async stopClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.clientDisposables.forEach((d) => d.dispose());
    this.clientDisposables = [];
    if (client) {
      try {
        await client.dispose(2000);
      } catch (error) {
        this.log.warn(`stopping the server: ${error}`);
      }
    }
  }

  private async start(): Promise<void> {
    await this.stopClient();
    this.setState({ kind: 'starting' });
    const interpreter = await this.resolveInterpreter();
    this.interpreter = interpreter;
    this.log.info(`interpreter: ${describeInterpreter(interpreter)}`);
    // Run from the extension's own folder, never the workspace: `-m` puts the current folder first
    // on sys.path, and a workspace's `types.py` or `logging.py` would shadow the standard library.
    const cwd = this.context.extensionUri.fsPath;
    const check = await checkInterpreter(interpreter, cwd);
    const message = checkMessage(interpreter, check, this.wheel());
    if (!check.ok) {
      this.log.error(message);
      this.setState({ kind: 'stopped', reason: message });
      void this.offerFix(interpreter, check);
      return;
    }
    this.log.info(message);

    const { command, args, env } = serverCommand(interpreter);
    const serverOptions: ServerOptions = { command, args, options: { cwd, env } }; // no transport: stdio
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file', language: 'python' }],
      outputChannel: this.log,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      stdioOptions: {
        stdout: (input, channel) => eachLine(input, (line) => channel.info(line)),
        stderr: (input, channel) => eachLine(input, (line) => {
          const entry = stderrEntry(line);
          if (entry) {
            channel[entry.level](entry.text);
          }
        }),
      },
      initializationOptions: this.settingsPayload(),
      middleware: {
        workspace: {
          // The server asks for the `brrr-trace` section; it has no use for the client's own keys.
          configuration: async (params, token, next) => {
            const answer = await next(params, token);
            if (!Array.isArray(answer)) {
              return answer;
            }
            return answer.map((value, i) => (params.items[i]?.section === SECTION ? withoutClientKeys(value) : value));
          },
        },
      },
    };
    const client = new LanguageClient('brrr-trace', 'brrr-trace', serverOptions, clientOptions);
    this.clientDisposables.push(
      client.onNotification(STATUS_NOTIFICATION, (status: unknown) => {
        if (this.client === client) {
          this.setState({ kind: 'running', status: parseStatus(status) });
          void this.refreshHeat();
          void this.refreshPanel();
        }
      }),
      client.onDidChangeState((event) => {
        if (this.client !== client) {
          return;
        }
        if (event.newState === State.Stopped) {
          this.setState({ kind: 'stopped', reason: 'The brrr-trace language server stopped; see its log.' });
        } else if (event.newState === State.Running && this.state.kind === 'stopped') {
          void this.refreshStatus(); // vscode-languageclient restarted a server that had crashed
        }
      }),
    );
    this.client = client;
    try {
      await client.start();
    } catch (error) {
      this.log.error(`the language server did not start: ${error}`);
      this.setState({ kind: 'stopped', reason: `The brrr-trace language server did not start: ${error}` });
      return;
    }
    if (this.state.kind === 'starting') {
      this.setState({ kind: 'running' });
    }
    await this.refreshStatus();
    await this.refreshHeat();
  }

  private async resolveInterpreter(): Promise<Interpreter> {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const trusted = vscode.workspace.isTrusted;
    const configuration = vscode.workspace.getConfiguration(SECTION, folder?.uri);
    // Untrusted: only the user's own setting (package.json also declares it restricted).
    const setting = trusted
      ? configuration.get<string>('interpreter')
      : configuration.inspect<string>('interpreter')?.globalValue;
    let active: string[] | undefined;
    if (trusted && !setting?.trim()) {
      active = await activeInterpreter(await this.pythonExtension(), folder?.uri);
    }
    return resolveInterpreter({
      setting,
      trusted,
      active,
      variables: { workspaceFolder: folder?.uri.fsPath, userHome: process.env.HOME ?? process.env.USERPROFILE, env: process.env },
    });
  }

  /** The Python extension's API, if that extension is installed (activated on first use). */
  private async pythonExtension(): Promise<PythonExtensionApi | undefined> {
    if (this.pythonApiLoaded) {
      return this.pythonApi;
    }
    this.pythonApiLoaded = true;
    const extension = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
    if (!extension) {
      this.log.info('The Python extension is not installed: using brrr-trace.interpreter, else python3.');
      return undefined;
    }
    try {
      this.pythonApi = extension.isActive ? extension.exports : await extension.activate();
    } catch (error) {
      this.log.warn(`The Python extension did not activate: ${error}`);
      return undefined;
    }
    this.disposables.push(...onActiveInterpreterChange(this.pythonApi, () => {
      if (this.interpreter?.source !== 'setting') {
        this.log.info("The Python extension's active environment changed: restarting the server.");
        void this.restart();
      }
    }));
    return this.pythonApi;
  }

  private settingsPayload(): Record<string, Record<string, unknown>> {
    const configuration = vscode.workspace.getConfiguration(SECTION);
    return settingsPayload((key) => configuration.get(key), this.keys);
  }

  private onSettingsChanged(event: vscode.ConfigurationChangeEvent): void {
    const what = reaction((key) => event.affectsConfiguration(`${SECTION}.${key}`), this.keys);
    if (what === 'restart') {
      // The Settings editor writes as the user types: restart once the typing has stopped.
      clearTimeout(this.restartTimer);
      this.restartTimer = setTimeout(() => {
        this.log.info('brrr-trace.interpreter changed: restarting the server.');
        void this.restart();
      }, RESTART_DELAY_MS);
    } else if (what === 'notify' && this.client?.isRunning()) {
      void this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: this.settingsPayload() })
        .then(() => this.refreshHeat());
    }
  }

  /** The brrr-trace wheel this extension carries (built into the .vsix), if it carries one. */
  private wheel(): string | undefined {
    const folder = path.join(this.context.extensionUri.fsPath, 'wheels');
    let names: string[] = [];
    try {
      names = fs.readdirSync(folder);
    } catch {
      return undefined;
    }
    const name = bundledWheel(names);
    return name ? path.join(folder, name) : undefined;
  }

  private async offerFix(interpreter: Interpreter, check: CheckResult & { ok: false }): Promise<void> {
    const wheel = this.wheel();
    const installHere = 'Install brrr-trace';
    const install = 'Install in Terminal';
    const copy = 'Copy Install Command';
    const choose = 'Choose Interpreter';
    const logs = 'Show Logs';
    const buttons = check.problem === 'not-installed'
      ? [...(wheel ? [installHere] : []), install, copy, choose] : [choose, logs];
    const answer = await vscode.window.showErrorMessage(checkMessage(interpreter, check, wheel), ...buttons);
    const command = installCommand(interpreter, wheel);
    if (answer === installHere && wheel) {
      await this.installWheel(interpreter, wheel);
    } else if (answer === install) {
      const terminal = vscode.window.createTerminal({ name: 'brrr-trace: install' });
      terminal.show();
      terminal.sendText(command);
      const restart = await vscode.window.showInformationMessage(
        'Restart the brrr-trace server once the installation has finished.', 'Restart Server');
      if (restart) {
        await this.restart();
      }
    } else if (answer === copy) {
      await vscode.env.clipboard.writeText(command);
    } else if (answer === choose) {
      await vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.interpreter`);
    } else if (answer === logs) {
      this.log.show();
    }
  }

  /** pip-install the bundled wheel into the interpreter (its dependencies from the index), then
   * start the server there. pip's output goes to the log. */
  private async installWheel(interpreter: Interpreter, wheel: string): Promise<void> {
    const args = [...interpreter.args, ...installArgs(wheel)];
    this.log.info(`installing: ${installCommand(interpreter, wheel)}`);
    const ok = await vscode.window.withProgress({
      location: vscode.ProgressLocation.Notification,
      title: `brrr-trace: installing ${path.basename(wheel)}`,
    }, () => new Promise<boolean>((resolve) => {
      const options = { cwd: this.context.extensionUri.fsPath, env: isolatedEnv(process.env), timeout: 900_000,
        maxBuffer: 64 * 1024 * 1024, windowsHide: true };
      execFile(interpreter.command, args, options, (error, stdout, stderr) => {
        for (const line of `${stdout}\n${stderr}`.split(/\r?\n/)) {
          if (line.trim()) {
            this.log.info(`pip: ${line}`);
          }
        }
        if (error) {
          this.log.error(`pip install failed: ${error.message}`);
        }
        resolve(error === null);
      });
    }));
    if (ok) {
      void vscode.window.showInformationMessage(`brrr-trace: installed ${path.basename(wheel)}; starting the server.`);
      await this.restart();
    } else {
      const answer = await vscode.window.showErrorMessage(
        `brrr-trace: pip could not install ${path.basename(wheel)} into ${interpreter.command}; see the log.`, 'Show Logs');
      if (answer) {
        this.log.show();
      }
    }
  }

  // --- heat ------------------------------------------------------------------------------------

  /** Colour the lines of the visible Python editors by their time (the server's `heat`). */
  private async refreshHeat(): Promise<void> {
    const generation = ++this.heatGeneration;
    const client = this.client;
    const editors = vscode.window.visibleTextEditors.filter((e) => e.document.languageId === 'python'
      && e.document.uri.scheme === 'file');
    for (const editor of editors) {
      let buckets: number[][] = HEAT_STEPS.map(() => []);
      if (client?.isRunning()) {
        try {
          const answer = await client.sendRequest(ExecuteCommandRequest.type,
            { command: CMD_HEAT, arguments: [editor.document.uri.toString()] });
          buckets = heatBuckets(parseHeat(answer));
        } catch (error) {
          this.log.debug(`${CMD_HEAT} failed: ${error}`);
        }
      }
      if (generation !== this.heatGeneration) {
        return; // a newer refresh is on its way
      }
      const lines = editor.document.lineCount;
      this.heatTypes.forEach((type, step) => {
        editor.setDecorations(type, buckets[step].filter((n) => n < lines)
          .map((n) => new vscode.Range(n, 0, n, 0)));
      });
    }
  }

  // --- the timeline panel ----------------------------------------------------------------------

  /** Open (or bring back) the panel beside the editor, drawing the loaded trace's timeline. */
  private async showTimeline(): Promise<void> {
    if (this.panel) {
      this.panel.reveal(vscode.ViewColumn.Beside, true);
    } else {
      const dist = vscode.Uri.joinPath(this.context.extensionUri, 'dist');
      const panel = vscode.window.createWebviewPanel(TIMELINE_VIEW_TYPE, 'brrr-trace: Timeline',
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: true, retainContextWhenHidden: true, localResourceRoots: [dist] });
      this.panel = panel;
      this.panelTrace = undefined;
      panel.onDidDispose(() => {
        if (this.panel === panel) {
          this.panel = undefined;
        }
      });
      panel.webview.onDidReceiveMessage((message: unknown) => {
        const reveal = parseReveal(message);
        if (reveal) {
          void this.revealLine(reveal);
        }
      });
    }
    await this.refreshPanel(true);
  }

  /** Draw the loaded trace again, once it is another one (or when asked to). */
  private async refreshPanel(force = false): Promise<void> {
    const panel = this.panel;
    const client = this.client;
    if (!panel) {
      return;
    }
    const trace = this.state.kind === 'running' ? this.state.status?.trace ?? null : null;
    if (!force && trace === this.panelTrace) {
      return;
    }
    let data: unknown = null;
    let note: string | undefined;
    if (client?.isRunning()) {
      try {
        data = await client.sendRequest(ExecuteCommandRequest.type, { command: CMD_TIMELINE, arguments: [] });
      } catch (error) {
        this.log.warn(`${CMD_TIMELINE} failed: ${error}`);
        note = 'The timeline could not be read from the server; see brrr-trace: Show Logs.';
      }
    } else {
      note = 'The brrr-trace language server is not running.';
    }
    if (this.panel !== panel) {
      return;
    }
    this.panelTrace = trace;
    if (data !== null && trace) {
      note = vscode.workspace.asRelativePath(trace, true);
    }
    const dist = vscode.Uri.joinPath(this.context.extensionUri, 'dist');
    const read = (name: string) => fs.readFileSync(vscode.Uri.joinPath(dist, name).fsPath, 'utf8');
    panel.webview.html = timelinePage({
      cspSource: panel.webview.cspSource,
      nonce: makeNonce(),
      script: read(TIMELINE_SCRIPT),
      style: timelineRules(read(TIMELINE_STYLE)),
      data,
      note,
    });
    const editor = vscode.window.activeTextEditor;
    if (editor) {
      this.highlightInPanel(editor);
    }
  }

  /** A click on the timeline: open its file and put the cursor on its line. */
  private async revealLine(reveal: Reveal): Promise<void> {
    let uri = reveal.path ? vscode.Uri.file(reveal.path) : undefined;
    if (!uri) {
      // The server found no local file: look for the trace's name in the workspace.
      const found = await vscode.workspace.findFiles(`**/${reveal.file.replace(/[[\]{}*?!]/g, '?')}`, undefined, 2);
      uri = found.length === 1 ? found[0] : undefined;
    }
    if (!uri) {
      void vscode.window.showWarningMessage(`brrr-trace: ${reveal.file}:${reveal.line} is not a file of this workspace.`);
      return;
    }
    const column = vscode.window.visibleTextEditors.find((e) => e.document.uri.scheme === 'file')?.viewColumn
      ?? vscode.ViewColumn.One;
    const position = new vscode.Position(reveal.line - 1, 0);
    try {
      const document = await vscode.workspace.openTextDocument(uri);
      await vscode.window.showTextDocument(document, {
        viewColumn: column,
        selection: new vscode.Range(position, position),
      });
    } catch (error) {
      void vscode.window.showWarningMessage(`brrr-trace: could not open ${uri.fsPath}: ${error}`);
    }
  }

  /** The cursor moved in a Python editor: mark its line's segments in the panel. */
  private highlightInPanel(editor: vscode.TextEditor): void {
    if (!this.panel || editor.document.languageId !== 'python' || editor.document.uri.scheme !== 'file') {
      return;
    }
    void this.panel.webview.postMessage(highlightMessage(editor.document.uri.fsPath, editor.selection.active.line));
  }

  // --- talking to the server --------------------------------------------------------------------

  /** Run one of the server's commands (`workspace/executeCommand`); undefined when it is not up. */
  private async serverCommand(command: string, args: unknown[] = []): Promise<unknown> {
    const client = this.client;
    if (!client?.isRunning()) {
      const answer = await vscode.window.showWarningMessage(
        'The brrr-trace language server is not running.', 'Restart Server', 'Show Logs');
      if (answer === 'Restart Server') {
        await this.restart();
      } else if (answer === 'Show Logs') {
        this.log.show();
      }
      return undefined;
    }
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  }

  private async refreshStatus(): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) {
      return;
    }
    try {
      const status = await client.sendRequest(ExecuteCommandRequest.type, { command: CMD_STATUS, arguments: [] });
      if (this.client === client) {
        this.setState({ kind: 'running', status: parseStatus(status) });
      }
    } catch (error) {
      this.log.warn(`${CMD_STATUS} failed: ${error}`);
    }
  }

  private async openTrace(): Promise<void> {
    const entries = parseTraceEntries(await this.serverCommand(CMD_LIST_TRACES));
    if (!this.client) {
      return;
    }
    const relative = (path: string) => vscode.workspace.asRelativePath(path, true);
    const picks = tracePicks(entries, relative) as (vscode.QuickPickItem & { path?: string })[];
    const pick = await vscode.window.showQuickPick(picks, {
      title: 'brrr-trace: which trace should the editor show?',
      placeHolder: entries.length ? 'Traces in this workspace by run, newest run first' : 'No trace matches brrr-trace.traces',
      matchOnDetail: true,
    });
    if (!pick) {
      return;
    }
    let chosen = pick.path;
    if (chosen === undefined) {
      const picked = await vscode.window.showOpenDialog({
        canSelectMany: false,
        openLabel: 'Show this trace',
        defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
        filters: { 'PyTorch profiler traces': ['json', 'gz'], 'All files': ['*'] },
      });
      chosen = picked?.[0]?.fsPath;
    }
    if (chosen !== undefined) {
      await this.serverCommand(CMD_SELECT_TRACE, [chosen]);
    }
    void this.refreshHeat();
  }

  private async showSummary(): Promise<void> {
    const answer = await this.serverCommand(CMD_STATUS);
    if (!this.client) {
      return;
    }
    const status = parseStatus(answer);
    this.setState({ kind: 'running', status });
    const report = 'Full Report in Terminal';
    const open = 'Open Trace…';
    const buttons = status.trace ? [report, open] : [open];
    const text = [`brrr-trace: ${summaryText(status)}`, status.error].filter(Boolean).join(' ');
    const choice = await vscode.window.showInformationMessage(text, ...buttons);
    if (choice === open) {
      await this.openTrace();
    } else if (choice === report && status.trace && this.interpreter) {
      const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
      // In the workspace (the report's source root), so without the current folder on sys.path.
      const env = { PYTHONSAFEPATH: '1' };
      const terminal = vscode.window.createTerminal({ name: 'brrr-trace: report', cwd: folder, env });
      terminal.show();
      terminal.sendText(analyzeCommand(this.interpreter, status.trace));
    }
  }

  // --- the status-bar item -----------------------------------------------------------------------

  private setState(state: ClientState): void {
    this.state = state;
    this.render();
  }

  private render(): void {
    const view = statusBarView(this.state);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.command = view.command;
    this.item.backgroundColor = view.severity
      ? new vscode.ThemeColor(`statusBarItem.${view.severity}Background`)
      : undefined;
    const picker = pickerView(this.state.kind === 'running' ? this.state.status : undefined);
    if (picker) {
      this.pickerItem.text = picker.text;
      this.pickerItem.tooltip = picker.tooltip;
      this.pickerItem.show();
    } else {
      this.pickerItem.hide();
    }
  }
}
