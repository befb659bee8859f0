import assert from 'node:assert/strict'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { parse, parseAllDocuments } from 'yaml'
import { bundle } from '../utils/cli.js'
import { tempDir } from '../utils/tmp.js'

const QUICKSTART = fileURLToPath(new URL('../../examples/quickstart', import.meta.url))

type Doc = Record<string, any>

describe('bundle deploy k8s', () => {
  it('prints a Deployment, a Service and an autoscaler, field by field what a cluster needs', {
    timeout: 120_000,
  }, async () => {
    const env = { BUNDLE_HOME: join(tempDir(), 'home') }
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const r = await bundle(
      [
        'deploy',
        'k8s',
        'quickstart:1.0.0',
        '--image',
        'registry.example.com/quickstart:1.0.0',
        '--min',
        '2',
        '--max',
        '6',
        '--gpu',
        '1',
        '--memory',
        '2Gi',
        '-n',
        'ml',
      ],
      env,
    )
    assert.equal(r.code, 0, r.stderr)
    assert.doesNotMatch(r.stdout, /[&*]a\d/, 'no YAML anchors')
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Doc)
    assert.deepEqual(
      docs.map((d) => `${d.apiVersion} ${d.kind}`),
      ['apps/v1 Deployment', 'v1 Service', 'autoscaling/v2 HorizontalPodAutoscaler'],
    )
    const [dep, svc, hpa] = docs as [Doc, Doc, Doc]
    for (const d of docs) {
      assert.equal(d.metadata.name, 'quickstart')
      assert.equal(d.metadata.namespace, 'ml')
      assert.equal(d.metadata.annotations['modelbundle.io/bundle'], 'quickstart:1.0.0')
    }
    assert.equal(dep.spec.replicas, 2)
    assert.deepEqual(dep.spec.selector.matchLabels, { 'app.kubernetes.io/name': 'quickstart' })
    const pod = dep.spec.template.spec
    // Kubernetes counts the grace period from the preStop hook: the hook's wait (endpoints leave
    // meanwhile), then the drain delay after SIGTERM, then up to 30 s to finish what is in flight
    // (--grace) must all fit before SIGKILL (test/ops/scale-down.test.ts plays that order).
    const preStopMs = Number(
      /setTimeout\(\(\) => \{\}, (\d+)\)/.exec(pod.containers[0].lifecycle.preStop.exec.command[2])?.[1],
    )
    const drainMs = Number(
      pod.containers[0].env.find((e: { name: string }) => e.name === 'BUNDLE_DRAIN_DELAY_MS').value,
    )
    assert.ok(preStopMs >= 5_000 && drainMs > 0, `preStop ${preStopMs} ms, drain delay ${drainMs} ms`)
    assert.ok(pod.terminationGracePeriodSeconds * 1000 >= preStopMs + drainMs + 30_000, 'preStop, drain and grace fit')
    assert.equal(pod.securityContext.runAsNonRoot, true)
    assert.equal(pod.securityContext.runAsUser, 10001)
    assert.equal(dep.spec.template.metadata.annotations['prometheus.io/scrape'], 'true')
    assert.equal(dep.spec.template.metadata.annotations['prometheus.io/path'], '/metrics')
    const c = pod.containers[0]
    assert.equal(c.image, 'registry.example.com/quickstart:1.0.0')
    assert.deepEqual(c.ports, [{ name: 'http', containerPort: 3000 }])
    assert.equal(c.readinessProbe.httpGet.path, '/readyz')
    assert.equal(c.livenessProbe.httpGet.path, '/livez')
    assert.deepEqual(c.resources.limits, { memory: '2Gi', 'nvidia.com/gpu': 1 })
    assert.equal(c.resources.requests['nvidia.com/gpu'], 1)
    assert.deepEqual(c.volumeMounts, [{ name: 'shm', mountPath: '/dev/shm' }])
    assert.equal(pod.volumes[0].emptyDir.medium, 'Memory')
    assert.deepEqual(svc.spec.ports, [{ name: 'http', port: 80, targetPort: 'http' }])
    assert.deepEqual(svc.spec.selector, dep.spec.selector.matchLabels)
    assert.deepEqual([hpa.spec.minReplicas, hpa.spec.maxReplicas], [2, 6])
    assert.equal(hpa.spec.scaleTargetRef.name, 'quickstart')

    const plain = await bundle(['deploy', 'k8s', 'quickstart:1.0.0', '--image', 'q:1'], env)
    assert.deepEqual(
      parseAllDocuments(plain.stdout).map((d) => (d.toJS() as Doc).kind),
      ['Deployment', 'Service'],
      'no autoscaler without --min/--max',
    )
    const bad = await bundle(['deploy', 'k8s', 'quickstart:1.0.0', '--image', 'q:1', '--min', '5', '--max', '2'], env)
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /^error E_CLI_USAGE: --min 5 is above --max 2/)
  })

  it('refuses CPU and memory quantities Kubernetes would not take', { timeout: 120_000 }, async () => {
    const env = { BUNDLE_HOME: join(tempDir(), 'home') }
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const deploy = (...extra: string[]) =>
      bundle(['deploy', 'k8s', 'quickstart:1.0.0', '--image', 'q:1', ...extra], env)
    for (const [flag, value] of [
      ['--cpu', 'abc'],
      ['--cpu', '-1'],
      ['--cpu', '0'],
      ['--cpu', '1.5.0'],
      ['--memory', '2GB'],
      ['--memory', 'lots'],
      ['--memory', '0'],
    ]) {
      const r = await deploy(flag!, value!)
      assert.equal(r.code, 2, `${flag} ${value}: ${r.stderr}`)
      assert.match(
        r.stderr,
        new RegExp(`^error E_CLI_USAGE: ${flag} "${value!.replace(/[.]/g, '\\.')}" is not a Kubernetes`),
      )
      assert.equal(r.stdout, '')
    }
    for (const [flag, value] of [
      ['--cpu', '500m'],
      ['--cpu', '0.5'],
      ['--cpu', '2'],
      ['--memory', '512Mi'],
      ['--memory', '1G'],
      ['--memory', '1.5Gi'],
    ]) {
      const r = await deploy(flag!, value!)
      assert.equal(r.code, 0, `${flag} ${value}: ${r.stderr}`)
      assert.match(r.stdout, new RegExp(`${flag!.slice(2)}: "?${value!.replace(/[.]/g, '\\.')}"?`))
    }
    // gRPC beside HTTP: a named container port, GRPC_PORT for the server, a Service port.
    const grpc = await deploy('--grpc-port', '8001')
    assert.equal(grpc.code, 0, grpc.stderr)
    const [dep, svc] = grpc.stdout.split('---\n').map((d) => parse(d))
    const container = dep.spec.template.spec.containers[0]
    assert.deepEqual(container.ports[1], { name: 'grpc', containerPort: 8001 })
    assert.deepEqual(
      container.env.find((e: { name: string }) => e.name === 'GRPC_PORT'),
      { name: 'GRPC_PORT', value: '8001' },
    )
    assert.deepEqual(svc.spec.ports[1], { name: 'grpc', port: 8001, targetPort: 'grpc', appProtocol: 'grpc' })
    for (const port of ['3000', '0', '70000']) {
      const r = await deploy('--grpc-port', port)
      assert.equal(r.code, 2, `--grpc-port ${port}: ${r.stderr}`)
      assert.match(r.stderr, /^error E_CLI_USAGE: --grpc-port must /)
    }
  })

  it('with --redis: API pods run --runners remote, a worker Deployment runs bundle worker with the GPUs, each ' +
    'autoscaled', {
    timeout: 120_000,
  }, async () => {
    const env = { BUNDLE_HOME: join(tempDir(), 'home') }
    assert.equal((await bundle(['build', QUICKSTART, '--version', '1.0.0'], env)).code, 0)
    const r = await bundle(
      [
        'deploy',
        'k8s',
        'quickstart:1.0.0',
        '--image',
        'reg/q:1',
        '--redis',
        'redis://redis.ml:6379',
        '--gpu',
        '1',
        '--min',
        '2',
        '--max',
        '4',
        '--worker-min',
        '1',
        '--worker-max',
        '8',
      ],
      env,
    )
    assert.equal(r.code, 0, r.stderr)
    const docs = parseAllDocuments(r.stdout).map((d) => d.toJS() as Doc)
    assert.deepEqual(
      docs.map((d) => `${d.kind} ${d.metadata.name}`),
      [
        'Deployment quickstart',
        'Service quickstart',
        'HorizontalPodAutoscaler quickstart',
        'Deployment quickstart-worker',
        'HorizontalPodAutoscaler quickstart-worker',
      ],
    )
    const [api, , apiHpa, worker, workerHpa] = docs as [Doc, Doc, Doc, Doc, Doc]
    const a = api.spec.template.spec.containers[0]
    assert.deepEqual(a.args, ['--runners', 'remote'])
    assert.ok(a.env.some((e: Doc) => e.name === 'BUNDLE_REDIS_URL' && e.value === 'redis://redis.ml:6379'))
    assert.equal(a.resources.requests['nvidia.com/gpu'], undefined, 'API pods hold no model')
    const w = worker.spec.template.spec.containers[0]
    assert.deepEqual(w.command, ['node', '/app/node_modules/modelbundle/bin/bundle', 'worker', '/app'])
    assert.ok(w.env.some((e: Doc) => e.name === 'BUNDLE_REDIS_URL'))
    assert.equal(w.resources.limits['nvidia.com/gpu'], 1)
    assert.deepEqual(worker.spec.selector.matchLabels, { 'app.kubernetes.io/name': 'quickstart-worker' })
    assert.equal(worker.spec.template.metadata.labels['app.kubernetes.io/component'], 'worker')
    assert.equal(worker.spec.template.spec.volumes[0].emptyDir.medium, 'Memory')
    assert.deepEqual(
      [apiHpa.spec.minReplicas, apiHpa.spec.maxReplicas, apiHpa.spec.scaleTargetRef.name],
      [2, 4, 'quickstart'],
    )
    assert.deepEqual(
      [workerHpa.spec.minReplicas, workerHpa.spec.maxReplicas, workerHpa.spec.scaleTargetRef.name],
      [1, 8, 'quickstart-worker'],
    )
    const bad = await bundle(['deploy', 'k8s', 'quickstart:1.0.0', '--image', 'reg/q:1', '--worker-max', '3'], env)
    assert.equal(bad.code, 2)
    assert.match(bad.stderr, /--worker-\* options need --redis/)
  })
})
