/**
 * The deployment examples in deploy/ (issue 4): every file is valid YAML, every environment variable
 * they set is one the shim reads, and the Kubernetes manifest keeps the properties operators rely on
 * (probes on the admin port, a grace period above the drain, a locked-down security context).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { PLUGINS } from '../../src/app.ts';
import { configVariables, loadConfig } from '../../src/config.ts';

const DEPLOY = fileURLToPath(new URL('../../deploy/', import.meta.url));
const FILES = readdirSync(DEPLOY).filter((f) => /\.ya?ml$/.test(f));

type Node = unknown;
type Obj = Record<string, unknown>;
const isObj = (v: Node): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function documents(file: string): Obj[] {
  const docs = parseAllDocuments(readFileSync(join(DEPLOY, file), 'utf8'), { prettyErrors: true });
  return docs.map((d) => {
    if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('\n')}`);
    return d.toJS() as Obj;
  });
}

/**
 * Every environment variable set anywhere in a document, as `[name, value]`: Kubernetes `env` lists
 * (`- name: X`) and compose `environment` (map or `X=v` list).
 */
function envEntries(node: Node, out: Array<[string, unknown]> = []): Array<[string, unknown]> {
  if (Array.isArray(node)) {
    for (const item of node) envEntries(item, out);
  } else if (isObj(node)) {
    for (const [key, value] of Object.entries(node)) {
      if (key === 'env' && Array.isArray(value)) {
        for (const e of value) if (isObj(e)) out.push([String(e.name), e.value]);
      } else if (key === 'environment') {
        if (Array.isArray(value))
          for (const e of value) {
            const [name, ...rest] = String(e).split('=');
            out.push([name ?? '', rest.join('=')]);
          }
        else if (isObj(value)) for (const [name, v] of Object.entries(value)) out.push([name, v]);
      } else if (key === 'envFrom') {
        throw new Error('envFrom hides variable names from this check; list them under env');
      } else envEntries(value, out);
    }
  }
  return out;
}

/** The env of one container / service, as loadConfig would see it. */
function envOf(container: Obj): Record<string, string> {
  return Object.fromEntries(
    envEntries({ env: container.env, environment: container.environment }).map(([n, v]) => [n, String(v)]),
  );
}

describe('deploy/', () => {
  it('holds the sidecar and front-door Kubernetes manifests and a compose file', () => {
    expect(FILES).toEqual(expect.arrayContaining(['kubernetes.yaml', 'front-door.yaml', 'compose.yaml']));
  });

  it.each(FILES)('%s is valid YAML and sets only variables the config module reads', (file) => {
    const docs = documents(file);
    expect(docs.length).toBeGreaterThan(0);
    const names = docs.flatMap((d) => envEntries(d).map(([n]) => n));
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) expect(configVariables(PLUGINS), `${file}: ${name}`).toContain(name);
  });
});

