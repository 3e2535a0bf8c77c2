/**
 * The request a unit test hands the alias layer's `onRequest` beside its exchange: what the plugin
 * reads of it is the raw header list (a body's `Content-Type` lines, combined: docs/reliability.md fix
 * 173), built here from the exchange's headers, one field line per value (an array is several lines).
 */
import type { IncomingMessage } from 'node:http';
import type { Exchange, ExchangeHooks, ProxyPlugin } from '../../../src/core/types.ts';

/**
 * @param exchange The exchange whose headers the request carries.
 * @returns A stand-in `IncomingMessage` with `rawHeaders` only.
 */
export function requestOf(exchange: Exchange): IncomingMessage {
  const rawHeaders: string[] = [];
  for (const [name, value] of Object.entries(exchange.headers)) {
    if (value === undefined) continue;
    for (const line of Array.isArray(value) ? value : [value]) rawHeaders.push(name, String(line));
  }
  return { rawHeaders } as unknown as IncomingMessage;
}

/** `plugin.onRequest(exchange, request)` with {@link requestOf}'s request. */
export function requestHooks(plugin: ProxyPlugin, exchange: Exchange): ExchangeHooks | undefined {
  return plugin.onRequest(exchange, requestOf(exchange));
}
