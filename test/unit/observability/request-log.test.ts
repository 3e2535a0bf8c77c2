/**
 * The path the request log holds (`logPath`): as sent, without what can carry a credential as the
 * query string can (docs/reliability.md fix 128).
 */
import { describe, expect, it } from 'vitest';
import { logPath } from '../../../src/observability/request-log.ts';

describe('logPath', () => {
  it.each<[string, string]>([
    ['/missions', '/missions'],
    ['/', '/'],
    ['', ''],
    ['/users/a@b.test', '/users/a@b.test'], // an origin-form path keeps its `@`
    ['/missions;jsessionid=MATRIXSECRET', '/missions;jsessionid='],
    ['/missions;jsessionid=8F3A/metadata;v=2', '/missions;jsessionid=/metadata;v='],
    ['/a;/../b', '/a;/../b'], // a refused evasion is still seen as sent
    ['/a;x;y=1', '/a;x;y='],
    ['/missions#api_key=FRAGSECRET', '/missions'],
    ['http://alice:S3cretPw@shim.test/missions', 'http://shim.test/missions'],
    ['http://shim.test/missions', 'http://shim.test/missions'],
    ['HTTPS://a@b@c/x', 'HTTPS://c/x'],
    // A broken client's password with `/`, `?` or `#` (RFC 3986 would have them percent-encoded).
    ['http://alice:pa/ss@x/user/me', 'http://x/user/me'],
    ['http://alice:pa#ss@x/user/me', 'http://x/user/me'],
    ['http://alice:pa?ss@x/user/me?q=1', 'http://x/user/me'],
    ['/missions?access_token=secret', '/missions'],
  ])('%j → %j', (path, logged) => {
    expect(logPath(path)).toBe(logged);
  });

  it('returns a path with nothing to drop as it is', () => {
    const path = '/missions/5f0c3a9e-1f2b-4c3d-8e9f-0a1b2c3d4e5f/metadata';
    expect(logPath(path)).toBe(path);
  });
});
