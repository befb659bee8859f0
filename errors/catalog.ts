/**
 * The one error catalog. Every error modelbundle raises on purpose has a stable code here,
 * with the HTTP status a server answers with, the exit code the CLI ends with, and a
 * one-line fix. docs/errors.md is the same table for humans; a test keeps the two in sync.
 *
 * exit 2 = the user's input is malformed (usage); exit 1 = a well-formed request failed.
 */
export interface CatalogEntry {
  readonly status: number
  readonly exit: 1 | 2
  readonly meaning: string
  readonly fix: string
}

const entry = (status: number, exit: 1 | 2, meaning: string, fix: string): CatalogEntry => ({
  status,
  exit,
  meaning,
  fix,
})

export const CATALOG = {
  // command line
  E_CLI_USAGE: entry(
    400,
    2,
    'The command line could not be parsed (unknown flag, missing argument).',
    'Run the command with --help and correct the flags.',
  ),
  E_CLI_CONFIRM_REQUIRED: entry(
    400,
    2,
    'A destructive command needs confirmation and no terminal is attached.',
    'Pass -y/--yes to confirm non-interactively.',
  ),
  E_INTERNAL: entry(
    500,
    1,
    'An unexpected internal error.',
    'Retry; if it persists, report it with the log line (set BUNDLE_DEBUG=1 for the stack).',
  ),

  // tags, labels, model inputs
  E_STORE_TAG_INVALID: entry(
    400,
    2,
    'A model name, version, tag or semver range is malformed.',
    'Use lower-case name[:version] or name@<semver range>; names and versions match ' +
      '[a-z0-9]([-._a-z0-9]*[a-z0-9])?, at most 63 characters.',
  ),
  E_STORE_TAG_AMBIGUOUS: entry(
    409,
    2,
    'A version prefix matches more than one version.',
    'Give more characters of the version; the message lists the candidates.',
  ),
  E_STORE_LABEL_INVALID: entry(
    400,
    2,
    'A label is not key=value or its key/value is malformed.',
    'Write labels as key=value; keys match [A-Za-z0-9]([-._/A-Za-z0-9]*[A-Za-z0-9])?, values are at most 256 ' +
      'characters without newlines.',
  ),
  E_STORE_METADATA_INVALID: entry(
    400,
    2,
    'Model metadata is not a JSON object or is too large.',
    'Pass a JSON object of at most 64 KiB, e.g. --metadata \'{"source":"paddleocr"}\'.',
  ),
  E_STORE_FRAMEWORK_INVALID: entry(
    400,
    2,
    'The framework is unknown or does not fit the files.',
    'Use --framework onnx (needs at least one .onnx file) or --framework custom.',
  ),
  E_STORE_FILE_NOT_FOUND: entry(
    400,
    1,
    'A file or directory given to save does not exist or cannot be read.',
    'Check the path; save takes files and directories.',
  ),
  E_STORE_FILE_DUPLICATE: entry(
    400,
    2,
    'Two inputs would be stored under the same file name in one model.',
    'Rename one of the files or save them from one directory.',
  ),
  E_STORE_ONNX_INVALID: entry(
    422,
    1,
    'An .onnx file could not be loaded by onnxruntime to read its signature.',
    'Check that the file is a valid ONNX model, or save it with --framework custom.',
  ),

  // store state
  E_STORE_MODEL_NOT_FOUND: entry(
    404,
    1,
    'No stored model matches the tag.',
    'Run `bundle models list` to see stored models, or save/import the model first.',
  ),
  E_STORE_TAG_EXISTS: entry(
    409,
    1,
    'A different model is already stored under this name and version.',
    'Choose another --version, delete the existing model, or pass --force to import.',
  ),
  E_STORE_MODEL_REFERENCED: entry(
    409,
    1,
    'The model is used by a stored bundle.',
    'Delete the bundle first, or pass --force to delete the model anyway.',
  ),
  E_STORE_CORRUPT: entry(
    500,
    1,
    'A stored file is missing or its content does not match its checksum.',
    'Run `bundle models verify` to list damaged models, then delete and re-save or re-import them.',
  ),
  E_STORE_SCHEMA_NEWER: entry(
    500,
    1,
    'The store index was written by a newer modelbundle.',
    'Upgrade modelbundle, or point BUNDLE_HOME at another store.',
  ),
  E_STORE_BUSY: entry(
    503,
    1,
    'The store index stayed locked by another process past the timeout.',
    'Retry; check for a hung bundle process holding the store.',
  ),
  E_STORE_NO_SPACE: entry(
    507,
    1,
    'Not enough free disk space under BUNDLE_HOME.',
    'Free disk space or move BUNDLE_HOME to a larger disk.',
  ),
  E_STORE_IO: entry(
    500,
    1,
    'Reading or writing a file of the store failed.',
    'Check permissions and free space of BUNDLE_HOME; the message names the file.',
  ),

  // archives
  E_ARCHIVE_CORRUPT: entry(
    400,
    1,
    'The archive is not a readable gzip tar (truncated or damaged).',
    'Export the model again and copy the whole file.',
  ),
  E_ARCHIVE_MANIFEST_INVALID: entry(
    400,
    1,
    'The archive manifest is missing, not first, or malformed.',
    'Use an archive written by `bundle models export`.',
  ),
  E_ARCHIVE_UNSAFE_ENTRY: entry(
    400,
    1,
    'The archive has an entry that is not a plain file under a safe relative path (absolute path, "..", link, ' +
      'device, duplicate, or not in the manifest).',
    'Do not import this archive; export the model again from a trusted store.',
  ),
  E_ARCHIVE_CHECKSUM: entry(
    400,
    1,
    'A file in the archive does not match the size or sha256 its manifest declares.',
    'The archive was altered or damaged: export it again.',
  ),
  E_ARCHIVE_TOO_LARGE: entry(
    413,
    1,
    'The archive declares or expands to more bytes than the import limit.',
    'Raise BUNDLE_IMPORT_MAX_BYTES if the model is really that large.',
  ),
  E_EXPORT_DIR_NOT_FOUND: entry(
    400,
    1,
    'The directory to export into does not exist (a path ending in "/" names a directory).',
    'Create the directory first (mkdir -p DIR), or give a file path in an existing directory.',
  ),

  // services and the HTTP server
  E_INPUT_INVALID: entry(
    400,
    2,
    'The request body does not match the API input schema (the details list each issue).',
    'Fix the fields named in error.details and resend; GET /openapi.json shows the schema.',
  ),
  E_HTTP_UNAUTHORIZED: entry(
    401,
    2,
    'The API key is missing or wrong.',
    'Send Authorization: Bearer <key> with the key the server was started with (--api-key or BUNDLE_API_KEY).',
  ),
  E_HTTP_NOT_FOUND: entry(
    404,
    2,
    'No route matches the request path.',
    'Check the path; GET /openapi.json lists every API route.',
  ),
  E_HTTP_METHOD_NOT_ALLOWED: entry(
    405,
    2,
    'The route exists but not for this HTTP method.',
    'Use the method in the Allow header (APIs take POST).',
  ),
  E_HTTP_PAYLOAD_TOO_LARGE: entry(
    413,
    2,
    'The request body (a gzip or deflate body: once expanded) is larger than the server accepts.',
    'Send a smaller body, or start the server with a larger --max-body-size.',
  ),
  E_HTTP_HEADERS_TOO_LARGE: entry(
    431,
    2,
    'The request line and headers together are larger than the server accepts (default 16 KiB).',
    'Send fewer or shorter headers (large cookies, tokens), or start the server with a larger --max-header-size.',
  ),
  E_HTTP_REQUEST_TIMEOUT: entry(
    408,
    1,
    "The client did not send its headers, or its whole request, within the server's time limit (slow or stalled " +
      'client).',
    'Send the request at once; for large uploads on slow links raise --request-timeout (and --headers-timeout) of ' +
      'bundle serve.',
  ),
  E_INPUT_MULTIPART_LIMIT: entry(
    413,
    2,
    'A multipart/form-data body has more parts than the API accepts, or a part larger than its limit.',
    'Send only the parts the API declares (see /openapi.json), each within the limit the message names.',
  ),
  E_HTTP_UNSUPPORTED_MEDIA_TYPE: entry(
    415,
    2,
    'The Content-Type (or Content-Encoding) is not one this API accepts.',
    'Send one of the media types the message lists (see /openapi.json); bodies may be gzip, deflate or uncompressed.',
  ),
  E_HTTP_CLIENT_CLOSED: entry(
    499,
    1,
    'The client closed the connection before the response (recorded in logs and metrics; never sent).',
    'Nothing on the server side; check client timeouts.',
  ),
  E_CLIENT_CONNECTION: entry(
    503,
    1,
    'The typed client could not reach the server.',
    'Check the URL and that the server is running (GET /readyz).',
  ),
  E_HTTP_TOO_MANY_REQUESTS: entry(
    429,
    1,
    'The service is already handling its maximum number of concurrent requests.',
    'Retry with backoff, or raise traffic.maxConcurrency / run more replicas.',
  ),
  E_HTTP_NOT_READY: entry(
    503,
    1,
    'The service is starting up or shutting down.',
    'Retry shortly; GET /readyz tells when it is ready.',
  ),
  E_HTTP_TIMEOUT: entry(
    504,
    1,
    'The API did not finish within traffic.timeoutMs.',
    'Retry with a smaller input, or raise traffic.timeoutMs.',
  ),
  E_OUTPUT_INVALID: entry(
    500,
    1,
    'The API returned a value that does not match its declared output schema.',
    'A bug in the service: fix the method or its output schema; the server log has the issues.',
  ),
  E_SERVICE_LOAD: entry(
    400,
    1,
    'The service entry could not be loaded (missing file, no service class, import error).',
    'Check ENTRY is path/to/service.ts[:ClassName] and that the file exports a class decorated with @service.',
  ),
  E_SERVICE_DEFINITION: entry(
    400,
    1,
    'The service definition is invalid (duplicate routes, bad name, bad option).',
    'Fix the @service/@api options the message names.',
  ),
  E_ADDRESS_IN_USE: entry(
    500,
    1,
    'The port the server should listen on is already taken by another process.',
    'Stop the other process (ss -ltnp shows it) or pass another --port (PORT).',
  ),
  E_ADDRESS_NOT_AVAILABLE: entry(
    500,
    1,
    "The server cannot listen on this host and port: the address is not this machine's, or the port needs " +
      'privileges (below 1024).',
    'Pass --host 127.0.0.1 or 0.0.0.0, or a port of 1024 or more.',
  ),

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
    'A serve config file or BUNDLE_RUNNER_* variable has an unknown key, a bad value, or names no runner.',
    'Fix the key the message names; see README "Tuning runners" for every option.',
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
      'ms), or all were busy until its deadline.',
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
    'The server given with --url cannot be reached.',
    'Check the URL and that the server runs (curl URL/v2/health/live).',
  ),
  E_SERVER_REQUEST_FAILED: entry(
    502,
    1,
    'The server given with --url refused the request; the message quotes its answer.',
    'Fix what the quoted error says (model name, version, config, API key).',
  ),

  // bundles
  E_BUNDLE_CONFIG_INVALID: entry(
    400,
    2,
    'bundle.yaml is missing, unreadable, or has an unknown key or a bad value; or a runner asks for another ' +
      'version than models: pins, an ensemble names a tensor its model lacks, or include: names what never ships ' +
      '(node_modules, .git, the store).',
    'Fix the key the message names; README "Bundles" lists every key, the pin rule and what a bundle never carries.',
  ),
  E_BUNDLE_BUILD_FAILED: entry(
    400,
    1,
    'The service could not be compiled or its files collected.',
    'Fix the error the message quotes (file and line), then build again.',
  ),
  E_BUNDLE_NOT_FOUND: entry(
    404,
    1,
    'No stored bundle matches the tag.',
    'Run `bundle list` to see stored bundles, or build/import one first.',
  ),
  E_BUNDLE_EXISTS: entry(
    409,
    1,
    'A bundle is already stored under this name and version.',
    'Choose another --version or delete the existing bundle first.',
  ),
  E_BUNDLE_MODEL_MISMATCH: entry(
    409,
    1,
    'A model the bundle pins is missing or has different content than when the bundle was built.',
    'Import the bundle again (it carries its models) or build it again against the current models.',
  ),
  E_BUNDLE_DEPS_MISMATCH: entry(
    409,
    1,
    'The npm packages installed on this machine are not the versions the bundle was built with.',
    'Run npm ci in the project the bundle was built from, or build the bundle again here.',
  ),
  E_CONTAINER_BACKEND: entry(
    503,
    1,
    'No container engine is usable (podman, docker or buildah), or the image build failed.',
    'Install podman (README "Containers"), or pass --backend; the message quotes the engine output.',
  ),
  E_CONTAINER_BASE_IMAGE: entry(
    503,
    1,
    'The container engine could not pull the base image (registry unreachable, image unknown, or access denied).',
    'Offline: pass --base-image with an image present locally, or build one with docker/local-base-image.sh -t ' +
      'localhost/modelbundle-node:20 node_modules and pass --base-image localhost/modelbundle-node:20.',
  ),
  E_BUNDLE_INVALID: entry(
    400,
    1,
    'A bundle file or archive is malformed, tampered with or incomplete.',
    'Export the bundle again from a good store; nothing was imported.',
  ),
} as const satisfies Record<string, CatalogEntry>

export type ErrorCode = keyof typeof CATALOG

export const errorCodes = (): ErrorCode[] => Object.keys(CATALOG) as ErrorCode[]

/**
 * Codes that mean "this request was not run; the same request may succeed shortly": shed by a
 * runner, over maxConcurrency, not ready (yet, or any more), no remote worker or Redis. The
 * server answers them with `Retry-After`; the typed client retries them after it.
 */
export const RETRYABLE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'E_HTTP_TOO_MANY_REQUESTS',
  'E_RUNNER_OVERLOADED',
  'E_HTTP_NOT_READY',
  'E_RUNNER_STOPPED',
  'E_REMOTE_UNAVAILABLE',
  'E_REMOTE_NO_WORKERS',
])
