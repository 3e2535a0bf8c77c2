/**
 * Calibration: the cheapest Node proxy there is, a `node:http` pipe with a keep-alive agent, and no
 * checks of any kind. Not a proxy to use: it forwards hop-by-hop headers and every other fault the shim
 * guards against. `run.ts` measures it next to the shim so that the table shows what Node itself costs
 * on the machine of the run.
 *
 * Env: `UPSTREAM_URL`, `PORT`, `ADMIN_PORT` (answers 200 on any path, for readiness).
 */
import http from 'node:http';

const upstream = new URL(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:3000');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });

http
  .createServer((req, res) => {
    const proxyReq = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        agent,
      },
      (proxyRes) => {
        res.writeHead(proxyRes.statusCode ?? 502, proxyRes.headers);
        proxyRes.pipe(res);
      },
    );
    proxyReq.on('error', () => res.destroy());
    req.pipe(proxyReq);
  })
  .listen(Number(process.env.PORT), '127.0.0.1');

http.createServer((_req, res) => res.end('ok')).listen(Number(process.env.ADMIN_PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
