import { describe, expect, it } from 'vitest';
import { isJsonMediaType } from '../../../src/aliases/media-type.ts';

describe('isJsonMediaType', () => {
  it.each([
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset=UTF-8',
    'Application/JSON',
    ' application/json ',
    'application/problem+json',
    'application/vnd.api+json; ext="a;b"',
    'application/merge-patch+json',
  ])('%j is JSON', (type) => {
    expect(isJsonMediaType(type)).toBe(true);
  });

  it.each([
    undefined,
    '',
    'text/json',
    'text/plain',
    'application/jsonp',
    'application/json-seq',
    'application/x-www-form-urlencoded',
    'application/json+xml',
    'application/ json',
    'multipart/form-data; boundary=application/json',
    'application/vnd api+json',
  ])('%j is not JSON', (type) => {
    expect(isJsonMediaType(type)).toBe(false);
  });
});
