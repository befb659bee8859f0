import type { GpuRequest } from '../gpu/placement.js'
import type { CacheOptions } from '../remote/cache.js'
import type { SequenceOptions } from '../sequence/options.js'

// What a user passes to onnxRunner(); RunnerOverrides (config.ts) is the subset an operator may
// change without touching code.

export interface BatchingOptions {
  enabled?: boolean
  /**
   * Most rows per batch (default 32). 0: never merge requests — each runs exactly as given
   * (Triton's max_batch_size 0). Without it the model decides: requests merge only when the
   * first dimension of every input and output is variable; otherwise each runs as given.
   */
  maxBatchSize?: number
  /**
   * The batch window: the longest a request is held to let a batch fill (Triton's
   * max_queue_delay). Below it the wait is adaptive; with nothing else coming there is none.
   * Default 10 ms; 0 never waits.
   */
  maxDelayMs?: number
  /** Requests that may wait (memory bound); more are refused at once. Default 64 × maxBatchSize. */
  maxQueueSize?: number
  /** @deprecated the deadline's name before it was its own setting: use the runner's deadlineMs. */
  maxLatencyMs?: number
  /**
   * The dimension requests are merged along (default 0), or [input dimension, output
   * dimension] when the outputs carry the batch elsewhere (a [seq, batch, …] model: 1). It must
   * be variable in every input and output of the model.
   */
  batchDim?: number | [number, number]
}

export interface OnnxRunnerOptions {
  /** Runner name (default: the model name). */
  name?: string
  batching?: BatchingOptions
  /**
   * The longest a request may spend queued plus running (default 10 000 ms). One that cannot
   * make it is refused early with 503 E_RUNNER_OVERLOADED and Retry-After — never run and then
   * thrown away. A client's own timeout (Request-Timeout header, OIP `timeout`) only shortens it.
   */
  deadlineMs?: number
  /**
   * Batches handed to each worker at once (default 2): the next is already in the worker when
   * the current one ends, so it never waits for this process to take an answer and send more.
   */
  batchesPerWorker?: number
  /**
   * Worker processes (or threads) running the model. Default on the CPU: two where the cores less
   * one leave a single worker one thread (two cores) and a second copy of the model fits in a
   * sixteenth of the memory, else one; one on a GPU or with maxWorkers (docs/defaults.md, "Workers").
   */
  workers?: number
  /**
   * Where the workers run. 'process' (default): child processes — a crash, a leak or a runaway
   * native call takes only the worker, which restarts. 'thread': worker threads of the API
   * process — no process wake-up and no socket between the batcher and the model (tensors move
   * instead of being copied), at the cost of that isolation: a native crash takes the server.
   * See docs/operations.md ("Processes or threads").
   */
  isolation?: 'process' | 'thread'
  /** A batch running longer than this fails with 504 and its worker is recycled (default 30 s). */
  timeoutMs?: number
  /**
   * Autoscaling: workers grow from `minWorkers` up to `maxWorkers` while the batcher stays busy
   * with a queue, and shrink back when it idles (CPU runners; checked every `scaleIntervalMs`,
   * default 2000).
   */
  minWorkers?: number
  maxWorkers?: number
  scaleIntervalMs?: number
  /**
   * Unload the model after this long without a request (its workers stop and free their
   * memory); the next request loads it again and waits for that instead of failing.
   */
  idleUnloadMs?: number
  executionProviders?: string[]
  intraOpThreads?: number
  /** Model store directory (default $BUNDLE_HOME). */
  home?: string
  /**
   * `cpu`: cores per worker — onnxruntime's intra-op threads (unless intraOpThreads is given)
   * and, without `workers`, as many workers as the machine's cores hold.
   * `gpu`: devices per worker (1, 2), a fraction to pack workers (0.5), or a device list.
   */
  resources?: { cpu?: number; gpu?: GpuRequest }
  /**
   * Dummy batches each worker runs before it reports ready (after a restart too), so no
   * request pays for onnxruntime's lazy initialisation and the batcher starts with measured
   * batch times. On by default where the model fully defines its inputs' shapes (a default
   * warm-up that fails is logged and the model loads anyway; one set here fails the load);
   * `shapes` gives the shapes of inputs with variable dimensions, `samples` Triton-style
   * inputs; `false` turns it off.
   */
  warmup?: WarmupOptions | false
  /**
   * Keep answers in Redis (the server's --redis): the same input to the same model version is
   * answered from there, skipping the queue. `true` for the defaults.
   */
  cache?: CacheOptions | boolean
  /**
   * A stateful model (Triton's sequence batcher with implicit state): each call names its
   * sequence (`run(inputs, { sequence: { id, start, end } })`), the worker that holds the
   * sequence's state feeds it back on the sequence's next frame, and frames of different
   * sequences share batches. Local workers only (no remote mode, response cache or autoscaling).
   * See docs/batching.md ("Stateful models: the sequence batcher").
   */
  sequence?: SequenceOptions
}

export interface WarmupOptions {
  /** Timed rounds over every batch size, after two untimed rounds (default 1). */
  rounds?: number
  /**
   * The shape of each input, e.g. `{ x: [3, 48, 192] }`: per row (without the batch dimension)
   * for a model that batches, whole for one that runs requests as given.
   */
  shapes?: Record<string, number[]>
  /** Triton's model_warmup: calls run as given, in order, instead of zeros of `shapes`. */
  samples?: WarmupSample[]
}

/** One warm-up call (Triton's model_warmup entry). */
export interface WarmupSample {
  name?: string
  /** Rows, for a model that batches (its `dims` then leave the batch dimension out). Default 1. */
  batchSize?: number
  /** Times it runs (default 1). */
  count?: number
  inputs: Record<string, WarmupInput>
}

/** A warm-up input: zeros (the default), random values, or raw little-endian bytes from a file. */
export interface WarmupInput {
  dims: number[]
  dtype?: string
  zeroData?: boolean
  randomData?: boolean
  /** A file of the input's raw little-endian bytes (strings: each a 4-byte length and its UTF-8 bytes). */
  inputDataFile?: string
}
