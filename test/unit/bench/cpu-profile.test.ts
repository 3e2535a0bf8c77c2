import { describe, expect, it } from 'vitest';
import { type CpuProfile, moduleOf, summarize } from '../../../bench/lib/cpu-profile.ts';

const frame = (functionName: string, url = '', lineNumber = 0) => ({ functionName, url, lineNumber });

/** root → handle (express) → write (pino) ; root → (idle) ; root → (garbage collector) */
const PROFILE: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 4, 5] },
    {
      id: 2,
      callFrame: frame('handle', 'file:///app/node_modules/express/lib/application.js', 151),
      children: [3],
    },
    { id: 3, callFrame: frame('write', 'file:///app/node_modules/pino/lib/proto.js', 205) },
    { id: 4, callFrame: frame('(idle)') },
    { id: 5, callFrame: frame('(garbage collector)') },
  ],
  // each sample lasts until the next one: 2 → 100 µs, 3 → 300 µs, 4 → 1000 µs, 5 → 100 µs
  samples: [2, 3, 3, 3, 4, 5, 2],
  timeDeltas: [0, 100, 100, 100, 100, 1000, 100],
};

describe('CPU profile summary', () => {
  it('names modules by package, Node internal module or source file', () => {
    expect(moduleOf('file:///app/node_modules/@pinojs/redact/index.js', 'redact')).toBe('@pinojs/redact');
    expect(moduleOf('node:internal/streams/readable', 'push')).toBe('node:streams/readable');
    expect(moduleOf('node:_http_client', 'x')).toBe('node:_http_client');
    expect(moduleOf('file:///work/main/src/proxy/forward.ts', 'onProxyRes')).toBe('src/proxy/forward.ts');
    expect(moduleOf('', '(garbage collector)')).toBe('(garbage collector)');
    expect(moduleOf('', 'writev')).toBe('(native)');
  });

  it('adds self and inclusive time, leaving idle out of the busy time', () => {
    const summary = summarize(PROFILE);
    expect(summary.busyMs).toBeCloseTo(0.5);
    expect(summary.functions[0]).toMatchObject({ name: 'write pino:206', ms: 0.3 });
    expect(summary.modulesSelf.map((l) => [l.name, l.ms])).toEqual([
      ['pino', 0.3],
      ['express', 0.1],
      ['(garbage collector)', 0.1],
    ]);
    const express = summary.modulesInclusive.find((l) => l.name === 'express');
    expect(express?.ms).toBeCloseTo(0.4);
    expect(express?.share).toBeCloseTo(0.8);
  });
});
