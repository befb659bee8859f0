import { BundleError } from '../errors/index.js'
import type { InferenceModel, TensorSpec } from './inference.js'
import type { Runner, RunnerHealth } from './runner.js'
import { RunnerStats } from './stats.js'
import type { RunnerTensor } from './tensor.js'
import { spanAround } from './tracing/index.js'

/** One model call of an ensemble: which model, and how its tensors connect to the ensemble's. */
export interface EnsembleStep {
  /** A model the server hosts when it starts: one of the service's onnx runners, or its name. */
  model: string | { readonly name: string }
  /** Pin a version; default: the model's serving version, so version swaps reach the ensemble. */
  version?: string
  /** The model's input name → the ensemble tensor that feeds it. */
  inputMap: Record<string, string>
  /** The model's output name → the ensemble tensor it becomes. */
  outputMap: Record<string, string>
}

export interface EnsembleOptions {
  steps: EnsembleStep[]
  /** Ensemble tensors returned; default: every step output that no other step consumes. */
  outputs?: string[]
  description?: string
}

/** Finds a hosted model by name (and version): the server's model repository. */
export type ModelResolver = (name: string, version?: string) => InferenceModel

interface StepStats {
  model_name: string
  model_version: string
  success: { count: number; ns: number }
  fail: { count: number; ns: number }
}

interface Plan {
  steps: { model: string; version?: string; inputMap: Record<string, string>; outputMap: Record<string, string> }[]
  /** For each step, the steps whose outputs it consumes. */
  deps: number[][]
  /** Steps in an order where each comes after those it depends on. */
  order: number[]
  inputs: string[]
  outputs: string[]
}

const NAME = /^[a-z0-9]([-._a-z0-9]*[a-z0-9])?$/
const bad = (name: string, msg: string) => new BundleError('E_ENSEMBLE_INVALID', `ensemble "${name}": ${msg}`)

function isStringMap(v: unknown): v is Record<string, string> {
  return (
    v !== null &&
    typeof v === 'object' &&
    !Array.isArray(v) &&
    Object.keys(v).length > 0 &&
    Object.values(v).every((x) => typeof x === 'string' && x.length > 0)
  )
}

/** Checks the wiring that needs no model: names, maps, one producer per tensor, no cycles. */
export function planEnsemble(name: string, o: EnsembleOptions): Plan {
  if (typeof name !== 'string' || !NAME.test(name))
    throw bad(String(name), 'the name must be lower-case letters, digits and . _ -')
  if (!Array.isArray(o?.steps) || o.steps.length === 0) throw bad(name, 'it needs at least one step')
  const steps = o.steps.map((s, i) => {
    const model = typeof s?.model === 'string' ? s.model : s?.model?.name
    if (typeof model !== 'string' || !model) throw bad(name, `step ${i + 1} names no model`)
    if (s.version !== undefined && typeof s.version !== 'string')
      throw bad(name, `step ${i + 1} (${model}): version must be a string`)
    if (!isStringMap(s.inputMap))
      throw bad(name, `step ${i + 1} (${model}): inputMap must map each model input to an ensemble tensor name`)
    if (!isStringMap(s.outputMap))
      throw bad(name, `step ${i + 1} (${model}): outputMap must map model outputs to ensemble tensor names`)
    return {
      model,
      ...(s.version ? { version: s.version } : {}),
      inputMap: { ...s.inputMap },
      outputMap: { ...s.outputMap },
    }
  })
  const producer = new Map<string, number>()
  steps.forEach((s, i) => {
    for (const t of Object.values(s.outputMap)) {
      if (producer.has(t))
        throw bad(
          name,
          `tensor "${t}" is produced by step ${producer.get(t)! + 1} and step ${i + 1}; each tensor has one producer`,
        )
      producer.set(t, i)
    }
  })
  const consumed = new Set(steps.flatMap((s) => Object.values(s.inputMap)))
  const inputs = [...consumed].filter((t) => !producer.has(t))
  if (inputs.length === 0)
    throw bad(name, 'every tensor a step consumes is produced by another step, so nothing can start')
  const deps = steps.map((s) => [
    ...new Set(Object.values(s.inputMap).flatMap((t) => (producer.has(t) ? [producer.get(t)!] : []))),
  ])
  // Kahn's algorithm: whatever cannot be ordered sits on a cycle.
  const order: number[] = []
  const left = new Set(steps.keys())
  while (left.size) {
    const next = [...left].filter((i) => deps[i]!.every((d) => !left.has(d)))
    if (next.length === 0)
      throw bad(
        name,
        `steps ${[...left].map((i) => `${i + 1} (${steps[i]!.model})`).join(', ')} feed each other in a cycle`,
      )
    for (const i of next) {
      order.push(i)
      left.delete(i)
    }
  }
  const outputs = o.outputs ?? [...producer.keys()].filter((t) => !consumed.has(t))
  if (!Array.isArray(outputs) || outputs.length === 0) throw bad(name, 'it has no outputs')
  for (const t of outputs)
    if (typeof t !== 'string' || !producer.has(t))
      throw bad(name, `output "${String(t)}" is produced by no step (produced: ${[...producer.keys()].join(', ')})`)
  return { steps, deps, order, inputs, outputs: [...outputs] }
}

