import { BundleError } from '../errors/index.js'
import type { K8sOptions } from './k8s.js'

/** The port the server listens on in its container (PORT). */
export const PORT = 3000

// What `bundle deploy k8s` refuses before it prints anything: what a cluster would refuse at
// `kubectl apply` (or accept and misbehave on), each with the reason.

/** A positive CPU quantity: whole or decimal cores, or millicores. */
const CPU = /^(?:[1-9]\d*(?:\.\d+)?|0\.\d*[1-9]\d*|[1-9]\d*m)$/
/** A positive memory quantity: a number with a binary (Ki…Ei) or decimal (k, M…E) suffix, or bytes. */
const MEMORY = /^(?:[1-9]\d*(?:\.\d+)?|0\.\d*[1-9]\d*)(?:[KMGTPE]i|[kMGTPE])?$/

/** The flags, checked as Kubernetes would take them: a typo fails here, not at `kubectl apply`. */
export function checkOptions(o: K8sOptions): void {
  const positive = (flag: string, v: number | undefined) => {
    if (v !== undefined && !(Number.isSafeInteger(v) && v >= 0))
      throw new BundleError('E_CLI_USAGE', `${flag} must be a whole number, got ${v}`)
  }
  positive('--replicas', o.replicas)
  positive('--gpu', o.gpu)
  positive('--min', o.min)
  positive('--max', o.max)
  positive('--worker-replicas', o.workerReplicas)
  positive('--worker-min', o.workerMin)
  positive('--worker-max', o.workerMax)
  if (o.grpcPort !== undefined && !(Number.isSafeInteger(o.grpcPort) && o.grpcPort >= 1 && o.grpcPort <= 65535))
    throw new BundleError('E_CLI_USAGE', `--grpc-port must be a port from 1 to 65535, got ${o.grpcPort}`)
  if (o.grpcPort === PORT) throw new BundleError('E_CLI_USAGE', `--grpc-port must differ from the HTTP port ${PORT}`)
  // Kubernetes quantities: a typo such as "abc" or "2GB" would only fail at `kubectl apply`.
  if (o.cpu !== undefined && !CPU.test(o.cpu))
    throw new BundleError(
      'E_CLI_USAGE',
      `--cpu "${o.cpu}" is not a Kubernetes CPU quantity: cores (1, 0.5) or millicores (500m)`,
    )
  if (o.memory !== undefined && !MEMORY.test(o.memory))
    throw new BundleError(
      'E_CLI_USAGE',
      `--memory "${o.memory}" is not a Kubernetes memory quantity: bytes with a suffix, e.g. 512Mi, 2Gi, 1G`,
    )
  if (o.redis !== undefined && !/^rediss?:\/\/./.test(o.redis))
    throw new BundleError('E_CLI_USAGE', `--redis "${o.redis}" is not a Redis URL (redis://HOST:6379)`)
  if (o.redis === undefined && (o.workerReplicas ?? o.workerMin ?? o.workerMax) !== undefined)
    throw new BundleError('E_CLI_USAGE', '--worker-* options need --redis: workers are fed through Redis')
  checkImage(o.image)
  checkAutoscale(o)
  // Knative scales to zero (its activator holds requests while a pod starts); --min 0 is its to take.
  if (!(o.autoscale === 'concurrency' && o.min === 0))
    checkBounds('--min', '--max', o.min, o.max, o.autoscale === 'queue')
  else if (o.max === undefined) throw new BundleError('E_CLI_USAGE', '--min 0 without --max: add --max N')
  // Workers on KEDA may scale to zero: the API pods, which stay up, report the workers their load needs.
  if (o.workerMin === 0 && o.autoscale === 'queue' && o.queueScaler !== 'hpa') {
    if (o.workerMax === undefined)
      throw new BundleError('E_CLI_USAGE', '--worker-min 0 without --worker-max: add --worker-max N')
    if (o.workerMax === 0)
      throw new BundleError('E_CLI_USAGE', '--worker-max 0: an autoscaler runs at least one replica')
  } else checkBounds('--worker-min', '--worker-max', o.workerMin, o.workerMax, false)
}

