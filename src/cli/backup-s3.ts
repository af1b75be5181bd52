// Backups in an S3 bucket: the same backup as `pds backup`, made in a temporary directory under the
// data directory and uploaded under `<prefix><timestamp>/` with manifest.json last, so a backup
// without a manifest is one whose upload did not finish. Only the newest N complete ones are kept.
// Every object is sealed (backup-seal.ts) before it leaves the machine and opened on download.
import { createWriteStream, existsSync, readdirSync } from 'node:fs'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { tmpdir } from 'node:os'
import { type Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import { tryExclusiveByName } from '../db/dialect.js'
import type { Logger } from '../logger.js'
import { backup, backupCommand, MANIFEST, privateDir, restoreBackup, restoreCommand, type Manifest } from './backup.js'
import { openSealed, SEAL_OVERHEAD, sealedStream } from './backup-seal.js'
import { output, str, UsageError } from './args.js'
import type { Command } from './accounts.js'
import { s3RequestHandler } from '../net/dns.js'
import { JOBS } from '../limits.js'
import type { BackupS3Config } from '../config.js'

// several processes on one PostgreSQL share the schedule: whoever holds this lock backs up
const BACKUP_LOCK = 'pds:backup-s3'

const client = (c: BackupS3Config) =>
  new S3Client({
    region: c.region,
    endpoint: c.endpoint,
    forcePathStyle: c.forcePathStyle,
    requestHandler: s3RequestHandler(c.nameservers),
    // files are streamed with their length; the manifest's SHA-256 sums guard them, and a trailing
    // checksum would need aws-chunked encoding, which not every S3-compatible server understands
    requestChecksumCalculation: 'WHEN_REQUIRED',
    credentials: c.accessKeyId && c.secretAccessKey ? { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey } : undefined,
  })

// sorts as it reads and is safe in a key
const stamp = (d: Date) => d.toISOString().replace(/[:.]/g, '-')

type Listed = { name: string; keys: string[]; complete: boolean; at?: Date }

/** the backups under the prefix, oldest first */
async function list(s3: S3Client, c: BackupS3Config): Promise<Listed[]> {
  const byName = new Map<string, Listed>()
  let token: string | undefined
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: c.bucket, Prefix: c.prefix, ContinuationToken: token }))
    for (const o of page.Contents ?? []) {
      const rest = o.Key!.slice(c.prefix.length)
      const slash = rest.indexOf('/')
      if (slash < 1) continue
      const name = rest.slice(0, slash)
      const b = byName.get(name) ?? { name, keys: [], complete: false }
      b.keys.push(o.Key!)
      if (rest.slice(slash + 1) === MANIFEST) {
        b.complete = true
        b.at = o.LastModified
      }
      byName.set(name, b)
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined
  } while (token)
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

async function remove(s3: S3Client, c: BackupS3Config, keys: string[]) {
  for (let i = 0; i < keys.length; i += 1000) {
    await s3.send(
      new DeleteObjectsCommand({ Bucket: c.bucket, Delete: { Objects: keys.slice(i, i + 1000).map((Key) => ({ Key })), Quiet: true } }),
    )
  }
}

/** keeps the newest `keep` complete backups; an unfinished one older than all of those is dead */
async function prune(s3: S3Client, c: BackupS3Config): Promise<string[]> {
  const all = await list(s3, c)
  const complete = all.filter((b) => b.complete)
  const kept = complete.slice(-c.keep)
  const oldestKept = kept[0]?.name
  const gone = all.filter((b) => (b.complete ? !kept.includes(b) : oldestKept !== undefined && b.name < oldestKept))
  await remove(
    s3,
    c,
    gone.flatMap((b) => b.keys),
  )
  return gone.map((b) => b.name)
}

export type Uploaded = { key: string; manifest: Manifest; bytes: number; ms: number; removed: string[] }

/**
 * one backup to the bucket, then the retention; with `ifOlderThanMs`, nothing when a complete
 * backup is newer than that (another process, or this one before a restart, made it).
 * Undefined when skipped.
 */
export async function backupToS3(config: Config, db: Db, opts: { ifOlderThanMs?: number } = {}): Promise<Uploaded | undefined> {
  const c = config.backupS3
  if (!c) throw new UsageError('PDS_BACKUP_S3_BUCKET is not set')
  const s3 = client(c)
  try {
    return await tryExclusiveByName(db.kysely, BACKUP_LOCK, async () => {
      if (opts.ifOlderThanMs !== undefined) {
        const newest = (await list(s3, c)).filter((b) => b.complete).pop()
        if (newest?.at && Date.now() - newest.at.getTime() < opts.ifOlderThanMs) return undefined
      }
      const started = Date.now()
      const name = stamp(new Date(started))
      const parent = join(config.dataDir, 'backup-tmp')
      await privateDir(parent)
      const work = await mkdtemp(join(parent, `${name}-`))
      const dir = join(work, 'b')
      try {
        const manifest = await backup(config, db, dir)
        for (const f of manifest.files) await put(s3, c, `${c.prefix}${name}/`, f.path, join(dir, f.path), f.size)
        await put(s3, c, `${c.prefix}${name}/`, MANIFEST, join(dir, MANIFEST))
        const removed = await prune(s3, c)
        const bytes = manifest.files.reduce((n, f) => n + f.size, 0)
        return { key: `${c.prefix}${name}/`, manifest, bytes, ms: Date.now() - started, removed }
      } finally {
        await rm(work, { recursive: true, force: true })
      }
    })
  } finally {
    s3.destroy()
  }
}