/** A step model's inputs and outputs, as its runner serves them (or as the store records them). */
export type SignatureResolver = (model: string, version?: string) => { inputs: TensorSpec[]; outputs: TensorSpec[] }

/**
 * Checks a planned ensemble against its step models' signatures: every map key is an input or
 * output the model has, every model input is fed, and a tensor that connects steps has one
 * dtype. Returns the ensemble's own inputs and outputs. The server runs it when an ensemble
 * starts, and `bundle build` runs it on the pinned models' stored signatures, so both agree.
 */
export function wireEnsemble(
  name: string,
  planned: Plan | EnsembleOptions,
  resolve: SignatureResolver,
): { inputs: TensorSpec[]; outputs: TensorSpec[] } {
  const plan = 'order' in planned ? planned : planEnsemble(name, planned)
  const names = (specs: TensorSpec[]) => specs.map((x) => `"${x.name}"`).join(', ') || 'none'
  const sigs = plan.steps.map((s, i) => {
    try {
      return resolve(s.model, s.version)
    } catch (err) {
      throw bad(name, `step ${i + 1}: ${(err as Error).message}`)
    }
  })
  const inputs = new Map<string, TensorSpec>()
  const outputs = new Map<string, TensorSpec>()
  plan.steps.forEach((s, i) => {
    const { inputs: ins, outputs: outs } = sigs[i]!
    for (const k of Object.keys(s.inputMap))
      if (!ins.some((x) => x.name === k))
        throw bad(name, `step ${i + 1}: ${s.model} has no input "${k}" (inputs: ${names(ins)})`)
    for (const x of ins)
      if (!(x.name in s.inputMap))
        throw bad(name, `step ${i + 1}: inputMap does not feed ${s.model}'s input "${x.name}"`)
    for (const k of Object.keys(s.outputMap))
      if (!outs.some((x) => x.name === k))
        throw bad(name, `step ${i + 1}: ${s.model} has no output "${k}" (outputs: ${names(outs)})`)
    for (const x of ins) {
      const t = s.inputMap[x.name]!
      const seen = inputs.get(t)
      if (seen && seen.dtype !== x.dtype)
        throw bad(name, `tensor "${t}" feeds inputs of types ${seen.dtype} and ${x.dtype}`)
      if (plan.inputs.includes(t)) inputs.set(t, { ...x, name: t })
    }
    for (const x of outs)
      if (x.name in s.outputMap) outputs.set(s.outputMap[x.name]!, { ...x, name: s.outputMap[x.name]! })
  })
  // Every produced output (not only the ensemble's) feeds its consumers with the dtype they take.
  const produced = new Map<string, TensorSpec>()
  plan.steps.forEach((s, i) => {
    for (const x of sigs[i]!.outputs) if (x.name in s.outputMap) produced.set(s.outputMap[x.name]!, x)
  })
  plan.steps.forEach((s, i) => {
    for (const x of sigs[i]!.inputs) {
      const from = produced.get(s.inputMap[x.name]!)
      if (from && from.dtype !== x.dtype)
        throw bad(
          name,
          `step ${i + 1}: ${s.model}'s input "${x.name}" takes ${x.dtype}, but tensor "${s.inputMap[x.name]}" is ` +
            `${from.dtype}`,
        )
    }
  })
  return { inputs: plan.inputs.map((t) => inputs.get(t)!), outputs: plan.outputs.map((t) => outputs.get(t)!) }
}