describe('deploy/kubernetes.yaml', () => {
  const docs = documents('kubernetes.yaml');
  const deployment = docs.find((d) => d.kind === 'Deployment') as Obj;
  const service = docs.find((d) => d.kind === 'Service') as Obj;
  const pod = (deployment.spec as Obj & { template: { spec: Obj } }).template.spec;
  const containers = pod.containers as Obj[];
  const shim = containers.find((c) => String(c.image).includes('compat-shim')) as Obj;
  const shimEnv = envOf(shim);
  const config = loadConfig({ ...shimEnv }, PLUGINS);
  const portNamed = (name: string) =>
    (shim.ports as Obj[]).find((p) => p.name === name)?.containerPort as number | undefined;

  it('runs the shim as a sidecar beside a backend container it forwards to over localhost', () => {
    expect(containers).toHaveLength(2);
    const backend = containers.find((c) => c !== shim) as Obj;
    const backendPort = (backend.ports as Obj[])[0]?.containerPort;
    expect(config.upstreamUrl?.hostname).toBe('127.0.0.1');
    expect(Number(config.upstreamUrl?.port)).toBe(backendPort);
  });

  it('has a configuration the shim accepts, with ports matching the container ports', () => {
    expect(portNamed('http')).toBe(config.port);
    expect(portNamed('admin')).toBe(config.adminPort);
  });

  it('points the Service at the shim port only', () => {
    const ports = (service.spec as Obj).ports as Obj[];
    expect(ports.map((p) => p.targetPort)).toEqual(['http']);
    expect((service.spec as Obj).selector).toEqual(((deployment.spec as Obj).selector as Obj).matchLabels);
  });

  it('probes liveness and readiness on the admin port', () => {
    const readiness = (shim.readinessProbe as Obj).httpGet as Obj;
    const liveness = (shim.livenessProbe as Obj).httpGet as Obj;
    expect(readiness).toEqual({ path: '/readyz', port: 'admin' });
    expect(liveness).toEqual({ path: '/healthz', port: 'admin' });
  });

  it('gives the drain time to finish before SIGKILL', () => {
    const preStop = ((shim.lifecycle as Obj)?.preStop as Obj)?.exec as { command: string[] } | undefined;
    const preStopSeconds = preStop?.command[0] === 'sleep' ? Number(preStop.command[1]) : 0;
    const grace = pod.terminationGracePeriodSeconds as number;
    expect(grace * 1000).toBeGreaterThan(preStopSeconds * 1000 + config.shutdownTimeoutMs);
    // The backend outlives the shim's drain, so the last forwarded requests still find it.
    const backend = containers.find((c) => c !== shim) as Obj;
    const backendStop = ((backend.lifecycle as Obj)?.preStop as Obj)?.exec as { command: string[] };
    expect(Number(backendStop.command[1]) * 1000).toBeGreaterThanOrEqual(
      preStopSeconds * 1000 + config.shutdownTimeoutMs,
    );
    expect(Number(backendStop.command[1])).toBeLessThan(grace);
  });

  it('sets resource requests and limits on every container', () => {
    for (const c of containers) {
      const resources = c.resources as { requests: Obj; limits: Obj };
      expect(resources.requests.cpu, String(c.name)).toBeDefined();
      expect(resources.requests.memory, String(c.name)).toBeDefined();
      expect(resources.limits.memory, String(c.name)).toBeDefined();
    }
  });

  it('runs every container non-root, read-only, without privilege escalation', () => {
    expect((pod.securityContext as Obj).runAsNonRoot).toBe(true);
    for (const c of containers) {
      const sc = c.securityContext as Obj;
      expect(sc.runAsNonRoot, String(c.name)).toBe(true);
      expect(sc.readOnlyRootFilesystem, String(c.name)).toBe(true);
      expect(sc.allowPrivilegeEscalation, String(c.name)).toBe(false);
      expect((sc.capabilities as Obj).drop).toEqual(['ALL']);
    }
    expect((shim.securityContext as Obj).runAsUser).toBe(1000); // the image's `node` user
  });

  it('does not let Kubernetes inject service-link variables into the environment', () => {
    expect(pod.enableServiceLinks).toBe(false);
  });
});

describe('deploy/front-door.yaml', () => {
  const docs = documents('front-door.yaml');
  const byKind = (kind: string) => docs.filter((d) => d.kind === kind);
  const deployment = byKind('Deployment')[0] as Obj;
  const service = byKind('Service')[0] as Obj;
  const hpa = byKind('HorizontalPodAutoscaler')[0] as Obj;
  const pdb = byKind('PodDisruptionBudget')[0] as Obj;
  const spec = deployment.spec as Obj & { template: { metadata: Obj; spec: Obj } };
  const pod = spec.template.spec;
  const podLabels = spec.template.metadata.labels as Obj;
  const containers = pod.containers as Obj[];
  const shim = containers[0] as Obj;
  const config = loadConfig(envOf(shim), PLUGINS, { requireUpstream: true });
  const resources = shim.resources as { requests: Obj; limits: Obj };

  it('holds one Deployment, Service, HorizontalPodAutoscaler and PodDisruptionBudget', () => {
    expect(docs.map((d) => d.kind).sort()).toEqual([
      'Deployment',
      'HorizontalPodAutoscaler',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'Service',
    ]);
  });

  it('runs the shim alone, forwarding to a backend Service over the network', () => {
    expect(containers).toHaveLength(1);
    expect(String(shim.image)).toContain('compat-shim');
    expect(config.upstreamUrl?.hostname).not.toMatch(/^(127\.|localhost$|\[::1\]$)/);
    expect((shim.ports as Obj[]).find((p) => p.name === 'http')?.containerPort).toBe(config.port);
    expect((shim.ports as Obj[]).find((p) => p.name === 'admin')?.containerPort).toBe(config.adminPort);
  });

  it('leaves the replica count to the autoscaler', () => {
    expect(spec.replicas).toBeUndefined();
    expect(spec.selector).toEqual({ matchLabels: podLabels });
  });

  it('scales on CPU utilization of a Deployment with CPU requests, from at least 2 replicas', () => {
    const h = hpa.spec as Obj & { scaleTargetRef: Obj; metrics: Obj[] };
    expect(hpa.apiVersion).toBe('autoscaling/v2');
    expect(h.scaleTargetRef).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: (deployment.metadata as Obj).name,
    });
    expect(h.minReplicas as number).toBeGreaterThanOrEqual(2);
    expect(h.maxReplicas as number).toBeGreaterThan(h.minReplicas as number);
    expect(h.metrics).toEqual([
      {
        type: 'Resource',
        resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: expect.any(Number) } },
      },
    ]);
    // Utilization is relative to requests.cpu: without it the HPA cannot scale.
    expect(resources.requests.cpu).toBeDefined();
    expect(resources.limits.memory).toBeDefined();
  });

  it('keeps replicas up through voluntary disruptions', () => {
    const p = pdb.spec as Obj;
    expect(pdb.apiVersion).toBe('policy/v1');
    expect(p.selector).toEqual({ matchLabels: podLabels });
    const minReplicas = (hpa.spec as Obj).minReplicas as number;
    if (p.maxUnavailable !== undefined) expect(p.maxUnavailable as number).toBeLessThan(minReplicas);
    else expect(p.minAvailable as number).toBeLessThan(minReplicas); // else no node could ever drain
    expect((spec.strategy as Obj & { rollingUpdate: Obj }).rollingUpdate.maxUnavailable).toBe(0);
  });

  it('points the Service at the shim port only', () => {
    const ports = (service.spec as Obj).ports as Obj[];
    expect(ports.map((p) => p.targetPort)).toEqual(['http']);
    expect((service.spec as Obj).selector).toEqual(podLabels);
  });

  it('probes on the admin port and gives the drain time to finish before SIGKILL', () => {
    expect((shim.readinessProbe as Obj).httpGet).toEqual({ path: '/readyz', port: 'admin' });
    expect((shim.livenessProbe as Obj).httpGet).toEqual({ path: '/healthz', port: 'admin' });
    const preStop = ((shim.lifecycle as Obj)?.preStop as Obj)?.exec as { command: string[] };
    const preStopMs = Number(preStop.command[1]) * 1000;
    expect((pod.terminationGracePeriodSeconds as number) * 1000).toBeGreaterThan(
      preStopMs + config.shutdownTimeoutMs,
    );
  });

  it('runs non-root, read-only, without privilege escalation or service links', () => {
    expect((pod.securityContext as Obj).runAsNonRoot).toBe(true);
    expect(pod.enableServiceLinks).toBe(false);
    const sc = shim.securityContext as Obj;
    expect(sc.runAsUser).toBe(1000);
    expect(sc.readOnlyRootFilesystem).toBe(true);
    expect(sc.allowPrivilegeEscalation).toBe(false);
    expect((sc.capabilities as Obj).drop).toEqual(['ALL']);
  });
});

