import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { BROWSE_LABEL, formatAge, formatSize, parseTraceEntries, tracePicks } from '../traces';

const NOW = 1_700_000_000_000; // ms

describe('the Open Trace picker', () => {
  const entries = parseTraceEntries([
    { path: '/ws/runs/b.pt.trace.json.gz', name: 'b.pt.trace.json.gz (active)', mtimeNs: (NOW - 5 * 60_000) * 1e6, size: 3_500_000, active: true },
    { path: '/ws/a_trace.json', name: 'a_trace.json', mtimeNs: (NOW - 3 * 86_400_000) * 1e6, size: 900, active: false },
    { name: 'no path' },
    null,
  ]);

  test("the server's list, checked", () => {
    assert.equal(entries.length, 2);
    assert.equal(parseTraceEntries({ not: 'a list' }).length, 0);
  });

  test('one pick per trace in the given order, the active one marked, then Browse…', () => {
    const picks = tracePicks(entries, (p) => p.replace('/ws/', ''), NOW);
    assert.deepEqual(picks.map((p) => p.label), ['$(check) b.pt.trace.json.gz', 'a_trace.json', BROWSE_LABEL]);
    assert.deepEqual(picks.map((p) => p.path), ['/ws/runs/b.pt.trace.json.gz', '/ws/a_trace.json', undefined]);
    assert.equal(picks[0].description, '3.3 MB · 5 min ago');
    assert.equal(picks[0].detail, 'runs/b.pt.trace.json.gz');
    assert.equal(picks[1].description, '900 B · 3 days ago');
  });

  test('no traces: only Browse…', () => {
    assert.deepEqual(tracePicks([], (p) => p, NOW).map((p) => p.label), [BROWSE_LABEL]);
  });
});

describe('formatting', () => {
  test('sizes', () => {
    assert.deepEqual([0, 1023, 1024, 1_500_000, 1.2e9].map(formatSize), ['0 B', '1023 B', '1.0 KB', '1.4 MB', '1.1 GB']);
  });

  test('ages', () => {
    assert.deepEqual([-5, 30_000, 61_000, 3 * 3_600_000, 50 * 3_600_000].map(formatAge),
      ['just now', 'just now', '1 min ago', '3 h ago', '2 days ago']);
  });
});

describe('runs and ranks', () => {
  test('grouped by run, ranks in order within a run, a heading per run', () => {
    const entries = parseTraceEntries([
      { path: '/ws/runs/a/r1.json', mtimeNs: NOW * 1e6, size: 10, active: false, rank: 1, run: 'runs/a' },
      { path: '/ws/runs/b/t.json', mtimeNs: NOW * 1e6, size: 10, active: false, rank: null, run: 'runs/b' },
      { path: '/ws/runs/a/r0.json', mtimeNs: NOW * 1e6, size: 10, active: true, rank: 0, run: 'runs/a' },
      { path: '/ws/x.json', mtimeNs: NOW * 1e6, size: 10, active: false, rank: 2.5, run: 7 },
    ]);
    assert.deepEqual(entries.map((e) => [e.rank, e.run]), [[1, 'runs/a'], [null, 'runs/b'], [0, 'runs/a'], [null, null]]);
    const picks = tracePicks(entries, (p) => p, NOW);
    assert.deepEqual(picks.map((p) => [p.label, p.kind]), [
      ['run: runs/a', -1],
      ['$(check) rank 0 · r0.json', undefined],
      ['rank 1 · r1.json', undefined],
      ['run: runs/b', -1],
      ['t.json', undefined],
      ['run: (workspace folder)', -1],
      ['x.json', undefined],
      [BROWSE_LABEL, undefined],
    ]);
  });
});
