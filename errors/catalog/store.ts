import { type CatalogEntry, entry } from './entry.js'

/** The model store: tags, labels and model inputs, its state on disk, archives. */
export const STORE = {
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
    'The archive manifest is missing, not first, or malformed; or the archive is of the other kind (a bundle ' +
      'archive given to `bundle models import`, a model archive to `bundle import`).',
    'Use an archive written by `bundle models export` (or `bundle export` for `bundle import`); for an archive ' +
      'of the other kind, run the import command the message names.',
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
} as const satisfies Record<string, CatalogEntry>
