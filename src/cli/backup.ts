// `pds backup <dir>` and `pds restore <dir>`. SQLite: a consistent snapshot through SQLite's online
// backup API while the server keeps writing, then the blobs, then a manifest with every file's
// size and SHA-256. PostgreSQL: the blobs and the manifest; the database itself is pg_dump's job.
// A backup holds every account's signing key and password hash: its directories are 0700 and its
// files 0600 whatever the umask, and so is what a restore writes.
import { createHash } from 'node:crypto'
import { closeSync, createReadStream, createWriteStream, existsSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises'
import { pipeline } from 'node:stream/promises'
import { basename, dirname, join } from 'node:path'
import Database from 'better-sqlite3'
import { sql } from 'kysely'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import { output, UsageError } from './args.js'
import type { Command } from './accounts.js'
import { version } from './status.js'
import { recordSeqFloor, restoredSeqFloor } from '../sequencer/seq-floor.js'

export const MANIFEST = 'manifest.json'
const DB_FILE = 'pds.sqlite'
const SECRETS = 'secrets.json'
const BLOBS = 'blobs'

type FileEntry = { path: string; size: number; sha256: string }
export type Manifest = {
  format: 1
  pdsVersion: string
  dialect: 'sqlite' | 'postgres'
  /** when the snapshot began: every write acknowledged before this is in it */
  startedAt: string
  finishedAt: string
  /** the newest firehose event in the snapshot; a restored server continues above it */
  seq: number | null
  seqTime: string | null
  files: FileEntry[]
}

const isEmptyDir = (dir: string) => !existsSync(dir) || readdirSync(dir).length === 0

/** `dir` and any missing parent, owner-only (an existing `dir` is tightened too) */
export async function privateDir(dir: string) {
  await mkdir(dir, { recursive: true, mode: 0o700 })
  await chmod(dir, 0o700)
}

/** `from` copied to `to`, owner-only from its creation on (copyFile would give it the source's mode) */
async function privateCopy(from: string, to: string) {
  await pipeline(createReadStream(from), createWriteStream(to, { mode: 0o600 }))
  await chmod(to, 0o600)
}

function sha256(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256')
    createReadStream(file)
      .on('data', (c) => h.update(c))
      .on('end', () => resolve(h.digest('hex')))
      .on('error', reject)
  })
}

async function entry(root: string, path: string): Promise<FileEntry> {
  const file = join(root, path)
  return { path, size: statSync(file).size, sha256: await sha256(file) }
}

export async function backup(config: Config, db: Db, dir: string): Promise<Manifest> {
  if (!isEmptyDir(dir)) throw new UsageError(`${dir} is not empty; back up into a new directory`)
  await privateDir(dir)
  await privateDir(join(dir, BLOBS))
  const startedAt = new Date().toISOString()
  const files: string[] = []
  let last: { seq: number; sequenced_at: string } | undefined
  if (config.db.kind === 'sqlite') {
    const source = new Database(config.db.file, { readonly: true, fileMustExist: true })
    // created owner-only before SQLite writes a page into it; its journal takes the same mode
    closeSync(openSync(join(dir, DB_FILE), 'w', 0o600))
    try {
      // all remaining pages in one step: a write by the server between two steps would start the
      // copy over, and under steady writes it would never finish
      await source.backup(join(dir, DB_FILE), { progress: () => 1 << 30 })
    } finally {
      source.close()
    }
    // the copy is in WAL mode like its source: back to a rollback journal, so no -wal or -shm file
    // is left beside it (a restored server turns WAL on again)
    const copy = new Database(join(dir, DB_FILE), { fileMustExist: true })
    try {
      copy.pragma('journal_mode = DELETE')
      last = copy.prepare('select seq, sequenced_at from event order by seq desc limit 1').get() as typeof last
    } finally {
      copy.close()
    }
    files.push(DB_FILE)
  } else {
    const row = await sql<{ seq: number; sequenced_at: string }>`select seq, sequenced_at from event order by seq desc limit 1`.execute(db)
    last = row.rows[0]
  }
  // after the database: every blob a record in the snapshot references was stored before it
  for (const name of existsSync(config.blobDir) ? await readdir(config.blobDir, { withFileTypes: true }) : []) {
    if (!name.isFile()) continue
    await privateCopy(join(config.blobDir, name.name), join(dir, BLOBS, name.name))
    files.push(join(BLOBS, name.name))
  }
  const secrets = join(config.dataDir, SECRETS)
  if (existsSync(secrets)) {
    await privateCopy(secrets, join(dir, SECRETS))
    files.push(SECRETS)
  }
  const manifest: Manifest = {
    format: 1,
    pdsVersion: version,
    dialect: config.db.kind,
    startedAt,
    finishedAt: new Date().toISOString(),
    seq: last ? Number(last.seq) : null,
    seqTime: last?.sequenced_at ?? null,
    files: await Promise.all(files.map((f) => entry(dir, f))),
  }
  await writeFile(join(dir, MANIFEST), JSON.stringify(manifest, null, 2) + '\n', { mode: 0o600 })
  await chmod(join(dir, MANIFEST), 0o600)
  return manifest
}

