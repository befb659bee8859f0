import { Command, Option } from 'commander'
import type { Framework, ModelInfo, ModelStore } from '../store/index.js'
import { confirm } from './confirm.js'
import { humanSize, importLine, modelsTable, structured, write } from './output.js'
import { progressBar } from './progress.js'
import { remoteModelCommands } from './remote-models.js'
import { modelsSignCommand } from './signing.js'

const collect = (value: string, previous: string[]): string[] => [...previous, value]

// The store (better-sqlite3, onnxruntime) loads only when a command runs, keeping --help fast.
async function openStore(): Promise<{ store: ModelStore; lib: typeof import('../store/index.js') }> {
  const lib = await import('../store/index.js')
  return { store: lib.ModelStore.open(), lib }
}

async function withStore<T>(
  fn: (store: ModelStore, lib: typeof import('../store/index.js')) => Promise<T>,
): Promise<T> {
  const { store, lib } = await openStore()
  try {
    return await fn(store, lib)
  } finally {
    store.close()
  }
}

async function printModel(m: ModelInfo, format: string): Promise<void> {
  write(format === 'tag' ? `${m.tag}\n` : await structured(m, format as 'json' | 'yaml'))
}

/** `bundle models save`. */
function saveCommand(): Command {
  return new Command('save')
    .description('store files as a new model version')
    .argument('<path...>', 'model files and/or directories')
    .requiredOption('--name <name>', 'model name (letters, digits, - . _; case is kept)')
    .option('--version <version>', 'version; generated (sortable by time) when omitted')
    .option('--label <key=value>', 'label, repeatable', collect, [])
    .option('--metadata <json>', 'JSON object stored with the model')
    .addOption(
      new Option('--framework <framework>', 'onnx or custom (default: onnx when an .onnx file is saved)').choices([
        'onnx',
        'custom',
      ]),
    )
    .addOption(new Option('-o, --output <format>', 'what to print').choices(['tag', 'json', 'yaml']).default('tag'))
    .action(
      async (
        paths: string[],
        opts: {
          name: string
          version?: string
          label: string[]
          metadata?: string
          framework?: Framework
          output: string
        },
      ) => {
        await withStore(async (store, lib) => {
          const labels = lib.parseLabelArgs(opts.label) as Record<string, string>
          const metadata = opts.metadata === undefined ? undefined : lib.parseMetadataArg(opts.metadata)
          const bar = progressBar(`saving ${opts.name}`)
          try {
            const m = await store.save(
              { name: opts.name, version: opts.version, paths, framework: opts.framework, labels, metadata },
              { onProgress: bar.onProgress },
            )
            bar.done()
            await printModel(m, opts.output)
          } finally {
            bar.done()
          }
        })
      },
    )
}

/** `bundle models list`. */
function listCommand(): Command {
  return new Command('list')
    .alias('ls')
    .description('list stored models, newest first within each name')
    .argument('[name]', 'only this model name')
    .option('--label <key[=value]>', 'only models with this label (repeatable)', collect, [])
    .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json', 'yaml']).default('table'))
    .action(async (name: string | undefined, opts: { label: string[]; output: string }) => {
      await withStore(async (store, lib) => {
        const filter = { name, labels: lib.parseLabelArgs(opts.label, true) }
        write(
          opts.output === 'table'
            ? modelsTable(store.summaries(filter))
            : await structured(store.list(filter), opts.output as 'json' | 'yaml'),
        )
      })
    })
}

/** `bundle models get`. */
function getCommand(): Command {
  return new Command('get')
    .description('show one model (name, name:version, version prefix, name@semver-range)')
    .argument('<tag>')
    .addOption(
      new Option('-o, --output <format>', 'output format; path prints a directory with the model files')
        .choices(['json', 'yaml', 'path'])
        .default('yaml'),
    )
    .action(async (tag: string, opts: { output: string }) => {
      await withStore(async (store) => {
        if (opts.output === 'path') write(`${await modelDir(store, tag)}\n`)
        else write(await structured(await withServing(store.get(tag)), opts.output as 'json' | 'yaml'))
      })
    })
}

/**
 * The directory of a model's files, with its signature beside them as `model.sig` when it is
 * signed (the name model_signing gives it), so the model_signing tool can verify the directory.
 */
async function modelDir(store: ModelStore, tag: string): Promise<string> {
  const { signedModelDir } = await import('../store/index.js')
  const { dir, laidOut } = await signedModelDir(store, tag)
  if (!laidOut) process.stderr.write(`note: the store is read-only here: model.sig could not be laid out in ${dir}\n`)
  return dir
}

