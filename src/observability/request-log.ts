/**
 * One log line per request (SPEC §8) with pino-http: method, path, status, duration, client version,
 * the fields plugins added (e.g. aliases used). Headers, cookies and the query are never serialized,
 * so no credential can reach the log; the logger's redaction is a second line of defence.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import { stateOf } from '../proxy/exchange.ts';

/**
 * Creates the request-log middleware. It must run after the exchange is created.
 * @param logger The process logger.
 */
export function requestLog(logger: Logger): RequestHandler {
  let counter = 0;
  const middleware = pinoHttp({
    logger,
    genReqId: () => ++counter,
    quietReqLogger: true,
    wrapSerializers: false,
    serializers: {
      req: (req: IncomingMessage) => ({ method: req.method, path: pathOf(req.url) }),
      res: (res: ServerResponse) => ({ statusCode: res.statusCode }),
    },
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : 'info'),
    customSuccessMessage: () => 'request completed',
    customErrorMessage: () => 'request failed',
    customSuccessObject: (_req, res, value) => withExchange(res, value),
    customErrorObject: (_req, res, _err, value) => withExchange(res, value),
  });
  return middleware as unknown as RequestHandler;
}

function pathOf(url: string | undefined): string {
  if (url === undefined) return '';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

function withExchange(res: ServerResponse, value: Record<string, unknown>): Record<string, unknown> {
  const state = stateOf(res);
  if (!state) return value;
  const { exchange } = state;
  return {
    ...value,
    clientVersion: exchange.clientVersion?.version,
    route: state.route,
    ...(state.rejection && { rejection: state.rejection }),
    ...exchange.logFields,
  };
}
