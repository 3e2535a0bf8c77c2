/**
 * Credentials of the service (service document part 5): the session cookies `authtoken` and
 * `refreshtoken`, both non-empty, or a non-empty `x-api-key` header. Like the shim, the backend checks
 * presence only. A global guard; handlers marked {@link Public} skip it.
 */

import type { IncomingHttpHeaders } from 'node:http';
import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  SetMetadata,
  UnauthorizedException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';

/** Cookies that together form the session credential (service document part 5). */
export const SESSION_COOKIES: readonly string[] = Object.freeze(['authtoken', 'refreshtoken']);

/** Header carrying an API key (service document part 5). */
export const API_KEY_HEADER = 'x-api-key';

const PUBLIC_KEY = 'referenceBackend:public';

/** Marks a handler as served without credentials (`GET /api/health`). */
export const Public = (): MethodDecorator & ClassDecorator => SetMetadata(PUBLIC_KEY, true);

/**
 * Parses a `Cookie` header (RFC 6265 §4.2.1): `name=value` pairs separated by `;`; pairs without `=` or
 * with an empty name are skipped; the first occurrence of a name wins; double quotes are removed.
 * @param header The raw header value, or `undefined`.
 * @returns Cookie name → value.
 */
export function parseCookieHeader(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  if (header === undefined || header === '') return cookies;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq === -1) continue;
    const name = pair.slice(0, eq).trim();
    if (name === '' || cookies.has(name)) continue;
    let value = pair.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    cookies.set(name, value);
  }
  return cookies;
}

/**
 * Whether a request carries credentials in one of the two accepted forms (service document part 5).
 * @param headers Request headers as Node parsed them (lower-case names).
 * @returns `true` for a non-empty `x-api-key`, or when both session cookies are present and non-empty.
 */
export function hasCredentials(headers: IncomingHttpHeaders): boolean {
  const apiKey = headers[API_KEY_HEADER];
  if (typeof apiKey === 'string' && apiKey.trim() !== '') return true;
  const cookies = parseCookieHeader(headers.cookie);
  return SESSION_COOKIES.every((name) => (cookies.get(name) ?? '') !== '');
}

/** Global guard: no credentials → Nest's own 401 `{"message":"Unauthorized","statusCode":401}`. */
@Injectable()
export class CredentialsGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  /** @throws {UnauthorizedException} 401 without credentials. */
  canActivate(context: ExecutionContext): boolean {
    const isPublic = this.reflector.getAllAndOverride<boolean | undefined>(PUBLIC_KEY, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (isPublic === true) return true;
    const req = context.switchToHttp().getRequest<{ headers: IncomingHttpHeaders }>();
    if (!hasCredentials(req.headers)) throw new UnauthorizedException();
    return true;
  }
}
