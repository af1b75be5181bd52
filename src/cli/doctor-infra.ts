// The checks of `pds doctor` on what the server stands on: the database and Redis by a round trip,
// the S3 buckets by writing, reading and deleting a probe object, DNS for the host name and the
// handle wildcard, and the certificate the public URL presents. Each gives one line; a failure
// says what to do, in the words the server itself uses when it cannot start.
import { randomBytes } from 'node:crypto'
import { Resolver } from 'node:dns/promises'
import { connect as tlsConnect, type PeerCertificate } from 'node:tls'
import { sql } from 'kysely'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import { explainStartError } from '../startup-errors.js'
import { describeStore } from './store.js'
import { probeBucket } from '../blob/s3-probe.js'

export type Level = 'ok' | 'warn' | 'fail'
export type Add = (check: string, level: Level, detail: string) => void

const ms = (t0: number) => `${Math.round(performance.now() - t0)} ms`

export async function checkDatabase(config: Config, db: Db, add: Add) {
  const t0 = performance.now()
  try {
    await sql`select 1`.execute(db)
    add('database', 'ok', `${describeStore(config.db, config.dataDir)} answered in ${ms(t0)}`)
  } catch (err) {
    add('database', 'fail', explainStartError('database', err, config))
  }
}

export async function checkRedis(config: Config, add: Add) {
  if (!config.redisUrl) return
  const { Redis } = await import('ioredis')
  const redis = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 5000 })
  let last: unknown
  redis.on('error', (err) => (last = err))
  const t0 = performance.now()
  const key = `pds:doctor:${randomBytes(6).toString('hex')}`
  try {
    await redis.connect()
    await redis.set(key, '1', 'PX', 10_000)
    const got = await redis.get(key)
    await redis.del(key)
    if (got !== '1') throw new Error('the value read back differs from the one written')
    const u = new URL(config.redisUrl)
    add('redis', 'ok', `${u.hostname}:${u.port || 6379} wrote, read and deleted a key in ${ms(t0)}`)
  } catch (err) {
    add('redis', 'fail', explainStartError('redis', last ?? err, config))
  } finally {
    redis.disconnect()
  }
}

export async function checkBuckets(config: Config, add: Add) {
  if (config.blobS3) {
    const t0 = performance.now()
    try {
      await probeBucket(config.blobS3)
      add('blob-bucket', 'ok', `S3 bucket "${config.blobS3.bucket}" took, gave back and deleted a probe object in ${ms(t0)}`)
    } catch (err) {
      add('blob-bucket', 'fail', explainStartError('blobstore', err, config))
    }
  }
  if (config.backupS3) {
    const b = config.backupS3
    const t0 = performance.now()
    try {
      await probeBucket(b)
      add('backup-bucket', 'ok', `S3 bucket "${b.bucket}" took, gave back and deleted a probe object in ${ms(t0)}`)
    } catch (err) {
      // the same words as for the blob bucket, with the backup variables
      const line = explainStartError('blobstore', err, { ...config, blobS3: { ...b, uploadTimeoutMs: 0, requestTimeoutMs: 0 } })
      add('backup-bucket', 'fail', line.replace(/PDS_BLOBSTORE_S3_/g, 'PDS_BACKUP_S3_'))
    }
  }
}

const isLoopbackName = (host: string) => host === 'localhost' || host.endsWith('.localhost') || /^[\d.]+$/.test(host) || host.includes(':')

export async function checkDns(config: Config, add: Add) {
  if (config.devMode || isLoopbackName(config.hostname)) {
    add('dns', 'ok', `${config.hostname}: development mode, no public DNS needed`)
    return
  }
  const resolver = new Resolver({ timeout: 3000, tries: 2 })
  if (config.dnsNameservers.length) resolver.setServers(config.dnsNameservers)
  const addresses = async (name: string) => {
    const [v4, v6] = await Promise.all([resolver.resolve4(name).catch(() => []), resolver.resolve6(name).catch(() => [])])
    return [...v4, ...v6]
  }
  const own = await addresses(config.hostname)
  if (own.length) add('dns', 'ok', `${config.hostname} has ${own.join(', ')}`)
  else add('dns', 'fail', `${config.hostname} has no A or AAAA record: add one pointing at this server`)
  for (const domain of config.handleDomains) {
    const zone = domain.replace(/^\./, '')
    // a made-up name: only a wildcard record answers it
    const probe = `doctor-${randomBytes(4).toString('hex')}.${zone}`
    const found = await addresses(probe)
    if (found.length) add('dns-wildcard', 'ok', `*.${zone} has ${found.join(', ')} (handles under ${domain} resolve)`)
    else
      add(
        'dns-wildcard',
        'fail',
        `*.${zone} has no wildcard A or AAAA record: add one pointing at this server, or handles under ${domain} cannot be verified`,
      )
  }
}

export async function checkTls(config: Config, add: Add) {
  const url = new URL(config.publicUrl)
  if (url.protocol !== 'https:') {
    if (config.devMode) add('tls', 'ok', `${config.publicUrl} is plain http: fine in development mode`)
    else
      add(
        'tls',
        'fail',
        `PDS_PUBLIC_URL ${config.publicUrl} is not https: other servers and apps need TLS; put Caddy in front (deploy/Caddyfile)`,
      )
    return
  }
  const port = Number(url.port || 443)
  try {
    const cert = await new Promise<PeerCertificate>((resolve, reject) => {
      const socket = tlsConnect({ host: url.hostname, port, servername: url.hostname, timeout: 10_000 }, () => {
        const c = socket.getPeerCertificate()
        socket.end()
        resolve(c)
      })
      socket.on('timeout', () => socket.destroy(Object.assign(new Error('no answer within 10 s'), { code: 'ETIMEDOUT' })))
      socket.on('error', reject)
    })
    const days = Math.floor((Date.parse(cert.valid_to) - Date.now()) / 86_400_000)
    const level: Level = days < 7 ? 'fail' : days < 14 ? 'warn' : 'ok'
    const renew = level === 'ok' ? '' : ': the reverse proxy should have renewed it; check its log'
    add('tls', level, `${url.host} presents a valid certificate for ${days} more days${renew}`)
  } catch (err) {
    const e = err as { code?: string; message?: string }
    add(
      'tls',
      'fail',
      `${url.host}: ${e.code ?? ''} ${e.message ?? err}: check the reverse proxy's certificate (Caddy gets one once DNS points here and ports 80/443 are open)`.replace(
        / {2,}/g,
        ' ',
      ),
    )
  }
}