/** `file` sealed under the backup key, as `<base><path>` */
async function put(s3: S3Client, c: BackupS3Config, base: string, path: string, file: string, size?: number) {
  const length = (size ?? (await stat(file)).size) + SEAL_OVERHEAD
  await s3.send(
    new PutObjectCommand({ Bucket: c.bucket, Key: base + path, Body: sealedStream(file, path, c.encryptionKey), ContentLength: length }),
  )
}

/** downloads backup `which` (a timestamp or `latest`, complete ones only) into `dir` */
export async function downloadFromS3(config: Config, which: string, dir: string): Promise<string> {
  const c = config.backupS3
  if (!c) throw new UsageError('PDS_BACKUP_S3_BUCKET is not set')
  const s3 = client(c)
  try {
    const complete = (await list(s3, c)).filter((b) => b.complete)
    const chosen = which === 'latest' ? complete.at(-1) : complete.find((b) => b.name === which)
    if (!chosen) {
      throw new UsageError(
        which === 'latest'
          ? `no complete backup under s3://${c.bucket}/${c.prefix}`
          : `no complete backup ${which} under s3://${c.bucket}/${c.prefix}`,
      )
    }
    const base = `${c.prefix}${chosen.name}/`
    const keys = [{ key: c.encryptionKey, name: 'PDS_BACKUP_ENCRYPTION_KEY' }]
    if (c.previousKey) keys.push({ key: c.previousKey, name: 'PDS_BACKUP_ENCRYPTION_KEY_PREVIOUS' })
    for (const key of chosen.keys) {
      const rel = key.slice(base.length)
      // a key is a file name inside dir, never a way out of it
      if (rel.split('/').some((part) => part === '..' || part === '')) throw new UsageError(`${key}: not a file of a backup`)
      const to = join(dir, rel)
      await privateDir(dirname(to))
      const got = await s3.send(new GetObjectCommand({ Bucket: c.bucket, Key: key }))
      const sealed = `${to}.sealed`
      try {
        await pipeline(got.Body as Readable, createWriteStream(sealed, { mode: 0o600 }))
        await openSealed(sealed, to, rel, key, keys)
      } finally {
        await rm(sealed, { force: true })
      }
    }
    return chosen.name
  } finally {
    s3.destroy()
  }
}

/** the server's schedule: looks every `checkMs` whether the newest backup is an interval old */
export function scheduleBackups(config: Config, db: Db, logger: Logger, opts: { intervalMs?: number; checkMs?: number } = {}) {
  if (!config.backupS3) return { stop: async () => {} }
  const intervalMs = opts.intervalMs ?? config.backupS3.intervalHours * 3_600_000
  const checkMs = opts.checkMs ?? Math.min(intervalMs, JOBS.backupCheckMaxMs)
  let running: Promise<void> | undefined
  let stopped = false
  const tick = () => {
    if (running || stopped) return
    running = backupToS3(config, db, { ifOlderThanMs: intervalMs })
      .then((r) => {
        if (r)
          logger.info(
            { key: r.key, bytes: r.bytes, files: r.manifest.files.length, ms: r.ms, removed: r.removed.length },
            'backup uploaded',
          )
      })
      .catch((err: Error) => logger.warn({ err: err.message }, 'backup to S3 failed'))
      .finally(() => (running = undefined))
  }
  const timer = setInterval(tick, checkMs)
  timer.unref()
  return {
    stop: async () => {
      stopped = true
      clearInterval(timer)
      await running
    },
  }
}

/** `pds backup`, with `--s3`: one backup to the bucket now */
export const backupWithS3: Command = {
  usage: backupCommand.usage + '\nbackup --s3   one backup to PDS_BACKUP_S3_BUCKET now, then the oldest beyond PDS_BACKUP_KEEP removed',
  options: { s3: { type: 'boolean' } },
  async run(ctx, p) {
    if (!p.values.s3) return (backupCommand as Extract<Command, { noDb?: false }>).run(ctx, p)
    const r = await backupToS3(ctx.config, ctx.db)
    if (!r) throw new UsageError('another process is backing up to S3 right now; try again later')
    output(p.json, {
      key: r.key,
      startedAt: r.manifest.startedAt,
      seq: r.manifest.seq,
      files: r.manifest.files.length,
      bytes: r.bytes,
      removed: r.removed,
    })
    return 0
  },
}

/** `pds restore`, with `--s3 <timestamp|latest> [dir]`: downloads (into dir, or a temporary one), then restores */
export const restoreWithS3: Command = {
  usage:
    restoreCommand.usage +
    '\nrestore --s3 <timestamp|latest> [dir]   downloads a complete backup from PDS_BACKUP_S3_BUCKET\n' +
    '    (kept in dir when given) and restores it the same way',
  options: { s3: { type: 'string' } },
  noDb: true,
  async run(ctx, p) {
    const which = str(p, 's3')
    if (which === undefined) return (restoreCommand as Extract<Command, { noDb: true }>).run(ctx, p)
    const keepDir = p.positionals[0]
    if (keepDir && existsSync(keepDir) && readdirSync(keepDir).length)
      throw new UsageError(`${keepDir} is not empty; download into a new directory`)
    const dir = keepDir ?? (await mkdtemp(join(tmpdir(), 'pds-restore-')))
    try {
      const name = await downloadFromS3(ctx.config, which, dir)
      const m = await restoreBackup(ctx.config, dir)
      output(p.json, { backup: name, dataDir: ctx.config.dataDir, startedAt: m.startedAt, seq: m.seq, files: m.files.length })
      return 0
    } finally {
      if (!keepDir) await rm(dir, { recursive: true, force: true })
    }
  },
}
