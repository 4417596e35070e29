import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { highlightMessage, makeNonce, parseReveal, scriptJson, timelinePage, timelineRules } from '../timeline';

const CSP_SOURCE = 'https://x.vscode-cdn.net';

function page(data: unknown, note?: string): string {
  return timelinePage({ cspSource: CSP_SOURCE, nonce: 'N0nce', script: 'draw();', style: '.brrr-tl-bar { gap: 6px; }', data, note });
}

describe('timeline panel', () => {
  test('the page: a policy that lets only the nonced script and style apply, nothing load', () => {
    const html = page({ version: 1, devices: [] });
    const csp = /http-equiv="Content-Security-Policy" content="([^"]*)"/.exec(html)?.[1];
    assert.equal(csp, "default-src &#39;none&#39;; img-src https://x.vscode-cdn.net; script-src &#39;nonce-N0nce&#39;; "
      + 'style-src https://x.vscode-cdn.net &#39;nonce-N0nce&#39;; base-uri &#39;none&#39;; form-action &#39;none&#39;');
    assert.ok(html.includes('<script nonce="N0nce">draw();</script>'));
    assert.ok(html.includes('<style nonce="N0nce">'));
    assert.ok(html.includes('<div class="brrr-timeline" id="timeline"><script type="application/json" '
      + 'class="brrr-timeline-data">{"version":1,"devices":[]}</script></div>'));
    assert.equal((html.match(/<script/g) ?? []).length, 2); // the data block and the script, no other
  });

  test('a trace string cannot end the data block or add markup', () => {
    const hostile = { names: ['</script><script>alert(1)</script>', 'a&b\u2028'] };
    assert.equal(scriptJson(hostile), '{"names":["\\u003c/script\\u003e\\u003cscript\\u003ealert(1)\\u003c/script\\u003e",'
      + '"a\\u0026b\\u2028"]}');
    assert.deepEqual(JSON.parse(scriptJson(hostile)), hostile);
    const html = page(hostile, '<b>run</b>');
    assert.ok(!html.includes('<script>alert'));
    assert.ok(html.includes('<p class="brrr-panel-note">&#60;b&#62;run&#60;/b&#62;</p>'));
  });

  test('nothing loaded: a sentence, no timeline', () => {
    const html = page(null);
    assert.ok(html.includes('<p class="brrr-panel-note">No trace is loaded yet.</p>'));
    assert.ok(!html.includes('brrr-timeline-data'));
  });

  test("only the timeline's rules of the report's style", () => {
    assert.equal(timelineRules('body { margin: 0 }\n.brrr-tl-bar { gap: 6px; }\n.brrr-legend { x }\n.brrr-tl-canvas { y }'),
      '.brrr-tl-bar { gap: 6px; }\n.brrr-tl-canvas { y }');
  });

  test('a nonce is fresh each time and base64', () => {
    const a = makeNonce();
    assert.match(a, /^[A-Za-z0-9+/]{24}$/);
    assert.notEqual(a, makeNonce());
  });

  test("the script's reveal, checked (the page is not trusted)", () => {
    assert.deepEqual(parseReveal({ type: 'reveal', path: '/ws/train.py', file: 'train.py', line: 306, function: 'step', kind: 'kernel' }),
      { path: '/ws/train.py', file: 'train.py', line: 306 });
    assert.deepEqual(parseReveal({ type: 'reveal', path: null, file: 'train.py', line: 3 }), { path: null, file: 'train.py', line: 3 });
    for (const bad of [null, 'reveal', { type: 'zoom', path: '/a.py', line: 1 }, { type: 'reveal', path: '/a.py', line: 0 },
      { type: 'reveal', path: '/a.py', line: 2.5 }, { type: 'reveal', path: '/a.py', line: '3' }, { type: 'reveal', path: null, line: 3 }]) {
      assert.equal(parseReveal(bad), undefined, JSON.stringify(bad));
    }
  });

  test("the cursor's line goes to the script 1-based", () => {
    assert.deepEqual(highlightMessage('/ws/train.py', 305), { type: 'highlight', path: '/ws/train.py', line: 306 });
  });
});
