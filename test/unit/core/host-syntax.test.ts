/**
 * The `Host` grammar (RFC 9110 §7.2) the hygiene gate holds `Host` to and the outgoing request holds a
 * client's `X-Forwarded-Host` elements to. The full tables are in test/unit/gates/hygiene.test.ts
 * (`checkHost`) and test/fuzz/hygiene.fuzz.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { isHostSyntax } from '../../../src/core/host-syntax.ts';

describe('isHostSyntax', () => {
  it.each(['shim.test', 'example.com:8080', '127.0.0.1', '[::1]:443', '[v1.fe80::a+en1]', ''])(
    'accepts %j',
    (value) => expect(isHostSyntax(value)).toBe(true),
  );

  it.each(['evil.test/reset?to=x', 'a@evil.test', 'evil.test#', 'a b', '[::1', '[127.0.0.1]', 'host:http'])(
    'rejects %j',
    (value) => expect(isHostSyntax(value)).toBe(false),
  );
});
