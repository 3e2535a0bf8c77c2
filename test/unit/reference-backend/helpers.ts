/** Test client for the reference backend: raw `node:http` requests, full control over headers and body. */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';

export interface TestResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The body parsed as JSON. */
  // biome-ignore lint/suspicious/noExplicitAny: assertions navigate arbitrary JSON bodies
  json(): any;
}

export interface TestRequest {
  readonly method?: string;
  readonly headers?: Record<string, string | number | string[]>;
  /** A Buffer/string body, or a stream piped as the body. */
  readonly body?: string | Buffer | Readable;
}

/** Credentials accepted by the backend (an API key). */
export const AUTH: Record<string, string> = { 'x-api-key': 'test-key' };

/** Sends one request on a fresh connection and buffers the response. */
export function send(baseUrl: string, path: string, options: TestRequest = {}): Promise<TestResponse> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: options.method ?? 'GET',
        path,
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            json: () => JSON.parse(body.toString('utf8')),
          });
        });
      },
    );
    req.on('error', reject);
    const body = options.body;
    if (body === undefined) req.end();
    else if (typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else body.pipe(req);
  });
}

/** JSON request with credentials. */
export function sendJson(
  baseUrl: string,
  method: string,
  path: string,
  payload: unknown,
): Promise<TestResponse> {
  return send(baseUrl, path, {
    method,
    headers: { ...AUTH, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  });
}
