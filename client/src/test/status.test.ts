import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import {
  basename,
  CMD_OPEN_TRACE,
  CMD_SHOW_LOGS,
  CMD_SHOW_SUMMARY,
  formatDuration,
  parseStatus,
  pickerView,
  runText,
  shorten,
  statusBarView,
  summaryText,
  utilizationText,
} from '../status';

/** What `brrr-trace.status` answers for the item_in_loop H200 fixture. */
const LOADED = {
  trace: '/ws/traces/item_in_loop.pt.trace.json.gz',
  loading: null,
  error: null,
  lines: 4,
  findings: 2,
  gpuUtilization: 0.7318,
  spanNs: 23_564_000,
  watching: true,
};

describe('parseStatus', () => {
  test("the server's answer", () => {
    assert.deepEqual(parseStatus(LOADED), {
      trace: LOADED.trace, loading: null, error: null, lines: 4, findings: 2, gpuUtilization: 0.7318, spanNs: 23_564_000,
      run: null, rank: null, traces: 0,
    });
  });

  test('anything malformed reads as nothing loaded', () => {
    const empty = { trace: null, loading: null, error: null, lines: 0, findings: 0, gpuUtilization: null, spanNs: 0,
      run: null, rank: null, traces: 0 };
    assert.deepEqual(parseStatus(undefined), empty);
    assert.deepEqual(parseStatus('x'), empty);
    assert.deepEqual(parseStatus({ trace: 3, lines: 'many', gpuUtilization: Number.NaN }), empty);
  });
});

describe('the status-bar item', () => {
  test('which run and rank is shown, and the picker when there are several traces', () => {
    const status = parseStatus({ ...LOADED, run: 'runs/step', rank: 1, traces: 3 });
    const view = statusBarView({ kind: 'running', status });
    assert.equal(view.text, '$(pulse) item_in_loop.pt.trace.json.gz · run runs/step · rank 1 · GPU 73%');
    assert.match(view.tooltip, /item_in_loop\.pt\.trace\.json\.gz \(run runs\/step · rank 1\): GPU 73\.2% busy/);
    assert.equal(pickerView(status)?.text, '$(list-selection) 3 traces');
    assert.equal(pickerView(parseStatus({ ...LOADED, traces: 1 })), undefined);
    assert.equal(runText({ run: '.', rank: null }), '');
  });

  test('loaded: the trace and the GPU utilization; a click shows the summary', () => {
    const view = statusBarView({ kind: 'running', status: parseStatus(LOADED) });
    assert.equal(view.text, '$(pulse) item_in_loop.pt.trace.json.gz · GPU 73%');
    assert.equal(view.command, CMD_SHOW_SUMMARY);
    assert.equal(view.severity, undefined);
    assert.match(view.tooltip, /GPU 73\.2% busy over a 23\.6 ms span; 4 source lines, 2 findings/);
  });

  test('loading', () => {
    const view = statusBarView({ kind: 'running', status: parseStatus({ ...LOADED, trace: null, loading: '/ws/t.json' }) });
    assert.equal(view.text, '$(sync~spin) t.json');
  });

  test('a failed reload keeps the last trace, with a warning', () => {
    const view = statusBarView({ kind: 'running', status: parseStatus({ ...LOADED, error: 'could not read new.json' }) });
    assert.equal(view.severity, 'warning');
    assert.match(view.tooltip, /could not read new\.json/);
  });

  test('an error and no trace: a click picks a trace', () => {
    const view = statusBarView({ kind: 'running', status: parseStatus({ error: 'bad trace' }) });
    assert.deepEqual([view.text, view.command, view.severity], ['$(warning) brrr-trace', CMD_OPEN_TRACE, 'warning']);
  });

  test('no trace at all', () => {
    for (const status of [undefined, parseStatus({})]) {
      const view = statusBarView({ kind: 'running', status });
      assert.deepEqual([view.text, view.command], ['$(circle-slash) brrr-trace: no trace', CMD_OPEN_TRACE]);
    }
  });

  test('starting, and stopped (a click shows the log)', () => {
    assert.equal(statusBarView({ kind: 'starting' }).text, '$(loading~spin) brrr-trace');
    const stopped = statusBarView({ kind: 'stopped', reason: 'brrr-trace is not installed in python3.' });
    assert.deepEqual([stopped.command, stopped.severity], [CMD_SHOW_LOGS, 'error']);
    assert.match(stopped.tooltip, /not installed in python3/);
  });

  test('a long trace name is shortened in the middle', () => {
    const long = `/t/${'rank0_step'.repeat(8)}.pt.trace.json.gz`;
    const view = statusBarView({ kind: 'running', status: parseStatus({ ...LOADED, trace: long }) });
    assert.match(view.text, /^\$\(pulse\) rank0_step.*….*\.pt\.trace\.json\.gz · GPU 73%$/);
  });
});

describe('formatting', () => {
  test('summary', () => {
    assert.equal(summaryText(parseStatus(LOADED)),
      'item_in_loop.pt.trace.json.gz: GPU 73.2% busy over a 23.6 ms span; 4 source lines, 2 findings.');
    assert.equal(summaryText(parseStatus({ ...LOADED, gpuUtilization: null, lines: 1, findings: 1 })),
      'item_in_loop.pt.trace.json.gz: no GPU activity; 1 source line, 1 finding.');
    assert.equal(summaryText(parseStatus({})), 'no trace loaded');
  });

  test('durations as the server writes them', () => {
    assert.deepEqual([812, 35_200, 16_300_000, 2_410_000_000].map(formatDuration), ['812 ns', '35.2 µs', '16.3 ms', '2.41 s']);
  });

  test('utilization, names', () => {
    assert.equal(utilizationText(0.995), 'GPU 100%');
    assert.equal(utilizationText(null), 'no GPU activity');
    assert.equal(basename('C:\\runs\\a.json'), 'a.json');
    assert.equal(shorten('abcdefghij', 5), 'ab…ij');
    assert.equal(shorten('abc', 5), 'abc');
  });
});
