import { Command, Option } from 'commander'
import type { BuildReport, K8sOptions, ServiceInfo } from '../builder/index.js'
import { BundleError } from '../errors/index.js'
import type { BundleInfo, ModelStore } from '../store/index.js'
import { confirm } from './confirm.js'
import { ensembleChecker } from './ensemble-check.js'
import { findService } from './load-service.js'
import { humanSize, importLine, shortDate, structured, table, write } from './output.js'

const collect = (value: string, previous: string[]): string[] => [...previous, value]

async function withStore<T>(
  fn: (store: ModelStore, lib: typeof import('../store/index.js')) => Promise<T>,
): Promise<T> {
  const lib = await import('../store/index.js')
  const store = lib.ModelStore.open()
  try {
    return await fn(store, lib)
  } finally {
    store.close()
  }
}

/** The framework's view of a service, reduced to the plain data the builder takes. */
async function serviceInfo(entry: string): Promise<ServiceInfo> {
  const { definition, exportName } = await findService(entry)
  const { openapiDocument } = await import('../framework/index.js')
  return {
    name: definition.name,
    ...(definition.description ? { description: definition.description } : {}),
    exportName,
    apis: definition.apis.map((a) => ({ name: a.name, route: a.route, input: a.input.kind, output: a.output.kind })),
    runners: definition.runners.map((r) => ({
      name: r.name,
      kind: r.kind,
      ...(r.versions ? { tag: r.versions.tag } : {}),
    })),
    openapi: openapiDocument(definition),
  }
}

/** What a build packaged (or would), on stderr: stdout stays the tag for scripts. */
function printReport(report: BuildReport, dryRun: boolean): void {
  const total = report.files.reduce((n, f) => n + f.size, 0)
  const width = Math.max(...report.files.map((f) => f.path.length))
  const lines = [
    `${dryRun ? 'would package' : 'packaged'} ${report.files.length} file${report.files.length === 1 ? '' : 's'} ` +
      `(${humanSize(total)}):`,
  ]
  for (const f of report.files) lines.push(`  ${f.path.padEnd(width)}  ${humanSize(f.size)}`)
  lines.push(
    `${dryRun ? 'would pin' : 'pinned'} ${report.models.length} model${report.models.length === 1 ? '' : 's'}:`,
  )
  for (const m of report.models) {
    const notes = [
      ...(m.alias ? [`alias ${m.alias}`] : []),
      ...(m.requested?.length ? [`for ${m.requested.join(', ')}`] : []),
      ...(m.wouldImport ? [`not stored: a build imports it from ${m.wouldImport}`] : []),
    ]
    lines.push(`  ${m.tag}  ${m.digest}${notes.length ? `  (${notes.join('; ')})` : ''}`)
  }
  if (report.secrets.length) {
    const shown =
      report.secrets.slice(0, 20).join(', ') +
      (report.secrets.length > 20 ? `, and ${report.secrets.length - 20} more` : '')
    lines.push(
      `warning: left out ${report.secrets.length} file${report.secrets.length === 1 ? '' : 's'} that may hold ` +
        `secrets: ${shown}; to ship one on purpose, list its exact path under include: in bundle.yaml`,
    )
  }
  if (report.outside.length)
    lines.push(
      `warning: left out ${report.outside.length} symbolic link${report.outside.length === 1 ? '' : 's'} pointing ` +
        `outside the project: ${report.outside.slice(0, 20).join(', ')}; copy the file into the project to ship it`,
    )
  process.stderr.write(`${lines.join('\n')}\n`)
}

const summary = ({ manifest: _m, ...b }: Omit<BundleInfo, 'files'>) => b

