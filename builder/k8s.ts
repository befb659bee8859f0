import { BundleError } from '../errors/index.js'
import type { BundleInfo } from '../store/index.js'
import {
  type AutoscaleKind,
  cpuAutoscaler,
  DEFAULT_TARGET,
  knativeService,
  queueAutoscaler,
  queueHpa,
  workerQueueAutoscaler,
} from './k8s-autoscale.js'
import { checkOptions, PORT } from './k8s-checks.js'
import { IMAGE_UID, type BundleManifest } from './manifest.js'

export interface K8sOptions {
  image: string
  replicas?: number
  /** GPUs per pod (nvidia.com/gpu). */
  gpu?: number
  /** Autoscaling bounds: with --max an autoscaler is emitted (--autoscale says which). */
  min?: number
  max?: number
  cpu?: string
  memory?: string
  namespace?: string
  /** The server's shutdown grace (bundle serve --grace), in ms. */
  graceMs?: number
  /** Serve the Open Inference Protocol over gRPC on this port too (container and Service). */
  grpcPort?: number
  /**
   * Scale out: API pods run `--runners remote` against this Redis and a second Deployment runs
   * `bundle worker` (GPUs go to the workers), each with its own autoscaler bounds.
   */
  redis?: string
  workerReplicas?: number
  workerMin?: number
  workerMax?: number
  /** What the API Deployment scales on (with --max): cpu (a HorizontalPodAutoscaler) or queue (KEDA). */
  autoscale?: AutoscaleKind
  /** cpu: CPU utilization in percent (default 70); queue: the load per replica, 1 = fully busy (default 0.8). */
  target?: number
  /** queue: the Prometheus KEDA queries (its serverAddress). */
  prometheus?: string
  /** queue: keda (a ScaledObject, default) or hpa (an HPA on prometheus-adapter's External metric). */
  queueScaler?: 'keda' | 'hpa'
}

/** How long a pod keeps accepting after SIGTERM (bundle serve --drain-delay), past its preStop hook. */
const DRAIN_DELAY_MS = 2_000

/** Kubernetes names: lower-case alphanumerics and "-" (bundle names may hold "." and "_"). */
const k8sName = (name: string): string =>
  name
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63) || 'bundle'

/** What every manifest of one bundle shares. */
interface Shared {
  bundle: BundleInfo
  m: BundleManifest
  o: K8sOptions
  name: string
  labels: Record<string, string>
  metadata: { name: string; namespace?: string; labels: Record<string, string>; annotations: Record<string, string> }
  /** With Redis, the API pods hold no model processes: GPUs and model memory go to the workers. */
  remote: boolean
  redisEnv: { name: string; value: string }[]
}

const SHM_VOLUME = [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '512Mi' } }]

