// Bundle the extension and vscode-languageclient into one file, so the .vsix ships no node_modules.
// `node esbuild.mjs [--production]` (minified, no source map) -> dist/extension.js
import * as fs from 'node:fs';
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');

await esbuild.build({
  entryPoints: ['src/extension.ts'],
  bundle: true,
  outfile: 'dist/extension.js',
  external: ['vscode'], // provided by the editor at run time
  format: 'cjs',
  platform: 'node',
  target: 'node18', // VS Code 1.91's extension host runs Node 18+
  minify: production,
  sourcemap: !production,
  logLevel: 'info',
});

// The timeline panel draws with the HTML report's own script and style (one copy, the Python
// package's); the .vsix carries them in dist/, so the webview loads nothing from anywhere else.
for (const name of ['timeline.js', 'report.css']) {
  fs.copyFileSync(new URL(`../brrr_trace/render/assets/${name}`, import.meta.url), new URL(`dist/${name}`, import.meta.url));
}
