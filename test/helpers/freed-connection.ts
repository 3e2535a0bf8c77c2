/**
 * A stand-in for an upstream connection as Node's `http.Agent` sees one freed after a keep-alive
 * exchange (its `free` event): writable, its request wanting keep-alive, and the socket methods
 * `keepSocketAlive` calls. No network: the pool's decision to keep or close it is all there is to see.
 */
import { type Duplex, PassThrough } from 'node:stream';

/** @returns A fresh stand-in; `destroyed` tells whether the pool closed it. */
export function freedConnection(): Duplex {
  return Object.assign(new PassThrough(), {
    _httpMessage: { shouldKeepAlive: true },
    setKeepAlive() {},
    unref() {},
    ref() {},
    setTimeout() {},
    timeout: 0,
  });
}
