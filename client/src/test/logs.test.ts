import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { stderrEntry } from '../logs';

test("the server's own records are dropped: they also arrive as window/logMessage", () => {
  assert.equal(stderrEntry('brrr-trace INFO brrr_trace.server: loaded t.json.gz: 4 lines, GPU 73% busy'), undefined);
  assert.equal(stderrEntry('brrr-trace ERROR brrr_trace: loading failed'), undefined);
});

test("pygls' records keep their level", () => {
  assert.deepEqual(stderrEntry('brrr-trace WARNING pygls.protocol.json_rpc: Cancel notification for unknown message id'),
    { level: 'warn', text: 'pygls.protocol.json_rpc: Cancel notification for unknown message id' });
});

test('anything else (a traceback, stray output) is an error; blank lines go', () => {
  assert.deepEqual(stderrEntry('Traceback (most recent call last):'), { level: 'error', text: 'Traceback (most recent call last):' });
  assert.deepEqual(stderrEntry("ModuleNotFoundError: No module named 'pygls'"),
    { level: 'error', text: "ModuleNotFoundError: No module named 'pygls'" });
  assert.equal(stderrEntry('   '), undefined);
});