/** The API server's Deployment: probes, drain on shutdown, Prometheus annotations, non-root. */
function apiDeployment(x: Shared, replicas: number): Record<string, unknown> {
  const { o, m, name, labels, metadata, remote, redisEnv } = x
  const selector = { 'app.kubernetes.io/name': name }
  // After SIGTERM the server keeps accepting for DRAIN_DELAY_MS (answering 503, Connection: close),
  // then finishes in-flight work for up to graceMs: the pod must not be killed before it ends.
  const graceSeconds = Math.ceil(((o.graceMs ?? 30_000) + DRAIN_DELAY_MS) / 1000) + 15
  const gpu = remote ? 0 : (o.gpu ?? 0)
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata,
    spec: {
      replicas,
      selector: { matchLabels: selector },
      template: {
        metadata: {
          labels,
          annotations: {
            'prometheus.io/scrape': 'true',
            'prometheus.io/port': String(PORT),
            'prometheus.io/path': '/metrics',
          },
        },
        spec: {
          terminationGracePeriodSeconds: graceSeconds,
          securityContext: { runAsNonRoot: true, runAsUser: IMAGE_UID, runAsGroup: IMAGE_UID, fsGroup: IMAGE_UID },
          containers: [
            {
              name,
              image: o.image,
              ...(remote ? { args: ['--runners', 'remote'] } : {}),
              ports: [
                { name: 'http', containerPort: PORT },
                ...(o.grpcPort ? [{ name: 'grpc', containerPort: o.grpcPort }] : []),
              ],
              env: [
                { name: 'PORT', value: String(PORT) },
                ...(o.grpcPort ? [{ name: 'GRPC_PORT', value: String(o.grpcPort) }] : []),
                { name: 'HOST', value: '0.0.0.0' },
                { name: 'BUNDLE_DRAIN_DELAY_MS', value: String(DRAIN_DELAY_MS) },
                ...redisEnv,
                // Workers scaled to zero: ready without one, each batch waiting for one until its deadline.
                ...(remote && o.workerMin === 0 ? [{ name: 'BUNDLE_REMOTE_SCALE_TO_ZERO', value: '1' }] : []),
                ...Object.entries(m.env ?? {}).map(([k, v]) => ({ name: k, value: v })),
              ],
              startupProbe: { httpGet: { path: '/livez', port: 'http' }, periodSeconds: 2, failureThreshold: 60 },
              readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 5, failureThreshold: 2 },
              livenessProbe: { httpGet: { path: '/livez', port: 'http' }, periodSeconds: 10, failureThreshold: 3 },
              // Endpoints are removed asynchronously: keep answering a few seconds before SIGTERM (and,
              // after it, the drain delay answers 503 to whatever still arrives).
              lifecycle: { preStop: { exec: { command: ['node', '-e', 'setTimeout(() => {}, 5000)'] } } },
              resources: {
                requests: { cpu: o.cpu ?? '1', memory: o.memory ?? '1Gi', ...(gpu ? { 'nvidia.com/gpu': gpu } : {}) },
                limits: { memory: o.memory ?? '1Gi', ...(gpu ? { 'nvidia.com/gpu': gpu } : {}) },
              },
              volumeMounts: [{ name: 'shm', mountPath: '/dev/shm' }],
            },
          ],
          volumes: SHM_VOLUME,
        },
      },
    },
  }
}

/** The Service in front of the API pods (gRPC named so meshes and ingresses speak HTTP/2 to it). */
function apiService(x: Shared): Record<string, unknown> {
  const { o, metadata, name } = x
  const selector = { 'app.kubernetes.io/name': name }
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata,
    spec: {
      selector,
      ports: [
        { name: 'http', port: 80, targetPort: 'http' },
        // Named grpc so meshes and ingresses speak HTTP/2 to it.
        ...(o.grpcPort ? [{ name: 'grpc', port: o.grpcPort, targetPort: 'grpc', appProtocol: 'grpc' }] : []),
      ],
    },
  }
}

/** The API Deployment's autoscaler: on CPU (the default), or on the load in replicas through KEDA (queue). */
function apiAutoscaler(x: Shared, min: number, max: number): Record<string, unknown>[] {
  const { o, metadata, name, m } = x
  const kind = o.autoscale ?? 'cpu'
  const target = o.target ?? DEFAULT_TARGET[kind]
  if (kind !== 'queue') return [cpuAutoscaler(metadata, name, min, max, target)]
  if (o.queueScaler === 'hpa')
    return queueHpa(metadata, name, { min, max, threshold: target, service: m.service?.name ?? m.name })
  return [
    queueAutoscaler(metadata, name, {
      min,
      max,
      threshold: target,
      prometheus: o.prometheus!,
      service: m.service?.name ?? m.name,
    }),
  ]
}

