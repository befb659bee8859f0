import { type CatalogEntry, entry } from './entry.js'

/** Services and the HTTP server. */
export const SERVER = {
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
  E_MODEL_NOT_FOUND: entry(
    404,
    2,
    'The request names a model (or a version of it) the server does not serve now: not in the store, or not loaded.',
    'Check the name against POST /v2/repository/index (or `bundle models list`); load it with POST ' +
      '/v2/repository/models/NAME/load.',
  ),
  E_MODEL_LOAD_FAILED: entry(
    400,
    1,
    'A model could not be loaded: the runtime refused the model file, its settings contradict the model, or its ' +
      'warm-up failed. The server and its other models are untouched.',
    'Read the reason in the message (also in POST /v2/repository/index); fix the model or the load config and ' +
      'load it again.',
  ),
  E_MODEL_OVER_BUDGET: entry(
    507,
    1,
    'The model needs more memory than the whole model memory budget (--memory-budget): it cannot be loaded even ' +
      'with every other model evicted.',
    'Raise --memory-budget (bundle_model_bytes shows what each model costs), or serve the model from a server of ' +
      'its own.',
  ),
  E_MODEL_LOAD_TIMEOUT: entry(
    503,
    1,
    "The model is not loaded and could not be loaded within the request's deadline: every other loaded model was " +
      'busy, or loads were queued (--model-load-concurrency).',
    'Retry after the Retry-After header; raise --memory-budget so more models stay loaded, or add replicas.',
  ),
  E_HTTP_METHOD_NOT_ALLOWED: entry(
    405,
    2,
    'The route exists but not for this HTTP method.',
    'Use the method in the Allow header (APIs take POST).',
  ),
  E_HTTP_UPGRADE_REQUIRED: entry(
    426,
    2,
    'The route is a WebSocket (its API takes a stream of messages); a plain request cannot call it.',
    'Open a WebSocket to it (GET with Upgrade: websocket), e.g. new WebSocket("ws://host:port/route").',
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
    'The service entry could not be loaded (missing file, no service class, import error, or code that does not ' +
      'compile: shown at its file:line:column with the source line).',
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
} as const satisfies Record<string, CatalogEntry>
