/**
 * Public types of the forwarding core and the two seams that plugins register on.
 *
 * The core (`gates/`, `proxy/`) knows nothing of any particular API. A plugin looks at each admitted
 * request once ({@link ProxyPlugin.onRequest}) and may return {@link ExchangeHooks}: a query rewrite, a
 * bounded request-body rewrite, and/or a response patcher. A plugin that returns `undefined` costs the
 * request nothing more.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { SemVer } from 'semver';

/**
 * What the gates learned about one admitted request, shared with the seams and the request log.
 * Created by the core for every request; plugins read it and append to {@link responseHeaders} and
 * {@link logFields}.
 */
export interface Exchange {
  /** Request method as sent (upper case for every real client). */
  readonly method: string;
  /** Origin-form path without the query, exactly as sent (not percent-decoded). */
  readonly path: string;
  /** Raw query without the leading `?`; `''` when there is none. */
  readonly rawQuery: string;
  /** Request headers (lower-cased names, as Node parses them). */
  readonly headers: IncomingHttpHeaders;
  /** Parsed client version; `undefined` on public paths and preflights, which skip the version gate. */
  clientVersion: SemVer | undefined;
  /**
   * Headers the plugins add to this exchange's response (e.g. a deprecation signal): neither request
   * headers nor the upstream's. Appended in `onRequest` or in an `onResponse` hook, in order, before
   * the response head is built; sent on the upstream's response after its own end-to-end headers, and
   * on a response the shim makes itself (4xx/5xx) after its service version; the core's own `Warning`
   * for an outdated client comes after them. Names are case-insensitive; a name repeated is sent
   * repeated. A CORS response names them in `Access-Control-Expose-Headers`.
   */
  readonly responseHeaders: Array<[name: string, value: string]>;
  /** Extra fields for this request's log line (bounded, non-secret values only). */
  readonly logFields: Record<string, unknown>;
}

/** A bounded rewrite of the request body, run by the core after it has buffered the whole body. */
export interface BodyRewrite {
  /**
   * Returns the body to forward (the same Buffer when nothing changes), given the complete request body
   * (at most `MAX_REWRITE_BODY` bytes; the core answers 413 above that without calling this).
   * @throws {ShimError} with status 400 for a body the rewrite cannot accept (e.g. malformed JSON).
   */
  rewrite(body: Buffer): Buffer;
}

/** Why a streaming patch stopped patching (counted in shim_response_patches_skipped_total{reason}). */
/**
 * Why a patch stopped: the body is not JSON (`invalid_json`), nests deeper than the patch follows
 * (`too_deep`), a value to copy is over the plugin's limit (`value_too_large`), the process-wide buffer
 * budget had no room for it (`budget_exhausted`), or the patch's own machinery failed
 * (`scanner_failed`: a bug or resource failure in the shim, logged at `error` by the plugin).
 */
export type PatchSkipReason =
  | 'invalid_json'
  | 'too_deep'
  | 'value_too_large'
  | 'budget_exhausted'
  | 'scanner_failed';

/**
 * Why a response that a hook asked to patch went out unpatched (from some point on): the patch's own
 * {@link PatchSkipReason}, or `unsupported_encoding`, the core's, for a `Content-Encoding` it cannot
 * decode. The `reason` label of `shim_response_patches_skipped_total`.
 */
export type UnpatchedReason = PatchSkipReason | 'unsupported_encoding';

/** Outcome of a response patch so far; final after end(). */
export type PatchOutcome =
  | { readonly kind: 'patched' } // at least one member was inserted
  | { readonly kind: 'unchanged' } // the bytes passed as the upstream sent them
  | { readonly kind: 'skipped'; readonly reason: PatchSkipReason }; // stopped patching from some point on; the rest passed verbatim (inserted members before that point stay)

/**
 * A streaming patch of one response body (decoded bytes in, patched bytes out), created from the
 * response head before any body byte. Holds back only the value of a member it must copy, bounded
 * per response (by the plugin's own limit on a held value) and process-wide (the BufferBudget); everything else is emitted at once.
 */
