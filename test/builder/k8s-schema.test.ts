import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import { Service } from 'kubernetes-models/v1/Service'
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject'
import { Service as KnativeService } from '@kubernetes-models/knative/serving.knative.dev/v1/Service'
import { type K8sOptions, k8sManifests } from '../../builder/index.js'
import type { BundleInfo } from '../../store/index.js'

// Every manifest `bundle deploy k8s` prints, validated against the Kubernetes API schemas (the
// kubernetes-models package, offline), for each combination of flags a user gives; and what a
// cluster would refuse, refused before anything is printed.

const bundle = {
  tag: 'quickstart:1.0.0',
  name: 'quickstart',
  version: '1.0.0',
  digest: `sha256:${'a'.repeat(64)}`,
  size: 1,
  models: [],
  labels: {},
  created: new Date(0).toISOString(),
  manifest: { name: 'quickstart', env: { BUNDLE_LOG_LEVEL: 'info' } },
  files: [],
} as unknown as BundleInfo

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'keda.sh/v1alpha1 ScaledObject': ScaledObject,
  'serving.knative.dev/v1 Service': KnativeService,
  'v1 ConfigMap': ConfigMap,
  'apps/v1 Deployment': Deployment,
  'v1 Service': Service,
  'autoscaling/v2 HorizontalPodAutoscaler': HorizontalPodAutoscaler,
}

/** Validates each document against its schema; answers the kinds, in order. */
function validated(o: K8sOptions): string[] {
  return k8sManifests(bundle, o).map((doc) => {
    const kind = `${doc.apiVersion} ${doc.kind}`
    const Model = MODELS[kind]
    assert.ok(Model, `a schema for ${kind}`)
    new Model(structuredClone(doc) as never).validate()
    return kind
  })
}