/** `bundle build`: package a service into the bundle store. */
function buildCommand(): Command {
  return new Command('build')
    .description(
      'package a service (DIR/bundle.yaml) with pinned dependencies and exact model versions into the bundle store',
    )
    .argument('[dir]', 'directory holding bundle.yaml', '.')
    .option('-f, --file <file>', 'bundle file other than DIR/bundle.yaml')
    .option('--version <version>', 'bundle version; generated (sortable by time) when omitted')
    .option('--label <key=value>', 'label, repeatable', collect, [])
    .addOption(new Option('-o, --output <format>', 'what to print').choices(['tag', 'json', 'yaml']).default('tag'))
    .option('--dry-run', 'list what would be packaged and pinned, and store nothing', false)
    .action(
      async (
        dir: string,
        opts: { file?: string; version?: string; label: string[]; output: string; dryRun: boolean },
      ) => {
        await withStore(async (store, lib) => {
          const { buildBundle, planBundle } = await import('../builder/index.js')
          const labels = lib.parseLabelArgs(opts.label) as Record<string, string>
          const checkEnsemble = await ensembleChecker()
          const options = {
            dir,
            ...(opts.file ? { file: opts.file } : {}),
            ...(opts.version ? { version: opts.version } : {}),
            labels,
            store,
            loadService: serviceInfo,
            checkEnsemble,
          }
          if (opts.dryRun) {
            const report = await planBundle(options)
            printReport(report, true)
            if (opts.output !== 'tag') write(await structured(report, opts.output as 'json' | 'yaml'))
            return
          }
          const { bundle, status, report } = await buildBundle(options)
          printReport(report, false)
          if (status === 'unchanged')
            process.stderr.write(`unchanged: ${bundle.tag} already holds exactly this content (${bundle.digest})\n`)
          write(
            opts.output === 'tag'
              ? `${bundle.tag}\n`
              : await structured(summary(bundle), opts.output as 'json' | 'yaml'),
          )
        })
      },
    )
}

/** `bundle list`: stored bundles. */
function listCommand(): Command {
  return new Command('list')
    .alias('ls')
    .description('list stored bundles, newest first within each name')
    .argument('[name]', 'only this bundle name')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json', 'yaml']).default('table'))
    .action(async (name: string | undefined, opts: { output: string }) => {
      await withStore(async (store) => {
        const bundles = store.bundles.list(name)
        if (opts.output === 'table')
          write(
            table(
              ['Tag', 'Models', 'Size', 'Created'],
              bundles.map((b) => [
                b.tag,
                b.models.map((m) => m.tag).join(', ') || '-',
                humanSize(b.size),
                shortDate(b.created),
              ]),
            ),
          )
        else write(await structured(bundles.map(summary), opts.output as 'json' | 'yaml'))
      })
    })
}

/** `bundle get`: one bundle. */
function getCommand(): Command {
  return new Command('get')
    .description('show one bundle (name, name:version, version prefix, name@semver-range)')
    .argument('<tag>')
    .addOption(
      new Option(
        '-o, --output <format>',
        'output format; path prints a directory holding the bundle files (and bundle.sig when it is signed)',
      )
        .choices(['json', 'yaml', 'path'])
        .default('yaml'),
    )
    .action(async (tag: string, opts: { output: string }) => {
      await withStore(async (store) => {
        // A signed bundle's directory holds its bundle.sig too: `bundle serve DIR --trust` verifies it.
        if (opts.output === 'path') {
          const { signedBundleDir } = await import('../store/index.js')
          const { dir, laidOut } = await signedBundleDir(store, tag)
          if (!laidOut)
            process.stderr.write(`note: the store is read-only here: bundle.sig could not be laid out in ${dir}\n`)
          write(`${dir}\n`)
        } else write(await structured(store.bundles.get(tag), opts.output as 'json' | 'yaml'))
      })
    })
}

/** `bundle delete`: bundles (their models stay). */
function deleteCommand(): Command {
  return new Command('delete')
    .alias('rm')
    .description(
      'delete bundles (a bare name means its latest version; see --all-versions); their models stay and can then ' +
        'be deleted without --force',
    )
    .argument('<tag...>')
    .option('-y, --yes', 'do not ask for confirmation', false)
    .option('--all-versions', 'delete every version of each named bundle', false)
    .action(async (tags: string[], opts: { yes: boolean; allVersions: boolean }) => {
      await withStore(async (store, lib) => {
        for (const t of tags) lib.parseTag(t)
        // Resolve first so the prompt names exactly what will go.
        const targets = opts.allVersions
          ? tags.flatMap((t) => store.bundles.list(lib.parseTag(t).name).map((b) => b.tag))
          : tags.map((t) => store.bundles.get(t).tag)
        if (opts.allVersions && targets.length === 0)
          throw new BundleError('E_BUNDLE_NOT_FOUND', `no bundle named "${lib.parseTag(tags[0]!).name}" is stored`)
        if (!(await confirm(`delete ${[...new Set(targets)].join(', ')}?`, opts.yes))) {
          process.stderr.write('nothing deleted\n')
          return
        }
        const exact = opts.allVersions ? tags : targets
        for (const b of store.bundles.delete(exact, { allVersions: opts.allVersions })) write(`deleted ${b.tag}\n`)
      })
    })
}

