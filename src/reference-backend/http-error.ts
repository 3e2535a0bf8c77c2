/**
 * The reference backend's one error type and its wire shape, the one a NestJS backend sends:
 * `{"statusCode": n, "message": "…", "error": "<reason phrase>"}`.
 */
import { STATUS_CODES } from 'node:http';

/**
 * An error the reference backend answers with. Thrown by validation, the store and the routes; turned
 * into the JSON error response by the server.
 *
 * @example
 * throw new HttpError(400, 'property tags should not exist');
 */
export class HttpError extends Error {
  /** HTTP status sent to the client. */
  readonly statusCode: number;

  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'HttpError';
    this.statusCode = statusCode;
  }
}

/** The JSON error body (NestJS `HttpException` shape). */
export interface ErrorPayload {
  readonly statusCode: number;
  readonly message: string;
  readonly error: string;
}

/**
 * Builds the NestJS-style error body.
 * @param statusCode HTTP status, e.g. `400`.
 * @param message What is wrong, e.g. `'property tags should not exist'`.
 * @returns `{statusCode, message, error}` where `error` is the reason phrase (`'Bad Request'`).
 */
export function errorPayload(statusCode: number, message: string): ErrorPayload {
  return { statusCode, message, error: STATUS_CODES[statusCode] ?? 'Error' };
}
