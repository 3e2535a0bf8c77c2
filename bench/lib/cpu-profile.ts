/**
 * Reads a V8 CPU profile (`node --cpu-prof`, the `.cpuprofile` JSON) and names the top costs: self time
 * per function, and self and inclusive time per module (npm package, Node internal module, or source
 * file of the shim).
 */

/** The parts of the `.cpuprofile` format (Chrome DevTools Protocol `Profiler.Profile`) used here. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  samples: number[];
  /** µs between consecutive samples (the first is relative to `startTime`). */
  timeDeltas: number[];
}

/** One line of a summary. */
export interface CostLine {
  name: string;
  /** ms */
  ms: number;
  /** Share of the busy (non-idle) time, 0…1. */
  share: number;
}

/** What {@link summarize} returns. */
export interface ProfileSummary {
  /** Busy time sampled, in ms (everything but `(idle)`). */
  busyMs: number;
  functions: CostLine[];
  modulesSelf: CostLine[];
  /** Time with the module anywhere on the stack (a module's cost including what it calls). */
  modulesInclusive: CostLine[];
}

/**
 * Names the module of a call frame's URL, e.g. `express`, `node:_http_server`, `src/proxy/forward.ts`,
 * or the pseudo frame's name (`(garbage collector)`, `(program)`).
 */
export function moduleOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith('node:')) return url.replace(/^node:(internal\/)?/, 'node:').replace(/\.js$/, '');
  const src = /\/((?:src|bench|test)\/.+)$/.exec(url);
  return src ? src[1]! : url;
}

/**
 * Summarizes a profile.
 * @param top How many lines each list keeps.
 */
export function summarize(profile: CpuProfile, top = 20): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const selfByNode = new Map<number, number>();
  // A sample's time is the delta to the next sample (the last sample gets the mean delta).
  const deltas = profile.timeDeltas;
  for (let i = 0; i < profile.samples.length; i++) {
    const us = i + 1 < deltas.length ? deltas[i + 1]! : 0;
    const id = profile.samples[i]!;
    selfByNode.set(id, (selfByNode.get(id) ?? 0) + us);
  }

  const functions = new Map<string, number>();
  const modulesSelf = new Map<string, number>();
  const modulesInclusive = new Map<string, number>();
  let busy = 0;
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);
  for (const [id, us] of selfByNode) {
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') continue;
    busy += us;
    const module = moduleOf(url, functionName);
    add(
      functions,
      `${functionName || '(anonymous)'} ${url === '' ? '' : `${module}:${lineNumber + 1}`}`.trim(),
      us,
    );
    add(modulesSelf, module, us);
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      if (frame.functionName === '(root)') continue;
      const m = moduleOf(frame.url, frame.functionName);
      if (!seen.has(m)) {
        seen.add(m);
        add(modulesInclusive, m, us);
      }
    }
  }
  const lines = (map: Map<string, number>): CostLine[] =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: us / 1000, share: busy === 0 ? 0 : us / busy }));
  return {
    busyMs: busy / 1000,
    functions: lines(functions),
    modulesSelf: lines(modulesSelf),
    modulesInclusive: lines(modulesInclusive),
  };
}
