/**
 * Relaying an upstream response to the client (SPEC §4, §6): its head as the client gets it (Vary,
 * validators, ranges; response-writer.ts), sent with its body's first byte or alone after
 * `RESPONSE_HEAD_HOLD_MS` (head-hold.ts), and its body passed through or through the plugins' patches
 * (response-patch.ts: the patch plan, the pumps, a content coding decoded and encoded again once the
 * decoder's window is reserved from `MAX_BUFFERED_BYTES`). forward.ts wires it to the attempt
 * (upstream-attempt.ts), which calls it when the upstream's head arrives.
 */
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ExchangeState } from '../core/exchange.ts';
import { headerValue } from '../core/raw-headers.ts';
import type { BufferBudget, PatchOutcome, ResponsePatch, UnpatchedReason } from '../core/types.ts';
import { type CoreMetrics, routeShape } from '../observability/metrics.ts';
import { logPath } from '../observability/request-log.ts';
import { pumpBody } from './body-pump.ts';
import { createPatchCodec } from './content-coding.ts';
import { type HeadHold, holdHead } from './head-hold.ts';
import {
  chainPatches,
  patchPlan,
  pumpCodedPatch,
  pumpPatch,
  reserveDecoderWindow,
} from './response-patch.ts';
import {
  headSaysChunked,
  isBodiless,
  type ResponseHeadOptions,
  relayableReasonPhrase,
  responseHead,
  revalidationKeepsVary,
} from './response-writer.ts';
import type { Forwarding, UpstreamAttemptOptions } from './upstream-attempt.ts';

/** What {@link createResponseRelay} needs: the forwarder's options it reads (forward.ts `ForwarderOptions`). */
export interface ResponseRelayOptions {
  /** A response head waits at most this many ms for its body's first byte (`RESPONSE_HEAD_HOLD_MS`). */
  readonly responseHeadHoldMs: number;
  /** Process-wide bound on buffered bytes: a coded patched body's decoder window is reserved from it. */
  readonly budget: BufferBudget;
  /** The client-version header, merged into `Vary` of the responses that depend on it (RFC 9110 §12.5.5). */
  readonly varyHeader: string | undefined;
  /** Name `varyHeader` on every upstream response, not only on those to a versioned request. */
  readonly varyAll: boolean;
  /** Where the upstream's duration (`shim_upstream_duration_seconds`) and skipped patches are counted. */
  readonly metrics: CoreMetrics;
  /** Where a patched response that went out unpatched is logged (`warn`). */
  readonly logger: Logger;
  /** Headers to add to the response, computed after the plugins' `onResponse` (forward.ts). */
  responseHeaders(state: ExchangeState, upstream: IncomingMessage | undefined): string[];
}

/**
 * Creates the relay of upstream responses: for each, the plugins' `onStatus` and `onResponse` hooks,
 * then the head and body as above; a response no hook patches streams through (`pumpBody`). A patched
 * response that goes out unpatched from some point on is counted in `shim_patches_skipped_total{reason}`
 * and logged.
 * @param options What the relay reads ({@link ResponseRelayOptions}); read once, here.
 * @returns The attempt's `relayResponse` (upstream-attempt.ts): `(forwarding, upstreamRes, fail,
 *   abandon)`. A head `writeHead` refuses from a pump's listener, or a patch that throws, is handed to
 *   `abandon`; a body that fails later to `fail`. What throws while the relay itself runs (a plugin's
 *   hook, `responseHeaders`, the bodiless patched head's `writeHead`) is thrown to its caller, which
 *   abandons the exchange the same way (upstream-attempt.ts).
 * @throws Nothing when created.
 */