/**
 * A declarative pipeline of hosted models (Triton's ensemble): each step's outputs feed later
 * steps' inputs by name, steps whose inputs are ready run concurrently, and every call goes
 * through the step model's own runner and batcher. Served as its own /v2 model with platform
 * `ensemble`; `run()` calls it from code. List it in the service's runners after its models.
 */
export class Ensemble implements Runner {
  readonly kind = 'ensemble' as const
  readonly description?: string
  readonly inferenceStats = new RunnerStats()
  private readonly plan: Plan
  private readonly stepStats: StepStats[]
  private resolver?: ModelResolver
  private specs?: { inputs: TensorSpec[]; outputs: TensorSpec[] }

  constructor(
    readonly name: string,
    options: EnsembleOptions,
  ) {
    this.plan = planEnsemble(name, options)
    if (options.description) this.description = options.description
    this.stepStats = this.plan.steps.map((s) => ({
      model_name: s.model,
      model_version: s.version ?? '',
      success: { count: 0, ns: 0 },
      fail: { count: 0, ns: 0 },
    }))
  }

  /** The server connects the ensemble to the models it hosts. */
  bind(resolver: ModelResolver): void {
    this.resolver = resolver
  }

  /** Checks every step against its model's inputs and outputs (the models have started by now). */
  async start(): Promise<void> {
    const resolve = this.resolver
    if (resolve === undefined) throw bad(this.name, 'it is not part of a running server')
    this.specs = wireEnsemble(this.name, this.plan, (model, version) => {
      const m = resolve(model, version)
      return { inputs: m.inputs(), outputs: m.outputs() }
    })
  }

  async stop(): Promise<void> {
    this.specs = undefined
  }

  /** Ready when every step's model is. */
  ready(): boolean {
    if (this.specs === undefined || this.resolver === undefined) return false
    try {
      return this.plan.steps.every((s) => this.resolver!(s.model, s.version).ready())
    } catch {
      return false
    }
  }

  /** A step that is not ready says why itself (its runner is the service's too). */
  notReadyReason(): string | undefined {
    return undefined
  }

  /** An ensemble has no workers or batcher of its own: runner overrides are its step models'. */
  configure(): void {}

  /** Its calls are counted by its step models' runners. */
  attachMetrics(): void {}

  queueDepth(): Record<string, number> {
    return {}
  }

  stats(): undefined {
    return undefined
  }

  health(): RunnerHealth {
    return { loaded: this.specs !== undefined, idleUnloads: 0, workers: 0, restarts: 0 }
  }

  effectiveConfig(): Record<string, unknown> {
    return {
      kind: this.kind,
      steps: this.plan.steps.map((s) => ({
        model: s.model,
        ...(s.version ? { version: s.version } : {}),
        inputMap: s.inputMap,
        outputMap: s.outputMap,
      })),
      inputs: this.plan.inputs,
      outputs: this.plan.outputs,
    }
  }

