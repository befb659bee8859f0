/**
 * Numbered, append-only schema migrations. `PRAGMA user_version` records the last one applied;
 * never edit a released migration, add the next number.
 */
export interface Migration {
  version: number
  name: string
  sql: string
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'models, files, labels, references, blob leases',
    sql: `
      CREATE TABLE models (
        id          INTEGER PRIMARY KEY,
        name        TEXT    NOT NULL,
        version     TEXT    NOT NULL,
        framework   TEXT    NOT NULL,
        digest      TEXT    NOT NULL,
        size        INTEGER NOT NULL,
        labels      TEXT    NOT NULL DEFAULT '{}',
        metadata    TEXT    NOT NULL DEFAULT '{}',
        signatures  TEXT    NOT NULL DEFAULT '{}',
        created_at  INTEGER NOT NULL,
        UNIQUE (name, version)
      );
      CREATE INDEX models_by_created ON models (name, created_at);

      CREATE TABLE model_files (
        model_id INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
        path     TEXT    NOT NULL,
        blob     TEXT    NOT NULL,
        size     INTEGER NOT NULL,
        PRIMARY KEY (model_id, path)
      ) WITHOUT ROWID;
      CREATE INDEX model_files_by_blob ON model_files (blob);

      -- Labels are also kept here so list filters run in SQL over 10k+ models.
      CREATE TABLE model_labels (
        model_id INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
        key      TEXT    NOT NULL,
        value    TEXT    NOT NULL,
        PRIMARY KEY (model_id, key)
      ) WITHOUT ROWID;
      CREATE INDEX model_labels_by_kv ON model_labels (key, value);

      -- Who depends on a model (kind 'bundle', ref 'name:version'): delete refuses while any exist.
      CREATE TABLE model_refs (
        model_id INTEGER NOT NULL REFERENCES models (id) ON DELETE CASCADE,
        kind     TEXT    NOT NULL,
        ref      TEXT    NOT NULL,
        PRIMARY KEY (model_id, kind, ref)
      ) WITHOUT ROWID;

      -- A writer leases a blob before placing it and until its index row commits, so a
      -- concurrent delete's garbage collection never removes a blob about to be referenced.
      CREATE TABLE blob_leases (
        blob       TEXT    NOT NULL,
        owner      TEXT    NOT NULL,
        host       TEXT    NOT NULL,
        pid        INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (blob, owner)
      ) WITHOUT ROWID;
    `,
  },
  {
    version: 2,
    name: 'bundles (same blobs as models)',
    sql: `
      CREATE TABLE bundles (
        id         INTEGER PRIMARY KEY,
        name       TEXT    NOT NULL,
        version    TEXT    NOT NULL,
        digest     TEXT    NOT NULL,
        size       INTEGER NOT NULL,
        labels     TEXT    NOT NULL DEFAULT '{}',
        -- The bundle's own description (service, models, dependencies), as JSON.
        manifest   TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (name, version)
      );
      CREATE INDEX bundles_by_created ON bundles (name, created_at);

      CREATE TABLE bundle_files (
        bundle_id INTEGER NOT NULL REFERENCES bundles (id) ON DELETE CASCADE,
        path      TEXT    NOT NULL,
        blob      TEXT    NOT NULL,
        size      INTEGER NOT NULL,
        PRIMARY KEY (bundle_id, path)
      ) WITHOUT ROWID;
      CREATE INDEX bundle_files_by_blob ON bundle_files (blob);
    `,
  },
  {
    version: 3,
    name: 'signatures of models and bundles (OMS v1.0 Sigstore bundles)',
    sql: `
      -- One signature per model version (signing again replaces it): the model.sig bytes as written.
      CREATE TABLE model_signatures (
        model_id   INTEGER PRIMARY KEY REFERENCES models (id) ON DELETE CASCADE,
        bundle     TEXT    NOT NULL,
        key_hint   TEXT    NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE bundle_signatures (
        bundle_id  INTEGER PRIMARY KEY REFERENCES bundles (id) ON DELETE CASCADE,
        bundle     TEXT    NOT NULL,
        key_hint   TEXT    NOT NULL,
        created_at INTEGER NOT NULL
      );
    `,
  },
]

export const LATEST_SCHEMA = MIGRATIONS[MIGRATIONS.length - 1]!.version
