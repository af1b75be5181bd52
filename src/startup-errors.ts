// The mistakes an operator makes at start, each said in one line with what to do: the port taken,
// PostgreSQL unreachable or refusing (no such database or role, wrong password), Redis
// unreachable, the S3 bucket missing or the credentials refused, the data directory not writable,
// the disk full. startPds runs each step of its start under `stage`, so an error knows what it was
// starting; bin.ts prints the line and exits 1 (no stack trace for a mistake it recognises).
// Connection strings are never printed whole: they may carry a password.
import { userInfo } from 'node:os'
import type { Config } from './config.js'

export type Stage = 'data' | 'database' | 'redis' | 'blobstore' | 'listen'

export class StartupError extends Error {
  constructor(
    readonly stage: Stage,
    message: string,
    readonly cause: unknown,
  ) {
    super(message)
  }
}

type Explainable = Pick<Config, 'port' | 'bind' | 'dataDir' | 'blobDir' | 'db' | 'redisUrl' | 'blobS3' | 'metricsPort'>

/** runs one step of the start; a failure becomes a StartupError with its one line */
export async function stage<T>(what: Stage, config: Explainable, fn: () => Promise<T> | T): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    if (err instanceof StartupError) throw err
    throw new StartupError(what, explainStartError(what, err, config), err)
  }
}

type ErrLike = { code?: unknown; name?: string; message?: string; path?: string; syscall?: string; $metadata?: { httpStatusCode?: number } }

const FULL = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL'])
const NOT_WRITABLE = new Set(['EACCES', 'EPERM', 'EROFS', 'SQLITE_CANTOPEN', 'SQLITE_READONLY', 'SQLITE_READONLY_DIRECTORY', 'SQLITE_PERM'])
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset',
}

/** the error codes of an error and of whatever it wraps (AggregateError of several addresses) */
function codes(err: unknown): string[] {
  const e = err as ErrLike & { errors?: unknown[]; cause?: unknown }
  const own = typeof e?.code === 'string' ? [e.code] : []
  const inner = [...(Array.isArray(e?.errors) ? e.errors : []), ...(e?.cause ? [e.cause] : [])]
  return [...own, ...inner.flatMap(codes)]
}

const message = (err: unknown) => String((err as ErrLike)?.message ?? err).split('\n')[0]

function pgWhere(url: string) {
  const u = new URL(url)
  return {
    host: `${u.hostname || 'localhost'}:${u.port || 5432}`,
    db: decodeURIComponent(u.pathname.slice(1)) || '(default)',
    user: decodeURIComponent(u.username),
  }
}

export function explainStartError(what: Stage, err: unknown, config: Explainable): string {
  const cs = codes(err)
  const code = cs[0] ?? ''
  const path = (err as ErrLike)?.path
  const user = (() => {
    try {
      return userInfo().username
    } catch {
      return String(process.getuid?.() ?? '?')
    }
  })()
  if (cs.some((c) => FULL.has(c))) {
    return `the disk holding ${path ?? config.dataDir} is full: free some space (df -h) and start again`
  }
  if (what !== 'listen' && what !== 'redis' && cs.some((c) => NOT_WRITABLE.has(c))) {
    return (
      `the data directory is not writable by this user (${user}): ${path ?? config.dataDir} (${code}); ` +
      'give the service user the directory (chown -R) or set PDS_DATA_DIRECTORY to one it owns'
    )
  }
  switch (what) {
    case 'listen': {
      const port = (err as { port?: number }).port ?? config.port
      const which = port === config.metricsPort ? 'PDS_METRICS_PORT' : 'PDS_PORT'
      if (code === 'EADDRINUSE')
        return `port ${port} on ${config.bind} is already in use (another PDS or another program listens there): stop it or set ${which}`
      if (code === 'EACCES')
        return `not allowed to listen on port ${port}: ports under 1024 need privileges; use a higher ${which} behind the reverse proxy`
      if (code === 'EADDRNOTAVAIL')
        return `PDS_BIND ${config.bind} is not an address of this machine: use 0.0.0.0, 127.0.0.1 or one of its addresses`
      break
    }
    case 'database': {
      if (config.db.kind !== 'postgres') break
      const { host, db, user: role } = pgWhere(config.db.url)
      const fix = 'fix PDS_DB_POSTGRES_URL'
      if (code === '3D000') return `PostgreSQL at ${host} has no database "${db}": create it (createdb ${db}) or ${fix}`
      if (code === '28P01') return `PostgreSQL at ${host} refused the password of role "${role}": ${fix}`
      if (code === '28000') {
        const m = message(err)
        if (/role .* does not exist/.test(m)) return `PostgreSQL at ${host} has no role "${role}": create it (createuser ${role}) or ${fix}`
        return `PostgreSQL at ${host} refused the connection: ${m}`
      }
      if (code === '42501')
        return `PostgreSQL role "${role}" may not create schema "${config.db.schema}" in database "${db}": grant it CREATE on the database or create the schema for it`
      if (UNREACHABLE[code]) return `PostgreSQL at ${host} is not reachable (${UNREACHABLE[code]}): start it or ${fix}`
      if (/^(08|57P0)/.test(code)) return `PostgreSQL at ${host} is not accepting connections (${message(err)}): start it or ${fix}`
      break
    }
    case 'redis': {
      const u = config.redisUrl ? new URL(config.redisUrl) : undefined
      const host = u ? `${u.hostname}:${u.port || 6379}` : 'Redis'
      const m = message(err)
      if (/WRONGPASS|NOAUTH|invalid password/i.test(m)) return `Redis at ${host} refused the credentials: fix PDS_REDIS_URL`
      const why = UNREACHABLE[code] ?? m
      return `Redis at ${host} is not reachable (${why}): start it, fix PDS_REDIS_URL, or unset it (rate limits are then kept per process)`
    }
    case 'blobstore': {
      const s3 = config.blobS3
      if (!s3) break
      const e = err as ErrLike
      const where = `S3 bucket "${s3.bucket}"${s3.endpoint ? ` at ${new URL(s3.endpoint).host}` : ''}`
      if (e.name === 'NoSuchBucket') return `${where} does not exist: create it or fix PDS_BLOBSTORE_S3_BUCKET (and _ENDPOINT, _REGION)`
      if (
        ['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'AccessDenied', 'InvalidToken', 'ExpiredToken', 'Forbidden'].includes(
          e.name ?? '',
        ) ||
        e.$metadata?.httpStatusCode === 403
      ) {
        return `${where} refused the credentials (${e.name}): fix PDS_BLOBSTORE_S3_ACCESS_KEY_ID and PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY, or the bucket's policy`
      }
      if (e.name === 'ProbeMismatch') return `${where} did not give back what was written to it: check the endpoint`
      if (UNREACHABLE[code] || e.name === 'TimeoutError')
        return `${where} is not reachable (${UNREACHABLE[code] ?? 'timed out'}): fix PDS_BLOBSTORE_S3_ENDPOINT or the network`
      return `${where} could not be used: ${e.name ? e.name + ': ' : ''}${message(err)}`
    }
    case 'data':
      if (code === 'ENOTDIR' || code === 'EEXIST')
        return `${path ?? config.dataDir} is not a directory: set PDS_DATA_DIRECTORY to a directory (or a path where one may be created)`
      break
  }
  return `${what}: ${message(err)}${code ? ` (${code})` : ''}`
}