/** --autoscale, --target and --prometheus: what scales the API Deployment, checked together. */
function checkAutoscale(o: K8sOptions): void {
  const usage = (msg: string) => new BundleError('E_CLI_USAGE', msg)
  if (o.autoscale !== undefined && !['cpu', 'queue', 'concurrency'].includes(o.autoscale))
    throw usage(`--autoscale must be cpu, queue or concurrency, not "${o.autoscale}"`)
  if (o.autoscale === 'concurrency') {
    // Knative's rules: one port per pod, and its Service stands in for the Deployment's replicas.
    if (o.grpcPort !== undefined)
      throw usage(
        '--autoscale concurrency: a Knative Service serves one port; drop --grpc-port (or scale on cpu/queue)',
      )
    if (o.replicas !== undefined) throw usage('--autoscale concurrency: Knative sets the pods; use --min and --max')
    if (o.target !== undefined && !Number.isInteger(o.target))
      throw usage(`--target for concurrency is requests in flight per pod, a whole number, got ${o.target}`)
  }
  if ((o.autoscale ?? o.target ?? o.prometheus) !== undefined && o.max === undefined)
    throw usage('--autoscale, --target and --prometheus configure an autoscaler: add --max (the most replicas)')
  if (o.target !== undefined && !(Number.isFinite(o.target) && o.target > 0))
    throw usage(`--target must be a positive number, got ${o.target}`)
  if (o.autoscale === undefined || o.autoscale === 'cpu')
    if (o.target !== undefined && !Number.isInteger(o.target))
      throw usage(`--target for cpu is a CPU utilization in whole percent (e.g. 70), got ${o.target}`)
  if (o.queueScaler !== undefined && o.queueScaler !== 'keda' && o.queueScaler !== 'hpa')
    throw usage(`--queue-scaler must be keda or hpa, not "${o.queueScaler}"`)
  if (o.queueScaler !== undefined && o.autoscale !== 'queue')
    throw usage('--queue-scaler chooses what scales on the queue: add --autoscale queue')
  if (o.queueScaler === 'hpa' && o.prometheus !== undefined)
    throw usage(
      '--queue-scaler hpa reads the metric through prometheus-adapter, which has its Prometheus: drop --prometheus',
    )
  if (o.autoscale === 'queue' && o.queueScaler !== 'hpa' && o.prometheus === undefined)
    throw usage(
      '--autoscale queue reads bundle_desired_replicas from Prometheus: add --prometheus URL (e.g. ' +
        'http://prometheus-operated.monitoring.svc:9090)',
    )
  if (o.prometheus !== undefined && o.autoscale !== 'queue')
    throw usage('--prometheus is where --autoscale queue reads its metric: add --autoscale queue')
  if (o.prometheus !== undefined && !/^https?:\/\/[^\s/]+/.test(o.prometheus))
    throw usage(`--prometheus "${o.prometheus}" is not an http(s) URL`)
}

/**
 * A HorizontalPodAutoscaler's bounds as the API server takes them: minReplicas ≥ 1 (0 only behind
 * the HPAScaleToZero feature gate, off by default — scaling to zero is KEDA's or Knative's job),
 * maxReplicas required (no bound is guessed for the user) and not below the minimum.
 */
function checkBounds(
  minFlag: string,
  maxFlag: string,
  min: number | undefined,
  max: number | undefined,
  queue: boolean,
): void {
  if (min === 0)
    throw new BundleError(
      'E_CLI_USAGE',
      queue
        ? `${minFlag} 0: the queue autoscaler reads the load the replicas report, and at zero replicas none ` +
            `reports it, so nothing would scale back up; use ${minFlag} 1 or more`
        : `${minFlag} 0: a HorizontalPodAutoscaler refuses minReplicas 0 unless the cluster enables the ` +
            'HPAScaleToZero feature gate; scaling to zero needs an event-driven autoscaler (KEDA) or Knative' +
            (minFlag === '--worker-min' ? ' (workers: --autoscale queue --prometheus URL, KEDA)' : '') +
            `. Use ${minFlag} 1 or more`,
    )
  if (min !== undefined && max === undefined)
    throw new BundleError(
      'E_CLI_USAGE',
      `${minFlag} ${min} without ${maxFlag}: an autoscaler needs the most replicas it may run; add ${maxFlag} N`,
    )
  if (max === 0) throw new BundleError('E_CLI_USAGE', `${maxFlag} 0: an autoscaler runs at least one replica`)
  if (min !== undefined && max !== undefined && min > max)
    throw new BundleError('E_CLI_USAGE', `${minFlag} ${min} is above ${maxFlag} ${max}`)
}

// An image reference as container runtimes parse it (the distribution/reference grammar): an
// optional registry host[:port], lower-case path components, an optional tag, an optional digest.
const ALNUM = '[a-z0-9]+'
const PATH_COMPONENT = `${ALNUM}(?:(?:[._]|__|[-]+)${ALNUM})*`
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])'
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]+)?`
const IMAGE_REF = new RegExp(
  `^((?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*)(?::[\\w][\\w.-]{0,127})?` +
    '(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$',
)

/** --image as a cluster pulls it: refused here when a runtime would refuse to parse it. */
function checkImage(image: string): void {
  const m = IMAGE_REF.exec(image)
  if (m === null || m[1]!.length > 255)
    throw new BundleError(
      'E_CLI_USAGE',
      `--image ${JSON.stringify(image)} is not an image reference: ` +
        '[REGISTRY[:PORT]/]lower-case/path[:TAG][@sha256:DIGEST], ' +
        'e.g. ghcr.io/acme/quickstart:1.0.0',
    )
}