/** `bundle export`: a bundle and its models to one archive. */
function exportCommand(): Command {
  return new Command('export')
    .description('write a bundle and the models it pins to one .bundle archive (gzip tar)')
    .argument('<tag>')
    .argument('[out]', 'file or directory (default ./<name>-<version>.bundle)')
    .action(async (tag: string, out: string | undefined) => {
      await withStore(async (store) => {
        const { path, bundle } = await store.bundles.export(tag, out)
        write(`exported ${bundle.tag} to ${path}\n`)
      })
    })
}

/** `bundle import`: an archive into the stores. */
function importCommand(): Command {
  return new Command('import')
    .description('import a .bundle archive: its models go to the model store (deduplicated), then the bundle')
    .argument('<file>')
    .action(async (file: string) => {
      await withStore(async (store) => {
        const { bundle, status, models } = await store.bundles.import(file)
        for (const m of models) write(importLine(m.status, `model ${m.tag}`))
        write(importLine(status, bundle.tag, bundle.digest))
      })
    })
}

/** `bundle sbom BUNDLE_TAG`: the bundle's CycloneDX SBOM. */
function sbomCommand(): Command {
  return new Command('sbom')
    .description(
      "print a stored bundle's software bill of materials (CycloneDX 1.6 JSON: every npm package it runs with, " +
        'every model it pins)',
    )
    .argument('<bundle-tag>')
    .action(async (tag: string) => {
      await withStore(async (store) => {
        const { SBOM_FILE } = await import('../builder/index.js')
        const b = store.bundles.get(tag)
        const file = b.files.find((f) => f.path === SBOM_FILE)
        if (file === undefined)
          throw new BundleError(
            'E_BUNDLE_INVALID',
            `bundle ${b.tag} was built without an SBOM (by an older modelbundle): build it again`,
          )
        const { readFileSync } = await import('node:fs')
        write(readFileSync(store.blobs.path(file.sha256), 'utf8'))
      })
    })
}

/** `bundle containerize`: an OCI image of a bundle. */
function containerizeCommand(): Command {
  return new Command('containerize')
    .description('build an OCI image of a bundle (docker, podman or buildah; no daemon needed with podman)')
    .argument('<tag>')
    .option('-t, --image <ref>', 'image reference (default <name>:<version>)')
    .addOption(
      new Option(
        '--backend <engine>',
        'container engine (default: docker if its daemon runs, else podman, else buildah)',
      ).choices(['docker', 'podman', 'buildah']),
    )
    .option(
      '--base-image <ref>',
      'base image instead of bundle.yaml docker.baseImage (e.g. one made by docker/local-base-image.sh)',
    )
    .option('--print-dockerfile', 'print the Dockerfile and build nothing', false)
    .option(
      '--trust <file>',
      'a public key (PEM; repeatable) the image trusts: its server verifies the bundle and every model before they ' +
        'run (the bundle must verify here first)',
      (v: string, prev: string[]) => [...prev, v],
      [],
    )
    .option('--verbose', "show the container engine's whole output, not only its build steps", false)
    .action(
      async (
        tag: string,
        opts: {
          image?: string
          backend?: 'docker' | 'podman' | 'buildah'
          baseImage?: string
          printDockerfile: boolean
          verbose: boolean
          trust: string[]
        },
      ) => {
        await withStore(async (store) => {
          const { containerize, dockerfileFor } = await import('../builder/index.js')
          if (opts.printDockerfile)
            return write(dockerfileFor(store.bundles.get(tag), opts.baseImage, opts.trust.length))
          // Progress (steps, bytes, final size) goes to stderr; stdout is the image reference alone, for scripts.
          const { image } = await containerize({
            store,
            tag,
            verbose: opts.verbose,
            ...(opts.image ? { image: opts.image } : {}),
            ...(opts.backend ? { backend: opts.backend } : {}),
            ...(opts.baseImage ? { baseImage: opts.baseImage } : {}),
            ...(opts.trust.length ? { trust: opts.trust } : {}),
          })
          write(`${image}\n`)
        })
      },
    )
}

