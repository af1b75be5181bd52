// The long-lived objects handlers receive (store, firehose, keys, mailer, OAuth, rate limits, the
// outbound guard…), each opened under `stage` (a mistake there stops the start with one line
// saying what to do) and each registering its own teardown as it comes up.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Redis } from 'ioredis'
import type { Config } from '../config.js'
import type { Services } from '../context.js'
import type { Logger } from '../logger.js'
import type { StartOptions } from './options.js'
import { tokenKeys } from '../account/session-tokens.js'
import { openDb, type Db } from '../db/index.js'
import { raiseEventSeq } from '../db/dialect.js'
import { createMailer, type Mailer } from '../mail/index.js'
import { createOAuthServices } from '../oauth/index.js'
import { useNameserversForHttp } from '../net/dns.js'
import { OutboundGuard } from '../net/guard.js'
import { readSeqFloor, recordSeqFloor } from '../sequencer/seq-floor.js'
import { Firehose } from '../sequencer/firehose.js'
import { PgEventWakeup } from '../sequencer/wakeup.js'
import { RateLimits } from '../auth/rate-limits.js'
import { findAccount } from '../account/store.js'
import { cachedBlobBytes } from '../blob/blobstore-gc.js'
import { openBlobStore } from '../blob/blobstore-open.js'
import { DidResolver } from '../identity/did-resolver.js'
import { k256Keypair } from '../identity/k256.js'
import { createMetrics, type Metrics } from '../metrics.js'
import { stage } from '../startup-errors.js'
import { FIREHOSE_TUNING, JOBS, REDIS_COMMAND_MS, REDIS_READY_MS } from '../limits.js'
import type { Lifecycle } from './lifecycle.js'
import { notifyNothing } from '../space/repo-write.js'
import { notifyWriteHook, spacesDeletedHook } from '../space/host.js'

export async function startServices(
  config: Config,
  opts: StartOptions,
  logger: Logger,
  life: Lifecycle,
): Promise<{ services: Services; rateLimits: RateLimits }> {
  // before anything reaches out: the PLC directory, relays, the AppView, the email API, S3
  if (config.dnsNameservers.length) life.onClose('nameservers', await useNameserversForHttp(config.dnsNameservers))
  const metrics = await createMetrics(config.metrics)
  await stage('data', config, () => dataDirsWritable(config))
  const db = await stage('database', config, () =>
    openDb(config.db, {
      onWalFsync: () => metrics.walFsyncs.inc(),
      onCheckpointError: (err) => logger.error({ err }, 'WAL checkpoint worker failed: checkpoints run on commit from now on'),
    }),
  )
  life.onClose('database', () => db.destroy())
  const firehose = await startFirehose(config, db, logger, opts, life)
  const outbound = new OutboundGuard({ devMode: config.devMode, nameservers: config.dnsNameservers })
  life.onClose('outbound', () => outbound.close())
  const redis = await connectRedis(config, logger, life)
  const rateLimits = new RateLimits(config, logger, redis, opts.rateLimits, {
    accountOf: async (identifier) => (await findAccount(db, identifier))?.did,
  })
  const rotationKey = await k256Keypair(config.secrets.plcRotationKey)
  const oauth = await createOAuthServices(config, outbound)
  life.onClose('oauth', () => oauth.close())
  const services: Services = {
    firehose,
    config,
    db,
    logger,
    tokenKeys: tokenKeys(config.secrets.jwtSecret, config.serviceDid),
    rotationKey,
    metrics,
    oauth,
    mailer: countFailures(createMailer(config.email, logger, config.branding), metrics),
    blobstore: await stage('blobstore', config, () => openBlobStore(config, { probe: true })),
    outbound,
    didResolver: new DidResolver(db, config.plcUrl, outbound),
    passwords: rateLimits,
    notifyWrite: notifyNothing,
    notifySpacesDeleted: () => {},
    testHooks: opts.testHooks,
  }
  // the repo host tells each write's space host; the hook needs the services it is part of
  services.notifyWrite = notifyWriteHook(services)
  services.notifySpacesDeleted = spacesDeletedHook(services)
  registerGauges(services)
  return { services, rateLimits }
}