export async function restoreBackup(config: Config, dir: string): Promise<Manifest> {
  const manifestFile = join(dir, MANIFEST)
  if (!existsSync(manifestFile)) throw new UsageError(`${dir} holds no ${MANIFEST}; not a backup`)
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest
  if (manifest.format !== 1) throw new UsageError(`${MANIFEST}: unknown format ${manifest.format}`)
  if (manifest.dialect !== config.db.kind) {
    throw new UsageError(`the backup is of a ${manifest.dialect} server; this environment is ${config.db.kind}`)
  }
  for (const target of [config.dataDir, config.blobDir]) {
    if (!isEmptyDir(target)) throw new UsageError(`${target} is not empty; restore into an empty data directory`)
  }
  // every file checked before anything is written
  for (const f of manifest.files) {
    const file = join(dir, f.path)
    if (!existsSync(file)) throw new UsageError(`${f.path} is missing from the backup`)
    const got = await entry(dir, f.path)
    if (got.size !== f.size || got.sha256 !== f.sha256) throw new UsageError(`${f.path} does not match its checksum; the backup is damaged`)
  }
  for (const f of manifest.files) {
    const to =
      f.path === DB_FILE && config.db.kind === 'sqlite'
        ? config.db.file
        : f.path === SECRETS
          ? join(config.dataDir, SECRETS)
          : join(config.blobDir, basename(f.path))
    await privateDir(dirname(to))
    await privateCopy(join(dir, f.path), to)
  }
  // the backup's log ends lower than the server it came from went: continue above both
  recordSeqFloor(config.dataDir, restoredSeqFloor())
  return manifest
}

export const backupCommand: Command = {
  usage:
    'backup <dir>   a consistent copy of a running server into a new directory, with manifest.json\n' +
    '    (on PostgreSQL the blobs only: dump the database with pg_dump)',
  async run({ config, db }, p) {
    const dir = p.positionals[0]
    if (!dir) throw new UsageError('backup needs a directory')
    const m = await backup(config, db, dir)
    const bytes = m.files.reduce((n, f) => n + f.size, 0)
    output(p.json, { dir, startedAt: m.startedAt, finishedAt: m.finishedAt, seq: m.seq, files: m.files.length, bytes })
    return 0
  },
}

export const restoreCommand: Command = {
  usage:
    'restore <dir>   a backup into the empty PDS_DATA_DIRECTORY, every file checked first\n' +
    '    (on PostgreSQL the blobs only: load the database with pg_restore first)',
  noDb: true,
  async run({ config }, p) {
    const dir = p.positionals[0]
    if (!dir) throw new UsageError('restore needs a backup directory')
    const m = await restoreBackup(config, dir)
    output(p.json, { dataDir: config.dataDir, startedAt: m.startedAt, seq: m.seq, files: m.files.length })
    return 0
  },
}
