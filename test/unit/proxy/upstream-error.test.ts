/**
 * The upstream-error decision (SPEC §4: 502, or 504 for a timeout; RFC 9110 §9.2.2 for the one
 * idempotent replay; an aborted connection once the response has started).
 */
import { describe, expect, it } from 'vitest';
import {
  decideUpstreamFailure,
  IDEMPOTENT_METHODS,
  type IdleState,
  INVALID_STATUS_CODE,
  idleCause,
  NO_RESPONSE_CODE,
  relayableTransferCoding,
  SWITCHED_PROTOCOLS_CODE,
  TRANSFER_CODING_CODE,
  type UpstreamFailure,
  upstreamErrorKind,
} from '../../../src/proxy/upstream-error.ts';

const error = (code?: string): NodeJS.ErrnoException =>
  Object.assign(new Error('upstream failed'), code ? { code } : {});

const failure = (over: Partial<UpstreamFailure> = {}): UpstreamFailure => ({
  error: error('ECONNRESET'),
  timedOut: false,
  headReceived: false,
  clientStarted: false,
  reusedSocket: false,
  replayable: false,
  replayed: false,
  ...over,
});

describe('upstreamErrorKind', () => {
  it.each<[string | undefined, string]>([
    ['ECONNREFUSED', 'refused'],
    ['ESHIMCONNECTTIMEDOUT', 'refused'], // UPSTREAM_CONNECT_TIMEOUT_MS: unreachable, nothing sent
    ['ENOTFOUND', 'refused'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'refused'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'refused'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'refused'],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'refused'],
    ['UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'refused'],
    ['CERT_HAS_EXPIRED', 'refused'],
    ['CERT_NOT_YET_VALID', 'refused'], // clock skew, a certificate issued a moment ago (fix 131)
    ['INVALID_PURPOSE', 'refused'], // a certificate for client authentication only
    ['CERT_REVOKED', 'refused'],
    ['EPROTO', 'refused'], // a handshake refused: only TLS 1.0/1.1, or only h2 (fix 55)
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'refused'], // an https:// upstream that speaks plain HTTP
    ['EHOSTUNREACH', 'refused'],
    ['ERR_INVALID_HTTP_RESPONSE', 'invalid'],
    ['ETIMEDOUT', 'timeout'],
    ['HPE_INVALID_CONSTANT', 'invalid'],
    ['Z_DATA_ERROR', 'invalid'],
    ['ERR__ERROR_FORMAT_PADDING_1', 'invalid'],
    ['ZSTD_error_frameParameter_windowTooLarge', 'invalid'],
    [NO_RESPONSE_CODE, 'invalid'],
    [SWITCHED_PROTOCOLS_CODE, 'invalid'],
    [INVALID_STATUS_CODE, 'invalid'],
    [TRANSFER_CODING_CODE, 'invalid'],
    ['ESHIMTIMEDOUT', 'timeout'],
    ['ECONNRESET', 'reset'],
    [undefined, 'reset'],
  ])('%s → %s', (code, kind) => expect(upstreamErrorKind(error(code))).toBe(kind));
});

describe('relayableTransferCoding (RFC 9112 §6.1: only chunked is removed; nginx answers the rest 502)', () => {
  it.each<[string | undefined, boolean]>([
    [undefined, true],
    ['chunked', true],
    ['Chunked', true],
    ['CHUNKED', true],
    ['gzip', false],
    ['gzip, chunked', false],
    ['chunked, gzip', false],
    ['identity', false],
    ['chunked, chunked', false], // two field lines, as Node joins them
    ['', false],
  ])('a body in %j: %s', (transferEncoding, relayable) =>
    expect(relayableTransferCoding(transferEncoding, 'GET', 200)).toBe(relayable),
  );

  it('a response without content says what a GET would get, and is relayed (its field is hop-by-hop)', () => {
    expect(relayableTransferCoding('gzip, chunked', 'HEAD', 200)).toBe(true);
    expect(relayableTransferCoding('gzip, chunked', 'GET', 204)).toBe(true);
    expect(relayableTransferCoding('gzip, chunked', 'GET', 304)).toBe(true);
    expect(relayableTransferCoding('gzip, chunked', 'POST', 201)).toBe(false);
  });
});

