// Serves dist/ on http://127.0.0.1:5173 (PORT and HOST change it). No dependencies.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('./dist/', import.meta.url)));
const types = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.map': 'application/json',
  '.txt': 'text/plain; charset=utf-8',
};

/** Starts the server; resolves to its base URL. `port` 0 picks a free port. */
export function serveDist({ host = '127.0.0.1', port = 5173 } = {}) {
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = normalize(join(root, path.endsWith('/') ? `${path}index.html` : path));
    const found = file.startsWith(root) && (await stat(file).catch(() => null))?.isFile();
    if (!found) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    createReadStream(file).pipe(res);
  });
  return new Promise((done, fail) => {
    server.once('error', fail);
    server.listen(port, host, () => {
      const { port: bound } = server.address();
      done({ url: `http://${host}:${bound}/`, close: () => server.close() });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { url } = await serveDist({ host: process.env.HOST || '127.0.0.1', port: Number(process.env.PORT || 5173) });
  console.log(`Serving dist/ at ${url}`);
  console.log(`Open ${url}?applicationIdentifier=<id>&subscriberId=<subscriber>&apiUrl=http://127.0.0.1:3000`);
}