/** `bundle models delete`. */
function deleteCommand(): Command {
  return new Command('delete')
    .alias('rm')
    .description('delete models (a bare name means its latest version; see --all-versions)')
    .argument('<tag...>')
    .option('-y, --yes', 'do not ask for confirmation', false)
    .option('--all-versions', 'delete every version of each named model', false)
    .option('--force', 'delete even if a stored bundle uses the model', false)
    .action(async (tags: string[], opts: { yes: boolean; allVersions: boolean; force: boolean }) => {
      await withStore(async (store, lib) => {
        for (const t of tags) lib.parseTag(t, lib.MODEL_NAMES)
        // Resolve first so the prompt names exactly what will go.
        const targets = opts.allVersions
          ? tags.flatMap((t) => store.list({ name: lib.parseTag(t, lib.MODEL_NAMES).name }))
          : tags.map((t) => store.get(t))
        if (!opts.allVersions || targets.length > 0) {
          const names = [...new Set(targets.map((m) => m.tag))]
          if (!(await confirm(`delete ${names.join(', ')}?`, opts.yes))) {
            process.stderr.write('nothing deleted\n')
            return
          }
        }
        const exact = opts.allVersions ? tags : targets.map((m) => m.tag)
        for (const m of store.delete(exact, { force: opts.force, allVersions: opts.allVersions }))
          write(`deleted ${m.tag}\n`)
      })
    })
}

/** `bundle models export`. */
function exportCommand(): Command {
  return new Command('export')
    .description('write a model to a .bundlemodel archive (gzip tar with a checksummed manifest)')
    .argument('<tag>')
    .argument('[out]', 'file or directory (default ./<name>-<version>.bundlemodel)')
    .action(async (tag: string, out: string | undefined) => {
      await withStore(async (store) => {
        const bar = progressBar(`exporting ${tag}`)
        try {
          const { path, model } = await store.export(tag, out, { onProgress: bar.onProgress })
          bar.done()
          write(`exported ${model.tag} to ${path}\n`)
        } finally {
          bar.done()
        }
      })
    })
}

/** `bundle models import`. */
function importCommand(): Command {
  return new Command('import')
    .description('import a .bundlemodel archive (verified before anything is stored)')
    .argument('<file>')
    .option('--force', 'replace a different model stored under the same tag', false)
    .action(async (file: string, opts: { force: boolean }) => {
      await withStore(async (store) => {
        const bar = progressBar(`importing ${file}`)
        try {
          const { model, status } = await store.import(file, { force: opts.force, onProgress: bar.onProgress })
          bar.done()
          write(importLine(status, model.tag, model.digest))
        } finally {
          bar.done()
        }
      })
    })
}

/** `bundle models verify`. */
function verifyCommand(): Command {
  return new Command('verify')
    .description('re-hash every stored file; exit 1 if any is missing or corrupt')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (opts: { output: string }) => {
      await withStore(async (store) => {
        const r = await store.verify()
        if (opts.output === 'json') write(`${JSON.stringify(r, null, 2)}\n`)
        else {
          write(`${r.models} models, ${r.blobs} files, ${humanSize(r.bytes)} checked: ${r.ok ? 'ok' : 'DAMAGED'}\n`)
          for (const m of r.missing) write(`missing ${m.sha256} used by ${m.models.join(', ')}\n`)
          for (const c of r.corrupt) write(`corrupt ${c.sha256} used by ${c.models.join(', ')}\n`)
          const g = r.garbage
          if (g.blobs + g.tempFiles + g.staleLeases + g.checkouts > 0) {
            write(
              `reclaimable leftovers: ${g.blobs} unreferenced files, ${g.tempFiles} temp files, ${g.staleLeases} ` +
                `stale leases, ${g.checkouts} checkouts (run \`bundle models gc\`)\n`,
            )
          }
          if (!r.ok)
            process.stderr.write(
              'error E_STORE_CORRUPT: damaged models listed above; delete and re-save or re-import them\n',
            )
        }
        if (!r.ok) process.exitCode = 1
      })
    })
}

/** `bundle models gc`. */
function gcCommand(): Command {
  return new Command('gc')
    .description('reclaim unreferenced files and leftovers of interrupted writes')
    .action(async () => {
      await withStore(async (store) => {
        const r = await store.gc()
        write(
          `reclaimed ${r.blobs} files (${humanSize(r.bytes)}), ${r.tempFiles} temp files, ${r.staleLeases} stale ` +
            `leases, ${r.checkouts} checkouts\n`,
        )
      })
    })
}

export function modelsCommand(): Command {
  const models = new Command('models').description(
    'manage the local model store ($BUNDLE_HOME, default ~/.modelbundle)',
  )
  for (const c of [
    saveCommand(),
    listCommand(),
    getCommand(),
    deleteCommand(),
    exportCommand(),
    importCommand(),
    verifyCommand(),
    gcCommand(),
    modelsSignCommand(),
    ...remoteModelCommands(),
  ])
    models.addCommand(c)
  return models
}

/**
 * A model as `models get` shows it: with how a server runs it by default (Triton's
 * max_batch_size, decided from its signature: batched only when every input's and output's
 * first dimension is variable).
 */
async function withServing<T extends ModelInfo>(info: T): Promise<T & { serving?: Record<string, unknown> }> {
  const { decideBatching, modelSignature } = await import('../runners/index.js')
  const signature = info.framework === 'onnx' ? modelSignature(info) : undefined
  if (signature === undefined) return info
  const plan = decideBatching(info.name, signature, {})
  return {
    ...info,
    serving: { max_batch_size: plan.maxBatchSize, batching: plan.batched ? 'dynamic' : 'none', reason: plan.reason },
  }
}
