/**
 * A string unit for fast-check that may be any code point, lone surrogates included: what
 * `fc.string({ unit: 'binary' })` generates, without its one-time setup, which costs over a second in
 * every test file that uses it (each unit-tier file runs in a fresh worker).
 *
 * Half the characters are printable ASCII (what a request target or a version is mostly made of, so
 * that generated strings come close to valid ones), half any code point from U+0000 to U+10FFFF.
 * @example
 * fc.string({ unit: anyCodePoint, maxLength: 300 })
 */
import fc from 'fast-check';

export const anyCodePoint: fc.Arbitrary<string> = fc
  .oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0, max: 0x10ffff }))
  .map((c) => String.fromCodePoint(c));
