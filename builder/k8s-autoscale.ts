// The autoscaler of the API Deployment, by what it scales on (`bundle deploy k8s --autoscale`):
// cpu — a HorizontalPodAutoscaler on CPU utilization; queue — a KEDA ScaledObject whose Prometheus
// trigger reads the replicas' own estimate of the replicas the load needs (bundle_desired_replicas).

export type AutoscaleKind = 'cpu' | 'queue'

/** The defaults of --target: CPU utilization in percent; for queue, the load each replica carries (1 = fully busy). */
export const DEFAULT_TARGET: Record<AutoscaleKind, number> = { cpu: 70, queue: 0.8 }

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
            query: desiredReplicasQuery(o.service),
            threshold: String(o.threshold),
          },
        },
      ],
    },
  }
}