export interface ResponsePatch {
  /**
   * Next chunk of the decoded body; returns the bytes ready to send for it, in order: the
   * chunk itself when nothing changes, an empty buffer when everything is held back, or a buffer the
   * caller may keep (the patch never writes to it again). One buffer per chunk, so that the core writes
   * one HTTP chunk per upstream chunk. Keeps no reference to `chunk` once it returned, and never
   * returns a view of part of it: the core releases the chunk's memory then, or once the socket has
   * written it when it was returned as it is (body-pump.ts). Never throws.
   */
  write(chunk: Buffer): Buffer;
  /** The body ended: returns whatever is still held (usually an empty buffer). Never throws. */
  end(): Buffer;
  /**
   * Optional. The caller no longer references `bytes`, a buffer `write` returned (the socket has
   * written it: its write callback ran without error), so the patch may write into its memory again.
   * Never call it for bytes still queued anywhere; a patch ignores buffers that are not its own.
   */
  recycle?(bytes: Buffer): void;
  /** The exchange was abandoned mid-body: drop held bytes, release budget reservations. Idempotent. */
  destroy(): void;
  readonly outcome: PatchOutcome;
}

/** The process-wide bound on bytes held for rewrites and patches (MAX_BUFFERED_BYTES). */
export interface BufferBudget {
  /** Reserves `bytes`; returns false and reserves nothing when the total would exceed the limit. */
  tryReserve(bytes: number): boolean;
  /** Returns `bytes` reserved earlier. */
  release(bytes: number): void;
  readonly used: number; // bytes
  readonly limit: number; // bytes
}

/** What a plugin wants done to one exchange. Every member is optional. */
export interface ExchangeHooks {
  /**
   * Rewrites the raw query (without `?`); returns the same string when nothing changes. Called once,
   * before the request is forwarded. May throw a `ShimError` (errors.ts) to refuse the request: the
   * core answers it with that status and forwards nothing.
   */
  rewriteQuery?(rawQuery: string): string;
  /** Present when the request body must be buffered and rewritten (bounded by `MAX_REWRITE_BODY`). */
  body?: BodyRewrite;
  /**
   * Called when the upstream's response headers arrive, for every response (HEAD, 204 and 304
   * included). Returns a streaming patch for the body, or `undefined` to stream it untouched. May
   * append to `exchange.responseHeaders`. When it returns a patch for a response without a body (HEAD,
   * 204, 304), the core sends the headers the patched GET would carry (no `Content-Length`, strong
   * ETag made weak) and calls `patch.destroy()`. While any hooks of an exchange have `onResponse`,
   * `Range` and `If-Range` are not forwarded (RFC 9110 §14.2: the full 200 is patched).
   */
  onResponse?(status: number, headers: IncomingHttpHeaders): ResponsePatch | undefined;
  /**
   * Told the upstream's status when its response head arrives, for every response; observes only (a
   * hook that may patch uses {@link onResponse}). Unlike `onResponse`, it leaves `Range` forwarded.
   */
  onStatus?(status: number): void;
}

/** A plugin on the two seams (request rewriter and response patcher). */
export interface ProxyPlugin {
  /**
   * Short name of the plugin, for whoever reads a plugin list in code or a debugger; the core itself
   * reads none (a plugin labels its own metrics and log fields).
   */
  readonly name: string;
  /**
   * Called once per admitted request after the gates, with the original request.
   * Returns hooks, or `undefined` to leave the exchange untouched (and cost nothing more).
   */
  onRequest(exchange: Exchange, req: IncomingMessage): ExchangeHooks | undefined;
  /** Routes the plugin serves on the admin listener (never on the front door), e.g. a usage report. */
  readonly adminRoutes?: readonly AdminRoute[];
  /**
   * True when responses may differ by the client's version: the core then names the client-version
   * header in `Vary` on every response (RFC 9110 §12.5.5), merged with the upstream's.
   */
  readonly variesByClientVersion?: boolean;
}

/** One route a plugin adds to the admin listener; matched on exact method and path (query ignored). */
export interface AdminRoute {
  /** `GET`, `DELETE`, … (a `GET` route also answers `HEAD`). */
  readonly method: string;
  /** Exact path, e.g. `/usage`. */
  readonly path: string;
  /** Answers the request completely; a thrown error becomes a 500. */
  handle(req: IncomingMessage, res: ServerResponse): void | Promise<void>;
}

/** What the composition root hands to a plugin factory. */
export interface PluginContext {
  readonly logger: Logger;
  /** The shared Prometheus registry; plugins register their own bounded-label metrics on it. */
  readonly registry: Registry;
  /** The clock, ms since the epoch (default `Date.now`); injected by tests. */
  readonly now?: () => number;
  /** The header the credential gate reads an API key from (`API_KEY_HEADER`, lower-cased). */
  readonly credentials?: { readonly apiKeyHeader: string };
  /** The process-wide bound on buffered bytes (`MAX_BUFFERED_BYTES`), shared with the core. */
  readonly budget: BufferBudget;
}
