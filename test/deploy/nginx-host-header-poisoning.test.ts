/**
 * Host header poisoning behind the nginx configuration docs/operations.md recommends (fix 96, HTTP
 * Garden audit, 2026-11-26). That block forwards `$http_host` (the client's `Host` field, port kept)
 * as `Host` and `X-Forwarded-Host`, which the upstream may build links from. nginx 1.22.1 picks the
 * `server` block of an absolute-form request (`GET http://api.example.test/x` with `Host: evil.test`)
 * by the target's host and still sends `Host: evil.test` on, so a `server_name` allowlist was bypassed;
 * and the `proxy_cache` block keyed on `$proxy_host` (the same for every request), so one request with
 * a forged `Host` stored the upstream's links to it for every host. nginx is not installed where the
 * tests run: the figures were taken by hand (docs/reliability.md, "HTTP Garden payloads"); this file
 * keeps the documented configuration from drifting back.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const operations = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
const nginxBlocks = [...operations.matchAll(/```nginx\n([\s\S]*?)```/g)].map((m) => m[1] as string);

describe('Host header poisoning behind the documented nginx configuration', () => {
  it('refuses absolute-form targets where Host is forwarded as $http_host', () => {
    const forwarding = nginxBlocks.filter((b) => /proxy_set_header Host \$http_host;/.test(b));
    expect(forwarding.length).toBeGreaterThan(0);
    for (const block of forwarding) {
      const rule = /if \(\$request ~ "([^"]+)"\) \{ return 400; \}/.exec(block);
      expect(rule, 'an absolute-form refusal in the block that forwards $http_host').not.toBeNull();
      // The same pattern as nginx's PCRE reads it, on the request line ($request).
      const absoluteForm = new RegExp((rule as RegExpExecArray)[1] as string);
      for (const line of [
        'GET http://api.example.test/reset HTTP/1.1',
        'GET HTTP://API.EXAMPLE.TEST/ HTTP/1.1',
        'POST https://api.example.test:8443/missions HTTP/1.1',
        'GET svn+ssh://a/ HTTP/1.1',
        'GET  http://api.example.test/ HTTP/1.1', // nginx takes several spaces between the tokens
      ]) {
        expect(absoluteForm.test(line), line).toBe(true);
      }
      for (const line of [
        'GET /reset HTTP/1.1',
        'GET /files?next=http://evil.test/ HTTP/1.1',
        'GET //evil.test/ HTTP/1.1',
        'OPTIONS * HTTP/1.1',
        'GET  /reset HTTP/1.1',
        'GET /a:b://c HTTP/1.1',
      ]) {
        expect(absoluteForm.test(line), line).toBe(false);
      }
    }
  });

  it('keys the nginx cache on the Host it forwards', () => {
    const keys = nginxBlocks.flatMap((b) => [...b.matchAll(/proxy_cache_key "([^"]+)"/g)].map((m) => m[1]));
    expect(keys.length).toBeGreaterThan(0);
    for (const key of keys) {
      expect(key).toContain('$http_host');
      expect(key).not.toContain('$proxy_host');
    }
  });
});
