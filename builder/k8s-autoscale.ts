// The autoscaler of the API pods, by what it scales on (`bundle deploy k8s --autoscale`):
// cpu — a HorizontalPodAutoscaler on CPU utilization; queue — a KEDA ScaledObject whose Prometheus
// trigger reads the replicas' own estimate of the replicas the load needs (bundle_desired_replicas);
// concurrency — a Knative Service, whose autoscaler counts requests in flight (and scales to zero).

export type AutoscaleKind = 'cpu' | 'queue' | 'concurrency'

/**
 * The defaults of --target: CPU utilization in percent; for queue, the load each replica carries (1 =
 * fully busy); for concurrency, requests in flight per pod (enough for the batcher to form batches).
 */
export const DEFAULT_TARGET: Record<AutoscaleKind, number> = { cpu: 70, queue: 0.8, concurrency: 32 }

type Meta = { name: string; namespace?: string; labels: Record<string, string>; annotations: Record<string, string> }

/** A CPU-based HorizontalPodAutoscaler for Deployment `target`. */
export function cpuAutoscaler(meta: Meta, target: string, min: number, max: number, utilization: number) {
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: meta,
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: target },
      minReplicas: min,
      maxReplicas: max,
      metrics: [
        {
          type: 'Resource',
          resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: Math.round(utilization) } },
        },
      ],
    },
  }
}

/** The PromQL the queue autoscaler reads: the replicas the whole load needs, summed over the service's replicas. */
export const desiredReplicasQuery = (service: string): string =>
  `sum(bundle_desired_replicas{service="${service.replace(/["\\]/g, '\\$&')}"})`

/**
 * A KEDA ScaledObject for Deployment `target`: KEDA polls the Prometheus query and its HPA sets
 * ceil(value ÷ threshold) replicas (AverageValue), within min and max — with threshold 0.8 each
 * replica is kept at about 80% of what it sustains within its deadline.
 */
export function queueAutoscaler(
  meta: Meta,
  target: string,
  o: { min: number; max: number; threshold: number; prometheus: string; service: string },
) {
  return kedaScaledObject(meta, target, { ...o, query: desiredReplicasQuery(o.service) })
}

/** A KEDA ScaledObject scaling Deployment `target` on one Prometheus query, AverageValue `threshold`. */
function kedaScaledObject(
  meta: Meta,
  target: string,
  o: { min: number; max: number; threshold: number; prometheus: string; query: string; activationThreshold?: number },
): Record<string, unknown> {
  return {
    apiVersion: 'keda.sh/v1alpha1',
    kind: 'ScaledObject',
    metadata: meta,
    spec: {
      scaleTargetRef: { name: target },
      minReplicaCount: o.min,
      maxReplicaCount: o.max,
      pollingInterval: 15,
      cooldownPeriod: 300,
      triggers: [
        {
          type: 'prometheus',
          metricType: 'AverageValue',
          metadata: {
            serverAddress: o.prometheus,
            query: o.query,
            threshold: String(o.threshold),
            ...(o.activationThreshold !== undefined ? { activationThreshold: String(o.activationThreshold) } : {}),
          },
        },
      ],
    },
  }
}

/** A HorizontalPodAutoscaler on an External metric (prometheus-adapter's), selected by service, AverageValue. */
function externalHpa(
  meta: Meta,
  target: string,
  o: { min: number; max: number; metric: string; service: string; value: number },
): Record<string, unknown> {
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: meta,
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: target },
      minReplicas: o.min,
      maxReplicas: o.max,
      metrics: [
        {
          type: 'External',
          external: {
            metric: { name: o.metric, selector: { matchLabels: { service: o.service } } },
            target: { type: 'AverageValue', averageValue: String(o.value) },
          },
        },
      ],
    },
  }
}

/** Knative's annotations are strings; its autoscaler classes and keys (serving.knative.dev/v1). */
const KNATIVE = 'autoscaling.knative.dev'

/**
 * A Knative Service in place of the Deployment, Service and autoscaler (`--autoscale
 * concurrency`): Knative's autoscaler (KPA) keeps about `target` requests in flight per pod, from
 * `min` pods (0: scale to zero, its activator holds requests while a pod starts) to `max`. The
 * pod is the Deployment's, adjusted to Knative's rules: one port, named http1 (Knative sets PORT
 * to it, a reserved variable), probes without a port, no startup probe.
 */
