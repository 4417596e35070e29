// Bundle the extension and vscode-languageclient into one file, so the .vsix ships no node_modules.
// `node esbuild.mjs [--production]` (minified, no source map) -> dist/extension.js
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