// The firehose, with the sequence floor it keeps and, on PostgreSQL, the wake-up channel that
// brings other processes' events at once.
async function startFirehose(config: Config, db: Db, logger: Logger, opts: StartOptions, life: Lifecycle) {
  const firehose = new Firehose(db, logger, {
    ...FIREHOSE_TUNING,
    retentionHours: config.firehoseRetentionHours,
    maxConnectionsPerAddress: config.firehoseConnectionsPerAddress,
    ...opts.firehose,
  })
  // a restored older backup or a reinstall must not hand out seq numbers relays already read
  const seqFloor = Math.max(config.seqFloor, readSeqFloor(config.dataDir))
  if (seqFloor && (await raiseEventSeq(db, seqFloor))) {
    logger.warn({ seqFloor }, 'event sequence raised to its floor: new events continue above every seq handed out before')
  }
  const keepSeqFloor = () => {
    try {
      recordSeqFloor(config.dataDir, firehose.headSeq)
    } catch (err) {
      logger.warn({ err: String(err) }, 'could not record the seq floor')
    }
  }
  await firehose.start()
  // the floor is recorded once more after the last event has gone out
  life.onClose('firehose', async () => {
    await firehose.stop()
    keepSeqFloor()
  })
  life.every('seq floor', JOBS.seqFloorMs, keepSeqFloor)
  db.firehose = (events) => firehose.deliverLocal(events)
  // several processes on one PostgreSQL: a commit anywhere wakes every process's firehose
  if (config.db.kind === 'postgres') {
    const wakeup = new PgEventWakeup({
      url: config.db.url,
      schema: config.db.schema,
      onWake: () => firehose.wake(),
      onHealth: (ok) => firehose.setWakeupHealthy(ok),
      logger,
    })
    life.onClose('firehose wake-up', () => wakeup.stop())
    await wakeup.start()
  }
  return firehose
}

// one connection for shared state (rate-limit counters); commands fail fast while it is down,
// and within REDIS_COMMAND_MS while it hangs with the connection open (the limits then let the
// request through)
async function connectRedis(config: Config, logger: Logger, life: Lifecycle): Promise<Redis | undefined> {
  if (!config.redisUrl) return undefined
  const redis = new (await import('ioredis')).Redis(config.redisUrl, {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    lazyConnect: false,
    commandTimeout: REDIS_COMMAND_MS,
  })
  life.onClose('redis', () => redis.disconnect())
  redis.on('error', (err) => logger.warn({ err: String(err) }, 'redis error'))
  await stage('redis', config, () => redisReady(redis))
  return redis
}

// Start serving only with Redis connected: one that cannot be reached at start is a mistake in
// PDS_REDIS_URL or a Redis not started yet, said in one line. Once running, a Redis that goes
// away only degrades the rate limits (they let requests through) until it comes back.
async function redisReady(redis: Redis) {
  if (redis.status === 'ready') return
  let last: unknown
  const onError = (err: unknown) => (last = err)
  redis.on('error', onError)
  const ok = await new Promise<boolean>((resolve) => {
    const t = setTimeout(() => resolve(false), REDIS_READY_MS)
    redis.once('ready', () => {
      clearTimeout(t)
      resolve(true)
    })
  })
  redis.off('error', onError)
  if (!ok) {
    redis.disconnect()
    throw last instanceof Error ? last : Object.assign(new Error(`no answer within ${REDIS_READY_MS / 1000} s`), { code: 'ETIMEDOUT' })
  }
}

// the data directory and the disk blob directory exist (created owner-only) and take a file
function dataDirsWritable(config: Config) {
  const dirs = [config.dataDir, ...(config.blobS3 ? [] : [config.blobDir])]
  for (const dir of dirs) {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const probe = join(dir, `.write-check-${process.pid}`)
    writeFileSync(probe, '')
    rmSync(probe)
  }
}

function countFailures(mailer: Mailer, metrics: Metrics): Mailer {
  return {
    send: (mail) =>
      mailer.send(mail).catch((err) => {
        metrics.emailFailures.inc()
        throw err
      }),
  }
}

function registerGauges({ metrics, firehose, db }: Services) {
  if (!metrics.enabled) return
  metrics.gauge('pds_firehose_consumers', 'live subscribeRepos consumers', () => firehose.stats().consumers)
  metrics.gauge(
    'pds_firehose_max_backlog_events',
    'largest number of events a live consumer has not sent yet',
    () => firehose.stats().maxBacklog,
  )
  metrics.gauge('pds_firehose_head_seq', 'newest seq handed to live consumers', () => firehose.headSeq)
  const pool = db.pool
  if (pool) {
    metrics.gauge('pds_db_pool_total', 'database connections open', () => pool.totalCount)
    metrics.gauge('pds_db_pool_idle', 'database connections idle', () => pool.idleCount)
    metrics.gauge('pds_db_pool_waiting', 'queries waiting for a connection', () => pool.waitingCount)
  }
  // from the blob rows, refreshed at most once a minute: never a walk of the store
  metrics.gauge('pds_blobstore_bytes', 'bytes of blobs stored (each CID once)', cachedBlobBytes(db))
}