/** Scale-out workers: `bundle worker` pods fed through Redis, with the GPUs; their own autoscaler bounds. */
function workerManifests(x: Shared): Record<string, unknown>[] {
  const { o, m, name, labels, metadata, redisEnv } = x
  const out: Record<string, unknown>[] = []
  const wname = `${name}-worker`.slice(0, 63)
  const wlabels = { ...labels, 'app.kubernetes.io/name': wname, 'app.kubernetes.io/component': 'worker' }
  const wmeta = { ...metadata, name: wname, labels: wlabels }
  const wmin = o.workerMin ?? (o.workerMax !== undefined ? 1 : undefined)
  const wgpu = o.gpu ?? 0
  out.push({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: wmeta,
    spec: {
      replicas: o.workerReplicas ?? wmin ?? 1,
      selector: { matchLabels: { 'app.kubernetes.io/name': wname } },
      template: {
        metadata: { labels: wlabels },
        spec: {
          // A worker finishes the batches it holds on SIGTERM; others take the rest.
          terminationGracePeriodSeconds: 30,
          securityContext: { runAsNonRoot: true, runAsUser: IMAGE_UID, runAsGroup: IMAGE_UID, fsGroup: IMAGE_UID },
          containers: [
            {
              name: 'worker',
              image: o.image,
              command: ['node', '/app/node_modules/modelbundle/bin/bundle', 'worker', '/app'],
              env: [...redisEnv, ...Object.entries(m.env ?? {}).map(([k, v]) => ({ name: k, value: v }))],
              resources: {
                requests: {
                  cpu: o.cpu ?? '1',
                  memory: o.memory ?? '1Gi',
                  ...(wgpu ? { 'nvidia.com/gpu': wgpu } : {}),
                },
                limits: { memory: o.memory ?? '1Gi', ...(wgpu ? { 'nvidia.com/gpu': wgpu } : {}) },
              },
              volumeMounts: [{ name: 'shm', mountPath: '/dev/shm' }],
            },
          ],
          volumes: [{ name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '512Mi' } }],
        },
      },
    },
  })
  if (o.workerMax === undefined) return out
  // Under --autoscale queue the workers scale on the workers the load needs, kept at --target each.
  out.push(
    o.autoscale === 'queue'
      ? workerQueueAutoscaler(wmeta, wname, {
          min: wmin ?? 1,
          max: o.workerMax,
          threshold: o.target ?? DEFAULT_TARGET.queue,
          service: m.service?.name ?? m.name,
          prometheus: o.queueScaler === 'hpa' ? undefined : o.prometheus,
        })
      : cpuAutoscaler(wmeta, wname, wmin ?? 1, o.workerMax, DEFAULT_TARGET.cpu),
  )
  return out
}

/**
 * Deployment, Service and (with --max, and --min) a HorizontalPodAutoscaler for a bundle's image:
 * probes on /readyz and /livez, a termination grace longer than the server's drain, requests and
 * limits (GPUs included), Prometheus scrape annotations, a memory-backed /dev/shm for the
 * runners' shared-memory tensors (the 64 MB default is too small), and the non-root user the
 * image runs as.
 */
export function k8sManifests(bundle: BundleInfo, o: K8sOptions): Record<string, unknown>[] {
  checkOptions(o)
  const min = o.min ?? (o.max !== undefined ? 1 : undefined)
  const name = k8sName(bundle.name)
  const labels = {
    'app.kubernetes.io/name': name,
    'app.kubernetes.io/version': bundle.version.slice(0, 63),
    'app.kubernetes.io/managed-by': 'modelbundle',
  }
  const metadata = {
    name,
    ...(o.namespace ? { namespace: o.namespace } : {}),
    labels,
    annotations: { 'modelbundle.io/bundle': bundle.tag, 'modelbundle.io/digest': bundle.digest },
  }
  const remote = o.redis !== undefined
  const redisEnv = remote ? [{ name: 'BUNDLE_REDIS_URL', value: o.redis! }] : []
  const x: Shared = { bundle, m: bundle.manifest as BundleManifest, o, name, labels, metadata, remote, redisEnv }
  if (o.autoscale === 'concurrency' && !(/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(name) && name.length <= 57))
    throw new BundleError(
      'E_CLI_USAGE',
      `--autoscale concurrency: Knative names the service and its revisions after "${name}", which must start with ` +
        'a letter and have at most 57 characters; build the bundle under such a name',
    )
  const deployment = apiDeployment(x, o.replicas ?? min ?? 1)
  const out =
    o.autoscale === 'concurrency'
      ? [
          knativeService(deployment as never, {
            min: o.min ?? 0,
            max: o.max!,
            target: o.target ?? DEFAULT_TARGET.concurrency,
          }),
        ]
      : [deployment, apiService(x)]
  if (o.max !== undefined && o.autoscale !== 'concurrency') out.push(...apiAutoscaler(x, min ?? 1, o.max))
  if (remote) out.push(...workerManifests(x))
  return out
}