describe('deploy/compose.yaml', () => {
  const [doc] = documents('compose.yaml');
  const services = (doc as Obj).services as Record<string, Obj>;
  const shim = services.shim as Obj;
  const config = loadConfig(envOf(shim), PLUGINS);

  it('gives the drain time to finish before SIGKILL', () => {
    const grace = /^(\d+)s$/.exec(String(shim.stop_grace_period));
    expect(Number(grace?.[1]) * 1000).toBeGreaterThan(config.shutdownTimeoutMs);
  });

  it('forwards to the backend service and publishes the admin port on loopback only', () => {
    expect(config.upstreamUrl?.hostname).toBe('backend');
    expect(Object.keys(services)).toContain('backend');
    const admin = (shim.ports as string[]).filter((p) => p.endsWith(`:${config.adminPort}`));
    expect(admin.length).toBeGreaterThan(0);
    for (const p of admin) expect(p.startsWith('127.0.0.1:')).toBe(true);
  });

  it('runs read-only without capabilities', () => {
    for (const s of Object.values(services)) {
      expect(s.read_only).toBe(true);
      expect(s.cap_drop).toEqual(['ALL']);
      expect(s.security_opt).toContain('no-new-privileges:true');
    }
  });
});

/**
 * The NetworkPolicy of a manifest admits the shim's front port from the cluster and its admin port only
 * from the monitoring namespace, and no other port: the admin listener's usage report and its `DELETE`
 * carry no credential (docs/reliability.md, review of the twenty-fifth session).
 */
describe.each(['kubernetes.yaml', 'front-door.yaml'])('the NetworkPolicy of deploy/%s', (file) => {
  const docs = documents(file);
  const policy = docs.find((d) => d.kind === 'NetworkPolicy') as Obj & {
    spec: {
      podSelector: { matchLabels: Obj };
      policyTypes: string[];
      ingress: Array<{ from?: Obj[]; ports: Array<{ port: unknown }> }>;
    };
  };
  const deployment = docs.find((d) => d.kind === 'Deployment') as Obj & {
    spec: { template: { metadata: { labels: Obj } } };
  };

  it("selects the Deployment's pods, for ingress", () => {
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels))
      expect(deployment.spec.template.metadata.labels[k]).toBe(v);
  });

  it('admits the front port from anywhere, the admin port only from the monitoring namespace, and nothing else', () => {
    const rules = policy.spec.ingress;
    const ports = rules.flatMap((r) => r.ports.map((p) => p.port));
    expect(ports.sort()).toEqual(['admin', 'http']);
    const front = rules.find((r) => r.ports.some((p) => p.port === 'http'));
    expect(front?.from).toBeUndefined();
    const admin = rules.find((r) => r.ports.some((p) => p.port === 'admin'));
    expect(admin?.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ]);
  });
});
