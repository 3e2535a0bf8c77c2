/**
 * Keeps the shim's memory flat while it streams large bodies.
 *
 * Every socket read allocates a fresh 64 KiB buffer outside the V8 heap. The JS objects that own
 * those buffers are tiny, so the young generation fills slowly and V8 collects them late: a bare
 * `node:http` pipe proxy holds ~90 MB of dead buffers at its peak while streaming 200 MiB over
 * loopback (measured: peak RSS 149 MB vs 60 MB idle). A minor GC (scavenge) after every
 * {@link SCAVENGE_EVERY_BYTES} of streamed body frees them early (same proxy: 95 MB peak), for about
 * one scavenge per 16 MiB (well under 1 ms each).
 *
 * Needs `node --expose-gc` (set by `npm start` and the container); without it this is a no-op.
 */

/** Bytes streamed between two minor GCs. */
export const SCAVENGE_EVERY_BYTES = 4 * 1024 * 1024;

type Gc = (options?: { type?: 'minor' | 'major'; execution?: 'sync' | 'async' }) => void;
const gc = (globalThis as { gc?: Gc }).gc;
let sinceLast = 0;

/**
 * Counts streamed body bytes; runs a minor GC every {@link SCAVENGE_EVERY_BYTES}.
 * @param bytes Size of the chunk just streamed.
 */
export function countStreamedBytes(bytes: number): void {
  sinceLast += bytes;
  if (sinceLast < SCAVENGE_EVERY_BYTES) return;
  sinceLast = 0;
  gc?.({ type: 'minor' });
}

/** Whether streamed-memory scavenging is active (the process runs with `--expose-gc`). */
export const scavengingEnabled: boolean = gc !== undefined;
