import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { HEAT_STEPS, heatBuckets, heatColor, heatStep, parseHeat } from '../heat';

describe('heat', () => {
  test("the server's answer, checked", () => {
    assert.deepEqual(parseHeat({ lines: [
      { line: 3, weight: 1, regime: 'compute', ns: 5 },
      { line: 4, weight: 0.3 },
      { line: -1, weight: 0.5 },
      { line: 2.5, weight: 0.5 },
      { line: 6, weight: 0 },
      { line: 7, weight: 'hot' },
      null,
    ] }), [{ line: 3, weight: 1, regime: 'compute' }, { line: 4, weight: 0.3, regime: null }]);
    assert.deepEqual(parseHeat(undefined), []);
    assert.deepEqual(parseHeat({ lines: 'x' }), []);
  });

  test('steps: a cold line stays plain, the hottest gets the strongest colour', () => {
    assert.deepEqual([0.01, 0.02, 0.1, 0.3, 0.6, 1].map(heatStep), [-1, 0, 1, 2, 3, 4]);
    assert.deepEqual(heatBuckets([{ line: 9, weight: 1, regime: null }, { line: 1, weight: 0.3, regime: null },
      { line: 2, weight: 0.001, regime: null }]), [[], [], [1], [], [9]]);
    assert.equal(heatColor(HEAT_STEPS.length - 1), 'rgba(255, 96, 32, 0.5)');
  });
});
