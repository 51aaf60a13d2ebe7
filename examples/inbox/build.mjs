// Bundles src/main.js and copies index.html into dist/.
import { copyFile, mkdir, rm } from 'node:fs/promises';
import * as esbuild from 'esbuild';

await rm('dist', { recursive: true, force: true });
await mkdir('dist');
await esbuild.build({
  entryPoints: ['src/main.js'],
  outfile: 'dist/main.js',
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2020',
  minify: true,
  sourcemap: true,
  legalComments: 'external',
  logLevel: 'info',
});
await copyFile('index.html', 'dist/index.html');
