import { type CatalogEntry, entry } from './entry.js'

/** Runners: batching, workers, GPUs, remote workers. */
export const RUNNERS = {
  // runners
  E_RUNNER_OVERLOADED: entry(
    503,
    1,
    'The runner cannot serve the request within its latency bound (queue too long); the request was shed.',
    'Retry after the Retry-After header; add workers or replicas; or raise deadlineMs (the request could not ' +
      'finish in time) or batching.maxQueueSize (the queue was full).',
  ),
  E_RUNNER_CRASHED: entry(
    503,
    1,
    'The runner worker process died while handling the request; it is being restarted.',
    'Retry; if it repeats, the server log names the worker and its exit code or signal.',
  ),
  E_RUNNER_TIMEOUT: entry(
    504,
    1,
    'A batch ran longer than the runner timeout; the worker was recycled.',
    'Send smaller inputs or raise the runner timeout.',
  ),
  E_RUNNER_GPU_UNAVAILABLE: entry(
    503,
    1,
    'A runner asks for GPUs this machine does not have, or onnxruntime lacks its CUDA binaries.',
    'Check nvidia-smi -L (or BUNDLE_GPU_DEVICES) and resources.gpu; fetch the CUDA binaries of onnxruntime-node ' +
      'with ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install.',
  ),
  E_SERVE_CONFIG_INVALID: entry(
    400,
    2,
    'A serve config file, BUNDLE_RUNNER_* or OTEL_* variable, or another server setting (--metrics-compat, ' +
      'BUNDLE_GPU_METRICS_INTERVAL_MS) has an unknown key, a bad value, or names no runner.',
    'Fix the key the message names; see docs/runners.md "Tuning runners" (runners), docs/monitoring.md ' +
      '"Traces" (OTEL_*) and docs/operations.md (metrics settings).',
  ),
  E_RUNNER_BATCH_DIM: entry(
    500,
    1,
    'A model output lacks the dimension the runner splits batched results along.',
    'Set batching.batchDim to [input dimension, output dimension] for this model, or batching.enabled: false.',
  ),
  E_ENSEMBLE_INVALID: entry(
    400,
    1,
    'An ensemble is wired wrong: a step names an unknown model, input or output, a tensor has two producers, or ' +
      'steps form a cycle.',
    'Fix the step the message names (GET /v2/models/MODEL shows its inputs and outputs).',
  ),
  E_RUNNER_STOPPED: entry(503, 1, 'The runner is stopping or stopped.', 'Retry against a running server.'),
  E_SEQUENCE_INVALID: entry(
    400,
    2,
    'A call to a sequence runner (stateful model) names no sequence, a call to a plain runner names one, or the ' +
      'sequence id, flags or frame are malformed.',
    'Pass { sequence: { id, start, end } } to run() of runners declared with a `sequence` option only (over /v2: ' +
      'parameters sequence_id, sequence_start, sequence_end); one row per frame.',
  ),
  E_SEQUENCE_UNKNOWN: entry(
    400,
    1,
    'A frame continues a sequence the runner does not hold: never started, already ended, or evicted after being ' +
      'idle longer than sequence.idleTimeoutMs.',
    'Send the first frame of a sequence with start: true (sequence_start over /v2); raise sequence.idleTimeoutMs ' +
      'for clients that pause longer.',
  ),
  E_SEQUENCE_LOST: entry(
    410,
    1,
    "The worker holding the sequence's state restarted (crash, timeout) or the runner changed model version: the " +
      'state is gone.',
    'Start the sequence again: resend from its first frame with start: true (sequence_start over /v2).',
  ),
  E_RUNNER_NOT_DECLARED: entry(
    500,
    1,
    'The service called a runner it does not declare, so the server never started it.',
    'Add the runner to the service: @service({ name, runners: [myRunner] }) (or defineService({ runners })); the ' +
      'server log warns about such runners at start-up.',
  ),

  E_REMOTE_UNAVAILABLE: entry(
    503,
    1,
    'Redis, which carries batches to remote runner workers (or tasks and the response cache), cannot be reached; ' +
      'or a batch failed three times on workers whose Redis connection broke while moving it.',
    'Check that Redis at the --redis URL runs; calls resume by themselves once it is back (GET /readyz says why it ' +
      'is not ready).',
  ),
  E_REMOTE_NO_WORKERS: entry(
    503,
    1,
    'No remote worker took the batch: none was live (by heartbeat) for the grace (--remote-grace, default 2000 ' +
      'ms), or all were busy until its deadline (with --remote-scale-to-zero: no worker started before it).',
    'Start workers: bundle worker TAG --runner NAME --redis URL (GET /readyz says when one is live); or raise ' +
      '--remote-grace or timeoutMs.',
  ),
  E_REMOTE_MODEL_MISMATCH: entry(
    503,
    1,
    'A remote worker runs another version of the model than the API server serves.',
    'Run API servers and workers of the same bundle (bundle serve TAG and bundle worker TAG).',
  ),
  E_TASK_NOT_FOUND: entry(
    404,
    2,
    'No task with this id (never submitted, or its record expired).',
    'Check the taskId that submit returned; finished tasks are kept for a day.',
  ),
  E_TASK_NOT_FINISHED: entry(
    409,
    1,
    'The task is still pending or running, so it has no result yet.',
    'Poll GET <route>/status?taskId=… until it says success, then fetch the result.',
  ),
  E_TASK_FAILED: entry(
    409,
    1,
    'The task failed; it has no result.',
    'GET <route>/status?taskId=… shows the error; POST <route>/retry?taskId=… runs it again.',
  ),
  E_TASK_CANCELLED: entry(
    409,
    1,
    'The task was cancelled; it has no result.',
    'POST <route>/retry?taskId=… runs it again.',
  ),
  E_TASK_CONFLICT: entry(
    409,
    1,
    'The task is not in a state this operation applies to (retry of a task that has not failed, cancel of a ' +
      'finished one).',
    'GET <route>/status?taskId=… shows its state.',
  ),
  E_SERVER_UNREACHABLE: entry(
    503,
    1,
    'The server given with --url (or to bundle bench) cannot be reached.',
    'Check the URL and that the server runs (curl URL/v2/health/live).',
  ),
  E_SERVER_REQUEST_FAILED: entry(
    502,
    1,
    'The server given with --url (or to bundle bench) refused the request; the message quotes its answer.',
    'Fix what the quoted error says (model name, version, config, API key, route or input).',
  ),
} as const satisfies Record<string, CatalogEntry>