  /** Runs the pipeline: inputs by ensemble tensor name → the ensemble's outputs. */
  async run(inputs: Record<string, RunnerTensor>): Promise<Record<string, RunnerTensor>> {
    const resolve = this.resolver
    if (resolve === undefined || this.specs === undefined)
      throw new BundleError('E_HTTP_NOT_READY', `ensemble "${this.name}" has not started`)
    for (const t of this.plan.inputs)
      if (!(t in inputs)) throw new BundleError('E_INPUT_INVALID', `ensemble "${this.name}": missing input "${t}"`)
    const tensors = new Map<string, RunnerTensor>(Object.entries(inputs))
    const done: Promise<void>[] = []
    for (const i of this.plan.order) {
      const s = this.plan.steps[i]!
      const st = this.stepStats[i]!
      // A step starts as soon as the steps it consumes from have finished, not after a whole stage.
      done[i] = Promise.all(this.plan.deps[i]!.map((d) => done[d])).then(async () => {
        const m = resolve(s.model, s.version)
        st.model_version = m.version
        const started = performance.now()
        // A traced request shows each step as a span, its model's runner call inside it.
        const span = spanAround(() => ({
          name: `step ${i + 1} ${s.model}`,
          attributes: { 'bundle.ensemble': this.name, 'bundle.model': s.model, 'bundle.model.version': m.version },
        }))
        const feeds = Object.fromEntries(Object.entries(s.inputMap).map(([k, t]) => [k, tensors.get(t)!]))
        try {
          const out = await (span ? span.run(() => m.infer(feeds)) : m.infer(feeds))
          for (const [k, t] of Object.entries(s.outputMap)) tensors.set(t, out[k]!)
          st.success.count++
          st.success.ns += Math.round((performance.now() - started) * 1e6)
        } catch (err) {
          st.fail.count++
          st.fail.ns += Math.round((performance.now() - started) * 1e6)
          throw err
        }
      })
    }
    await Promise.all(done)
    return Object.fromEntries(this.plan.outputs.map((t) => [t, tensors.get(t)!]))
  }

  /** The ensemble as the Open Inference Protocol serves it (platform `ensemble`), once started. */
  inference(): InferenceModel | undefined {
    const specs = this.specs
    const resolve = this.resolver
    if (specs === undefined || resolve === undefined) return undefined
    const maxBatchSize = () => {
      try {
        return Math.min(...this.plan.steps.map((s) => resolve(s.model, s.version).maxBatchSize()))
      } catch {
        return 0
      }
    }
    return {
      name: this.name,
      version: '1',
      platform: 'ensemble',
      ready: () => this.ready(),
      inputs: () => specs.inputs,
      outputs: () => specs.outputs,
      maxBatchSize,
      config: () => ({
        name: this.name,
        platform: 'ensemble',
        max_batch_size: maxBatchSize(),
        ensemble_scheduling: {
          step: this.plan.steps.map((s) => ({
            model_name: s.model,
            model_version: s.version === undefined ? -1 : s.version,
            input_map: s.inputMap,
            output_map: s.outputMap,
          })),
        },
      }),
      stats: this.inferenceStats,
      stepStats: () => this.stepStats.map((s) => ({ ...s, success: { ...s.success }, fail: { ...s.fail } })),
      infer: async (inputs) => {
        const started = performance.now()
        const rows = Object.values(inputs)[0]?.shape[0] ?? 0
        try {
          const out = await this.run(inputs)
          const ms = performance.now() - started
          this.inferenceStats.request(true, rows, ms)
          this.inferenceStats.executionCount++
          this.inferenceStats.computeInfer.count++
          this.inferenceStats.computeInfer.ns += Math.round(ms * 1e6)
          return out
        } catch (err) {
          this.inferenceStats.request(false, rows, performance.now() - started, err)
          throw err
        }
      },
    }
  }
}

export const ensemble = (name: string, options: EnsembleOptions): Ensemble => new Ensemble(name, options)