export function knativeService(
  deployment: { metadata: Meta; spec: { template: { metadata: Record<string, any>; spec: Record<string, any> } } },
  o: { min: number; max: number; target: number },
): Record<string, unknown> {
  const template = structuredClone(deployment.spec.template)
  const container = template.spec.containers[0] as Record<string, any>
  container.ports = [{ name: 'http1', containerPort: Number(container.ports[0].containerPort) }]
  container.env = (container.env as { name: string }[]).filter((e) => e.name !== 'PORT')
  delete container.startupProbe
  container.readinessProbe = { httpGet: { path: '/readyz' }, periodSeconds: 5, failureThreshold: 2 }
  container.livenessProbe = { httpGet: { path: '/livez' }, periodSeconds: 10, failureThreshold: 3 }
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Service',
    metadata: deployment.metadata,
    spec: {
      template: {
        metadata: {
          labels: template.metadata.labels,
          annotations: {
            ...template.metadata.annotations,
            [`${KNATIVE}/class`]: 'kpa.autoscaling.knative.dev',
            [`${KNATIVE}/metric`]: 'concurrency',
            [`${KNATIVE}/target`]: String(o.target),
            [`${KNATIVE}/min-scale`]: String(o.min),
            [`${KNATIVE}/max-scale`]: String(o.max),
          },
        },
        // No hard limit: the server sheds what it cannot serve in time itself (503, Retry-After).
        spec: { ...template.spec, containerConcurrency: 0 },
      },
    },
  }
}

/** The External metric prometheus-adapter serves for the queue autoscaler without KEDA. */
export const EXTERNAL_METRIC = 'bundle_desired_replicas'
/** The External metric for remote workers: the workers the load needs. */
export const WORKER_EXTERNAL_METRIC = 'bundle_desired_workers'

/**
 * The remote workers the load needs: each API replica's estimate per runner (its rows offered ÷
 * what one worker sustains) summed over replicas, and the runner that needs the most — a worker
 * pod runs every runner of the bundle. (Batches waiting in Redis are no signal: an API server
 * sends only as many as the live workers take at once, and the rest wait in its batcher.)
 */
export const desiredWorkersQuery = (service: string): string =>
  `max(sum by (runner) (bundle_runner_desired_workers{service="${service.replace(/["\\]/g, '\\$&')}"}))`

/**
 * prometheus-adapter's rule (its config.yaml, `externalRules`) that serves bundle_desired_replicas
 * as an External metric: the replicas' series summed per service. `namespaced: false`: the HPA's
 * selector names the service, whatever label the scrape gave the namespace.
 */
export const adapterRules = {
  externalRules: [
    {
      seriesQuery: 'bundle_desired_replicas{service!=""}',
      resources: { namespaced: false },
      name: { matches: '^bundle_desired_replicas$', as: EXTERNAL_METRIC },
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (service)',
    },
    {
      seriesQuery: 'bundle_runner_desired_workers{service!=""}',
      resources: { namespaced: false },
      name: { matches: '^bundle_runner_desired_workers$', as: WORKER_EXTERNAL_METRIC },
      metricsQuery: 'max(sum by (service, runner) (<<.Series>>{<<.LabelMatchers>>})) by (service)',
    },
  ],
}

/**
 * The remote workers' autoscaler under --autoscale queue: ceil(workers the load needs ÷ `threshold`),
 * the load each worker is kept at — through KEDA (a ScaledObject) or an HPA on the adapter's metric.
 */
export function workerQueueAutoscaler(
  meta: Meta,
  target: string,
  o: { min: number; max: number; threshold: number; service: string; prometheus?: string | undefined },
): Record<string, unknown> {
  const bounds = { min: o.min, max: o.max }
  if (o.prometheus === undefined)
    return externalHpa(meta, target, {
      ...bounds,
      metric: WORKER_EXTERNAL_METRIC,
      service: o.service,
      value: o.threshold,
    })
  return kedaScaledObject(meta, target, {
    ...bounds,
    threshold: o.threshold,
    prometheus: o.prometheus,
    query: desiredWorkersQuery(o.service),
    // From zero, any row offered wakes a worker (KEDA activates above this value; rows offered
    // before any batch was timed count as one worker).
    ...(o.min === 0 ? { activationThreshold: 0 } : {}),
  })
}

/**
 * For clusters without KEDA (`--queue-scaler hpa`): a HorizontalPodAutoscaler on the External
 * metric prometheus-adapter serves from the rule above — the same sum, the same
 * ceil(value ÷ target) — and the rule itself in a ConfigMap to merge into the adapter's config.
 */
export function queueHpa(
  meta: Meta,
  target: string,
  o: { min: number; max: number; threshold: number; service: string },
): Record<string, unknown>[] {
  return [
    externalHpa(meta, target, {
      min: o.min,
      max: o.max,
      metric: EXTERNAL_METRIC,
      service: o.service,
      value: o.threshold,
    }),
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { ...meta, name: `${meta.name}-prometheus-adapter-rules`.slice(0, 63) },
      data: { 'config.yaml': `${JSON.stringify(adapterRules, null, 2)}\n` },
    },
  ]
}
