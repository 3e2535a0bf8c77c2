/**
 * Calibration: the mandated libraries and nothing else, Express 5 with http-proxy-middleware 4 and a
 * keep-alive agent, as in the reference table. No gates, no logging, no metrics, no seams:
 * the difference between this row and the shim's pass-through row is what the shim's own features cost.
 *
 * Env: `UPSTREAM_URL`, `PORT`, `ADMIN_PORT` (answers 200 on any path, for readiness).
 */
import http from 'node:http';
import express from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';

const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
const app = express();
app.use(createProxyMiddleware({ target: process.env.UPSTREAM_URL ?? 'http://127.0.0.1:3000', agent }));
app.listen(Number(process.env.PORT), '127.0.0.1');

http.createServer((_req, res) => res.end('ok')).listen(Number(process.env.ADMIN_PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