export function createResponseRelay(options: ResponseRelayOptions): UpstreamAttemptOptions['relayResponse'] {
  const { responseHeadHoldMs, budget, varyHeader, varyAll, metrics, logger } = options;

  // responseHead's options, made once (no object per response), indexed by headOptions' flags. A patch
  // comes only from an `onResponse` hook, whose presence refused the exchange's ranges (handler): a
  // patched head always says `Accept-Ranges: none`.
  const headOptionsTable: ResponseHeadOptions[] = Array.from({ length: 8 }, (_, flags) => ({
    patched: (flags & 1) !== 0,
    varyName: (flags & 2) !== 0 ? varyHeader : undefined,
    rangesRefused: (flags & 4) !== 0,
  }));
  const headOptions = (patched: boolean, varied: boolean, rangesRefused: boolean): ResponseHeadOptions =>
    headOptionsTable[(patched ? 1 : 0) | (varied ? 2 : 0) | (rangesRefused ? 4 : 0)] as ResponseHeadOptions;

  /** Counts and logs a response that a hook asked to patch and that went out unpatched (from some point on). */
  const countUnpatched = (state: ExchangeState, reason: UnpatchedReason) => {
    metrics.patchesSkipped.inc({ reason });
    state.exchange.logFields.patchSkipped = reason;
    logger.warn({ path: logPath(state.exchange.path), reason }, 'response forwarded unpatched');
  };

  return (
    { req, res, state }: Forwarding,
    upstreamRes: IncomingMessage,
    fail: (err: NodeJS.ErrnoException) => void,
    abandon: (err: unknown) => void,
  ) => {
    const status = upstreamRes.statusCode ?? 502;
    state.shape ??= routeShape(state.exchange.path);
    metrics.upstreamDuration.observe(
      { route: state.shape },
      (performance.now() - state.upstreamStartedAt) / 1000,
    );
    let patches: ResponsePatch[] | undefined;
    for (const hooks of state.hooks) {
      hooks.onStatus?.(status);
      const patch = hooks.onResponse?.(status, upstreamRes.headers);
      if (patch) {
        patches ??= [];
        patches.push(patch);
      }
    }
    // After onResponse: plugins may append response headers there.
    const extra = options.responseHeaders(state, upstreamRes);
    // Vary names the client-version header when this response depends on it (varyHeader's doc).
    const versioned = varyHeader !== undefined && (varyAll || state.exchange.clientVersion !== undefined);
    // Only what this response uses: the ETag is weakened for a patch, Vary merged when versioned.
    const upstreamHead = {
      status,
      rawHeaders: upstreamRes.rawHeaders,
      etag: patches === undefined ? undefined : (headerValue(upstreamRes, 'etag') as string | undefined),
      vary: versioned ? (headerValue(upstreamRes, 'vary') as string | undefined) : undefined,
    };
    const varied = versioned && !revalidationKeepsVary(status, upstreamHead.vary);
    const message = relayableReasonPhrase(upstreamRes.statusMessage);

    const streamed = headOptions(false, varied, state.rangesRefused);
    const patchedHead = headOptions(true, varied, true);
    // The head is written just before the first body byte (or at the end of an empty body), where Node
    // would send it anyway: until then the client has received nothing, and an upstream that fails after
    // its head still gets the client a 502 or 504 (upstream-error.ts `clientStarted`). Called from the
    // pumps' listeners, outside the try of upstream-attempt.ts: a throw there ended the process.
    // Whatever writeHead refuses fails this exchange alone (as the synchronous paths do).
    const headWriter = (options: ResponseHeadOptions) => () => {
      try {
        res.writeHead(status, message, responseHead(upstreamHead, extra, options));
      } catch (err) {
        abandon(err);
      }
    };
    // A body that does not follow its head within RESPONSE_HEAD_HOLD_MS (an event stream, a long poll)
    // gets the head sent alone then (head-hold.ts); a HEAD's, a 204's or a 304's goes out at once.
    const bodiless = isBodiless(req.method, status);
    const heldHead = (options: ResponseHeadOptions): HeadHold =>
      holdHead(res, headWriter(options), responseHeadHoldMs);
    if (patches === undefined) {
      pumpBody(upstreamRes, res, bodiless ? headWriter(streamed) : heldHead(streamed).start);
      return;
    }
    const patch = chainPatches(patches);
    const plan = patchPlan(bodiless, status, upstreamRes.headers['content-encoding']);
    if (plan.kind === 'head') {
      // The headers the patched GET would carry (no length, weak validator), no body.
      patch.destroy();
      const head = responseHead(upstreamHead, extra, patchedHead);
      if (req.method === 'HEAD' && headSaysChunked(status, req.httpVersion))
        head.push('Transfer-Encoding', 'chunked');
      res.writeHead(status, message, head);
      res.end();
      upstreamRes.resume();
      return;
    }
    if (plan.kind === 'pass') {
      patch.destroy();
      if (plan.reason !== undefined) countUnpatched(state, plan.reason);
      pumpBody(upstreamRes, res, heldHead(streamed).start);
      return;
    }
    const onEnd = (outcome: PatchOutcome) => {
      if (outcome.kind === 'skipped') countUnpatched(state, outcome.reason);
    };
    // Until the decoder's window is reserved, the head that may go alone is the patched one (no length,
    // no digest): the safe one whichever way the body then goes.
    const head = heldHead(patchedHead);
    // A patch that skipped before changing a byte (a full budget) sends the upstream's head: its tag
    // marked as the patched one's would let a cache keep the body without the aliases and revalidate
    // it to 304s (fix 162).
    const writeHead = (unpatched: boolean) => {
      if (!unpatched) return head.start();
      head.cancel();
      headWriter(streamed)();
    };
    // A patch that throws (a plugin's bug) fails this exchange alone, as a head writeHead refuses does.
    const events = { writeHead, onEnd, onError: fail, onPatchFailure: abandon };
    const { coding } = plan;
    if (coding === 'identity') {
      // The common case: no coding to undo (response-patch.ts pumpPatch).
      pumpPatch(upstreamRes, res, patch, events);
      return;
    }
    // A content coding: decoded, patched and encoded again as the bytes come (pumpCodedPatch), once the
    // decoder's window is reserved; without room, the response goes out as the upstream sent it.
    reserveDecoderWindow(upstreamRes, res, coding, budget, (reserved) => {
      if (reserved) {
        pumpCodedPatch(upstreamRes, res, createPatchCodec(coding), patch, events);
        return;
      }
      patch.destroy();
      countUnpatched(state, 'budget_exhausted');
      head.cancel();
      pumpBody(upstreamRes, res, heldHead(streamed).start);
    });
  };
}