describe('decideUpstreamFailure', () => {
  it.each([NO_RESPONSE_CODE, SWITCHED_PROTOCOLS_CODE])(
    '%s (a 101, a request closed without a response) → 502, never replayed',
    (code) => {
      expect(
        decideUpstreamFailure(failure({ error: error(code), reusedSocket: true, replayable: true })),
      ).toEqual({ action: 'respond', kind: 'invalid', reason: 'upstream_invalid', status: 502 });
    },
  );

  it('replays once: reset on a reused pooled socket, idempotent with the body held, nothing received', () => {
    expect(decideUpstreamFailure(failure({ reusedSocket: true, replayable: true }))).toEqual({
      action: 'replay',
    });
  });

  it.each<[string, Partial<UpstreamFailure>]>([
    ['a fresh socket', { reusedSocket: false }],
    ['a non-replayable request (streamed body or POST)', { replayable: false }],
    ['a second attempt', { replayed: true }],
    ['a timeout', { timedOut: true }],
    ['after the upstream head', { headReceived: true }],
    ['a refused connection', { error: error('ECONNREFUSED') }],
  ])('never replays %s', (_name, over) => {
    const decision = decideUpstreamFailure(failure({ reusedSocket: true, replayable: true, ...over }));
    expect(decision.action).not.toBe('replay');
  });

  it.each<[string, Partial<UpstreamFailure>, unknown]>([
    [
      'refused → 502',
      { error: error('ECONNREFUSED') },
      { kind: 'refused', status: 502, reason: 'upstream_refused' },
    ],
    ['reset → 502', {}, { kind: 'reset', status: 502, reason: 'upstream_reset' }],
    ['invalid → 502', { error: error('HPE_INVALID_CONSTANT') }, { kind: 'invalid', status: 502 }],
    ['timeout → 504', { timedOut: true }, { kind: 'timeout', status: 504, reason: 'upstream_timeout' }],
    ['patched route, head in, no byte out → 502', { headReceived: true }, { kind: 'reset', status: 502 }],
  ])('responds while the client has nothing: %s', (_name, over, expected) => {
    expect(decideUpstreamFailure(failure(over))).toMatchObject({
      action: 'respond',
      ...(expected as object),
    });
  });

  it('finishes the response when the upstream sent all of it before the error (bytes past its end)', () => {
    const past = error('HPE_INVALID_CONSTANT');
    for (const clientStarted of [false, true]) {
      expect(
        decideUpstreamFailure(
          failure({ error: past, headReceived: true, responseComplete: true, clientStarted }),
        ),
      ).toEqual({ action: 'finish', kind: 'invalid' });
    }
    // The shim's own timer still cuts it (a client that stopped reading a complete, buffered response).
    expect(
      decideUpstreamFailure(
        failure({ headReceived: true, responseComplete: true, clientStarted: true, timedOut: true }),
      ),
    ).toEqual({ action: 'abort', kind: 'timeout' });
  });

  it('aborts once the client response has started, whatever the cause', () => {
    expect(decideUpstreamFailure(failure({ headReceived: true, clientStarted: true }))).toEqual({
      action: 'abort',
      kind: 'reset',
    });
    expect(
      decideUpstreamFailure(failure({ headReceived: true, clientStarted: true, timedOut: true })),
    ).toEqual({
      action: 'abort',
      kind: 'timeout',
    });
  });
});

describe('IDEMPOTENT_METHODS', () => {
  it('are the RFC 9110 §9.2.2 ones', () => {
    expect([...IDEMPOTENT_METHODS].sort()).toEqual(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PUT', 'TRACE']);
  });
});

describe('idleCause (whose stall a fired deadline is)', () => {
  /** An attempt whose upstream went silent before its head: no body, nothing backed up. */
  const quiet: IdleState = {
    headReceived: false,
    clientBackedUp: false,
    streamedBody: false,
    uploadComplete: true,
    established: true,
    upstreamBackedUp: false,
  };

  it.each<[string, Partial<IdleState>, ReturnType<typeof idleCause>]>([
    ['the upstream silent before its head', {}, 'upstream'],
    ['the upstream silent after its head, the client reading', { headReceived: true }, 'upstream'],
    // fix 62: backpressure paused the upstream's read because the client stopped reading.
    ['the client not reading the response', { headReceived: true, clientBackedUp: true }, 'client_stalled'],
    // fix 72: everything sent went upstream, which waits for the rest of a body that does not come.
    [
      'a streamed body that stopped arriving',
      { streamedBody: true, uploadComplete: false },
      'upload_stalled',
    ],
    // fix 76: the connection is still being made; the body waits in the shim, whatever the client does.
    [
      'a streamed body while the connection is made',
      { streamedBody: true, uploadComplete: false, established: false },
      'upstream',
    ],
    // The upstream stopped taking the body: its own stall.
    [
      'a streamed body the upstream stopped reading',
      { streamedBody: true, uploadComplete: false, upstreamBackedUp: true },
      'upstream',
    ],
    [
      'a streamed body sent whole, the upstream silent',
      { streamedBody: true, uploadComplete: true },
      'upstream',
    ],
    ['a client backed up before any head (nothing written to it)', { clientBackedUp: true }, 'upstream'],
  ])('%s → %s', (_what, change, expected) => {
    expect(idleCause({ ...quiet, ...change })).toBe(expected);
  });
});