/** `bundle deploy k8s`: Kubernetes manifests for a containerized bundle. */
function deployCommand(): Command {
  const int = (flag: string) => (v: string) => {
    const n = Number(v)
    if (!Number.isSafeInteger(n) || n < 0) throw new BundleError('E_CLI_USAGE', `${flag} "${v}" must be a whole number`)
    return n
  }
  const deploy = new Command('deploy').description('print deployment manifests for a containerized bundle')
  deploy
    .command('k8s')
    .description(
      'print Kubernetes manifests: a Deployment and Service, and with --max an autoscaler (--autoscale cpu: ' +
        'a HorizontalPodAutoscaler; queue: a KEDA ScaledObject or an External-metric HPA; concurrency: a ' +
        'Knative Service)',
    )
    .argument('<tag>')
    .requiredOption('--image <ref>', 'the image `bundle containerize` built, as the cluster pulls it')
    .option('--replicas <n>', 'replicas (default 1, or --min)', int('--replicas'))
    .option('--gpu <n>', 'nvidia.com/gpu per pod', int('--gpu'))
    .option('--min <n>', 'autoscaling: fewest replicas (≥ 1, default 1; needs --max)', int('--min'))
    .option('--max <n>', 'autoscaling: most replicas (emits the HorizontalPodAutoscaler)', int('--max'))
    .option('--cpu <quantity>', 'CPU request per pod (default 1)')
    .option('--memory <quantity>', 'memory request and limit per pod (default 1Gi)')
    .option('-n, --namespace <ns>', 'namespace to put in the manifests')
    .option('--grpc-port <port>', 'serve the Open Inference Protocol over gRPC on this port too', int('--grpc-port'))
    .option(
      '--redis <url>',
      'scale out: API pods send batches through this Redis to a worker Deployment (bundle worker)',
    )
    .option('--worker-replicas <n>', 'worker pods (default 1, or --worker-min)', int('--worker-replicas'))
    .option(
      '--worker-min <n>',
      'autoscaling: fewest worker pods (default 1; 0 with --autoscale queue on KEDA: workers scale to zero; ' +
        'needs --worker-max)',
      int('--worker-min'),
    )
    .option('--worker-max <n>', 'autoscaling: most worker pods', int('--worker-max'))
    .option(
      '--autoscale <kind>',
      'with --max, what the API pods scale on: cpu (a HorizontalPodAutoscaler, default), queue (a KEDA ' +
        'ScaledObject on bundle_desired_replicas, the load in replicas the pods report) or concurrency (a Knative ' +
        'Service on requests in flight, down to zero with --min 0); docs/kubernetes.md',
    )
    .option(
      '--target <n>',
      'cpu: CPU utilization in percent (default 70); queue: the load each pod carries, 1 = fully busy (default ' +
        '0.8); concurrency: requests in flight per pod (default 32)',
      (v: string) => Number(v),
    )
    .option('--prometheus <url>', 'queue: the Prometheus KEDA reads the metric from (its serverAddress)')
    .option(
      '--queue-scaler <engine>',
      'queue: keda (a ScaledObject, default) or hpa (a HorizontalPodAutoscaler on the External metric ' +
        'prometheus-adapter serves, with the adapter rule in a ConfigMap), for clusters without KEDA',
    )
    .action(
      async (
        tag: string,
        // The flags are named after the manifest options they set (commander camel-cases them).
        opts: K8sOptions,
      ) => {
        await withStore(async (store) => {
          const { k8sManifests } = await import('../builder/index.js')
          const { stringify } = await import('yaml')
          const docs = k8sManifests(store.bundles.get(tag), opts)
          write(docs.map((d) => stringify(d, { lineWidth: 0, aliasDuplicateObjects: false })).join('---\n'))
        })
      },
    )
  return deploy
}

export function bundleCommands(): Command[] {
  return [
    buildCommand(),
    listCommand(),
    getCommand(),
    deleteCommand(),
    exportCommand(),
    importCommand(),
    containerizeCommand(),
    sbomCommand(),
    deployCommand(),
  ]
}
