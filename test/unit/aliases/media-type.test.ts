import { describe, expect, it } from 'vitest';
import { isJsonInMediaTypeList, isJsonMediaType } from '../../../src/aliases/media-type.ts';

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

describe('isJsonInMediaTypeList', () => {
  it.each([
    'application/json, text/plain',
    'application/json,',
    ',application/json',
    'application/json ,x',
    'text/plain, application/json',
    'application/json; charset=utf-8, text/plain',
    'application/problem+json, application/json',
    'text/plain; q="a,b", application/json',
  ])('%j is a list with JSON in it', (type) => {
    expect(isJsonInMediaTypeList(type)).toBe(true);
  });

  it.each([
    undefined,
    '',
    'application/json',
    'application/json; x="a,b"',
    'application/json; x="a\\",b"',
    'text/plain, text/csv',
    'application/jsonp, text/plain',
  ])('%j is not', (type) => {
    expect(isJsonInMediaTypeList(type)).toBe(false);
  });
});