describe('bundle deploy k8s: manifests a cluster accepts', () => {
  it('every manifest validates against the Kubernetes schemas, whatever the flags', () => {
    const image = 'registry.example.com/acme/quickstart:1.0.0'
    assert.deepEqual(validated({ image }), ['apps/v1 Deployment', 'v1 Service'])
    assert.deepEqual(validated({ image, min: 2, max: 6, gpu: 1, memory: '2Gi', cpu: '500m', namespace: 'ml' }), [
      'apps/v1 Deployment',
      'v1 Service',
      'autoscaling/v2 HorizontalPodAutoscaler',
    ])
    assert.deepEqual(validated({ image, grpcPort: 8001, replicas: 3 }), ['apps/v1 Deployment', 'v1 Service'])
    assert.deepEqual(
      validated({ image, redis: 'redis://redis:6379', min: 1, max: 4, workerMin: 1, workerMax: 8, gpu: 1 }),
      [
        'apps/v1 Deployment',
        'v1 Service',
        'autoscaling/v2 HorizontalPodAutoscaler',
        'apps/v1 Deployment',
        'autoscaling/v2 HorizontalPodAutoscaler',
      ],
    )
    // Scaling on the load in replicas: a KEDA ScaledObject whose query sums what the replicas report.
    const prometheus = 'http://prometheus-operated.monitoring.svc:9090'
    assert.deepEqual(validated({ image, min: 2, max: 10, autoscale: 'queue', prometheus }), [
      'apps/v1 Deployment',
      'v1 Service',
      'keda.sh/v1alpha1 ScaledObject',
    ])
    const keda = k8sManifests(bundle, { image, min: 2, max: 10, autoscale: 'queue', prometheus, target: 0.5 }).at(
      -1,
    ) as { spec: Record<string, any> }
    assert.deepEqual(
      [keda.spec.scaleTargetRef.name, keda.spec.minReplicaCount, keda.spec.maxReplicaCount],
      ['quickstart', 2, 10],
    )
    assert.deepEqual(keda.spec.triggers[0], {
      type: 'prometheus',
      metricType: 'AverageValue',
      metadata: {
        serverAddress: prometheus,
        query: 'sum(bundle_desired_replicas{service="quickstart"})',
        threshold: '0.5',
      },
    })
    // Remote workers under queue scaling: on the batches waiting in Redis for them.
    const remote = { image, max: 6, autoscale: 'queue', prometheus, redis: 'redis://r:6379', workerMax: 20 } as const
    assert.deepEqual(validated(remote), [
      'apps/v1 Deployment',
      'v1 Service',
      'keda.sh/v1alpha1 ScaledObject',
      'apps/v1 Deployment',
      'keda.sh/v1alpha1 ScaledObject',
    ])
    const workerKeda = k8sManifests(bundle, remote).at(-1) as { spec: Record<string, any> }
    assert.equal(workerKeda.spec.scaleTargetRef.name, 'quickstart-worker')
    // The series carry the service's own name, which bundle.yaml's name: may differ from.
    const renamed = {
      ...bundle,
      manifest: { ...bundle.manifest, service: { entry: 'app/s.js', export: 'S', name: 'classifier' } },
    } as unknown as BundleInfo
    const kedaRenamed = k8sManifests(renamed, { image, max: 3, autoscale: 'queue', prometheus }).at(-1) as {
      spec: Record<string, any>
    }
    assert.equal(kedaRenamed.spec.triggers[0].metadata.query, 'sum(bundle_desired_replicas{service="classifier"})')
    assert.equal(
      workerKeda.spec.triggers[0].metadata.query,
      'max(sum by (runner) (bundle_runner_desired_workers{service="quickstart"}))',
    )
    // Each worker kept at --target of what it sustains, as the API pods are.
    assert.equal(workerKeda.spec.triggers[0].metadata.threshold, '0.8')
    const workerHpa = k8sManifests(bundle, { ...remote, prometheus: undefined, queueScaler: 'hpa', target: 0.6 }).at(
      -1,
    ) as { spec: Record<string, any> }
    assert.deepEqual(workerHpa.spec.metrics[0].external, {
      metric: { name: 'bundle_desired_workers', selector: { matchLabels: { service: 'quickstart' } } },
      target: { type: 'AverageValue', averageValue: '0.6' },
    })
    // Workers may scale to zero on KEDA: the API pods stay up, ready without a worker, and report the
    // workers their load needs (at least 1 while a batch waits); that wakes one (activationThreshold 0).
    const toZero = { ...remote, workerMin: 0 }
    assert.deepEqual(validated(toZero), validated(remote))
    const zeroDocs = k8sManifests(bundle, toZero) as { spec: Record<string, any> }[]
    const zeroKeda = zeroDocs.at(-1)!
    assert.equal(zeroKeda.spec.minReplicaCount, 0)
    assert.equal(zeroKeda.spec.triggers[0].metadata.activationThreshold, '0')
    assert.equal(zeroDocs[3]!.spec.replicas, 0, 'the worker Deployment starts at zero')
    const apiEnv = zeroDocs[0]!.spec.template.spec.containers[0].env as { name: string; value: string }[]
    assert.deepEqual(
      apiEnv.find((e) => e.name === 'BUNDLE_REMOTE_SCALE_TO_ZERO'),
      { name: 'BUNDLE_REMOTE_SCALE_TO_ZERO', value: '1' },
    )
    const apiEnvNotZero = (k8sManifests(bundle, remote)[0] as { spec: Record<string, any> }).spec.template.spec
      .containers[0].env as { name: string }[]
    assert.ok(!apiEnvNotZero.some((e) => e.name === 'BUNDLE_REMOTE_SCALE_TO_ZERO'))
    assert.equal(workerKeda.spec.triggers[0].metadata.activationThreshold, undefined)
    assert.deepEqual(validated({ ...remote, prometheus: undefined, queueScaler: 'hpa' }).slice(-2), [
      'apps/v1 Deployment',
      'autoscaling/v2 HorizontalPodAutoscaler',
    ])
    // Without KEDA: an HPA on the External metric prometheus-adapter serves, and the adapter's rule.
    const viaHpa = k8sManifests(bundle, { image, max: 6, autoscale: 'queue', queueScaler: 'hpa', target: 0.5 })
    assert.deepEqual(validated({ image, max: 6, autoscale: 'queue', queueScaler: 'hpa' }), [
      'apps/v1 Deployment',
      'v1 Service',
      'autoscaling/v2 HorizontalPodAutoscaler',
      'v1 ConfigMap',
    ])
    const ext = (viaHpa[2] as { spec: Record<string, any> }).spec.metrics[0]
    assert.deepEqual(ext, {
      type: 'External',
      external: {
        metric: { name: 'bundle_desired_replicas', selector: { matchLabels: { service: 'quickstart' } } },
        target: { type: 'AverageValue', averageValue: '0.5' },
      },
    })
    const rules = JSON.parse((viaHpa[3] as { data: Record<string, string> }).data['config.yaml']!)
    assert.equal(rules.externalRules[0].name.as, 'bundle_desired_replicas')
    // Scaling on requests in flight, to zero: a Knative Service in place of the Deployment and Service.
    assert.deepEqual(validated({ image, min: 0, max: 8, autoscale: 'concurrency' }), ['serving.knative.dev/v1 Service'])
    assert.deepEqual(validated({ image, max: 8, autoscale: 'concurrency', redis: 'redis://r:6379', workerMax: 4 }), [
      'serving.knative.dev/v1 Service',
      'apps/v1 Deployment',
      'autoscaling/v2 HorizontalPodAutoscaler',
    ])
    const kn = k8sManifests(bundle, { image, min: 0, max: 8, autoscale: 'concurrency', target: 16 })[0] as {
      spec: { template: { metadata: { annotations: Record<string, string> }; spec: Record<string, any> } }
    }
    const ann = kn.spec.template.metadata.annotations
    assert.deepEqual(
      [ann['autoscaling.knative.dev/metric'], ann['autoscaling.knative.dev/target']],
      ['concurrency', '16'],
    )
    assert.deepEqual([ann['autoscaling.knative.dev/min-scale'], ann['autoscaling.knative.dev/max-scale']], ['0', '8'])
    const c = kn.spec.template.spec.containers[0]
    assert.deepEqual(c.ports, [{ name: 'http1', containerPort: 3000 }], 'one port, as Knative takes it')
    assert.ok(!c.env.some((e: { name: string }) => e.name === 'PORT'), "PORT is Knative's to set")
    assert.deepEqual(c.readinessProbe.httpGet, { path: '/readyz' })
    // The schemas do refuse what is malformed: a threshold that is not a string, a Deployment without a selector.
    const broken = structuredClone(keda) as { spec: Record<string, any> }
    broken.spec.triggers[0].metadata.threshold = 0.5
    assert.throws(() => new ScaledObject(broken as never).validate())
    const dep = structuredClone(k8sManifests(bundle, { image })[0]!) as { spec: Record<string, unknown> }
    delete dep.spec.selector
    assert.throws(() => new Deployment(dep as never).validate(), /selector/)
    // Bounds are the user's: --max alone starts from one replica, and nothing is made up.
    const hpa = k8sManifests(bundle, { image, max: 5 }).find((d) => d.kind === 'HorizontalPodAutoscaler') as {
      spec: { minReplicas: number; maxReplicas: number }
    }
    assert.deepEqual([hpa.spec.minReplicas, hpa.spec.maxReplicas], [1, 5])
  })

  it('refuses what a cluster would refuse, saying why', () => {
    const refused = (o: K8sOptions, re: RegExp) =>
      assert.throws(
        () => k8sManifests(bundle, o),
        (e: Error & { code?: string }) => {
          assert.equal(e.code, 'E_CLI_USAGE')
          assert.match(e.message, re)
          return true
        },
      )
    const image = 'ghcr.io/acme/quickstart:1.0.0'
    refused({ image, min: 0, max: 4 }, /--min 0: a HorizontalPodAutoscaler refuses minReplicas 0 .*HPAScaleToZero/)
    refused({ image, min: 2 }, /--min 2 without --max: an autoscaler needs the most replicas/)
    refused({ image, min: 5, max: 2 }, /--min 5 is above --max 2/)
    refused({ image, max: 0 }, /--max 0: an autoscaler runs at least one replica/)
    refused(
      { image, redis: 'redis://r:6379', workerMin: 0, workerMax: 3 },
      /--worker-min 0: a HorizontalPodAutoscaler refuses minReplicas 0/,
    )
    refused(
      { image, max: 4, autoscale: 'queue', queueScaler: 'hpa', redis: 'redis://r:6379', workerMin: 0, workerMax: 3 },
      /--worker-min 0: a HorizontalPodAutoscaler refuses minReplicas 0/,
    )
    refused(
      { image, max: 4, autoscale: 'queue', prometheus: 'http://p:9090', redis: 'redis://r:6379', workerMin: 0 },
      /--worker-min 0 without --worker-max/,
    )
    refused(
      {
        image,
        max: 4,
        autoscale: 'queue',
        prometheus: 'http://p:9090',
        redis: 'redis://r:6379',
        workerMin: 0,
        workerMax: 0,
      },
      /--worker-max 0: an autoscaler runs at least one replica/,
    )
    refused({ image, redis: 'redis://r:6379', workerMin: 2 }, /--worker-min 2 without --worker-max/)
    refused({ image, max: 4, autoscale: 'queue' }, /--autoscale queue reads bundle_desired_replicas from Prometheus/)
    refused({ image, autoscale: 'queue', prometheus: 'http://p:9090' }, /configure an autoscaler: add --max/)
    refused(
      { image, min: 0, max: 4, autoscale: 'queue', prometheus: 'http://p:9090' },
      /--min 0: the queue autoscaler reads the load the replicas report, and at zero replicas none reports it/,
    )
    refused({ image, max: 4, autoscale: 'memory' as never }, /--autoscale must be cpu, queue or concurrency/)
    refused({ image, max: 4, autoscale: 'concurrency', grpcPort: 8001 }, /a Knative Service serves one port/)
    refused({ image, max: 4, queueScaler: 'hpa' }, /--queue-scaler chooses what scales on the queue/)
    refused({ image, max: 4, autoscale: 'queue', queueScaler: 'hpa', prometheus: 'http://p:9090' }, /drop --prometheus/)
    refused({ image, min: 0, max: 4, autoscale: 'queue', queueScaler: 'hpa' }, /at zero replicas none reports it/)
    refused({ image, min: 0, autoscale: 'concurrency' }, /configure an autoscaler: add --max/)
    refused({ image, max: 4, autoscale: 'concurrency', target: 2.5 }, /requests in flight per pod, a whole number/)
    refused({ image, max: 4, target: 0 }, /--target must be a positive number/)
    refused({ image, max: 4, target: 0.7 }, /--target for cpu is a CPU utilization in whole percent/)
    refused({ image, max: 4, autoscale: 'queue', prometheus: 'prometheus:9090' }, /is not an http\(s\) URL/)
    for (const bad of ['UPPER CASE!!', 'Quickstart:1.0.0', 'a:b:c', 'reg/x@sha256:short', ''])
      refused({ image: bad }, /is not an image reference/)
    for (const good of ['nginx', 'localhost:5000/a/b:1.0', `reg:443/x/y@sha256:${'0'.repeat(64)}`, 'a__b/c--d:v1_2'])
      assert.doesNotThrow(() => k8sManifests(bundle, { image: good }), good)
  })
})
