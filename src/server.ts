// Wiring: store, services, routes, HTTP listener and graceful shutdown.
import { randomUUID } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createServer as createHttpServer, STATUS_CODES, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import express, { type NextFunction, type Request, type Response } from 'express'
import { XRPCError, type Server as XrpcServer } from '@atproto/xrpc-server'
import type { Redis } from 'ioredis'
import type { Config } from './config.js'
import { tokenKeys } from './auth/session-tokens.js'
import type { Services, TestHooks } from './context.js'
import { isConnectionLost, openDb } from './db/index.js'
import { isDiskFull, xrpcError } from './errors.js'
import { raiseEventSeq } from './db/dialect.js'
import { createServer as createXrpcServer } from './generated/server/index.js'
import { createLogger, type Logger } from './logger.js'
import { mountApi } from './api/index.js'
import { optionalBodies } from './api/compat.js'
import { skipForXrpc } from './api/xrpc-paths.js'
import { assertValidJsonText } from './api/json-text.js'
import { capStreamFrames, exactXrpcRoutes, skipAuthResultParsing, streamServers } from './patches/xrpc-server.js'
import { browserHeaders } from './cors.js'
import { createMailer, type Mailer } from './mail/index.js'
import { createOAuthServices } from './oauth/index.js'
import { oauthRoutes } from './oauth/routes.js'
import { dpopNonceHeader } from './oauth/dpop-nonce.js'
import { useNameserversForHttp } from './net/dns.js'
import { readSeqFloor, recordSeqFloor } from './sequencer/seq-floor.js'
import { homeRoutes, webRoutes } from './web/index.js'
import { accountPages } from './web/account/index.js'
import { openBlobStore } from './repo/blobstore-open.js'
import { cachedBlobBytes, sweepBlobs } from './repo/blobstore-gc.js'
import { wellKnownRoutes } from './well-known.js'
import { localPlcRoutes } from './local-plc.js'
import { Firehose, type FirehoseOptions } from './sequencer/firehose.js'
import { PgEventWakeup } from './sequencer/wakeup.js'
import { Crawlers, type CrawlerOptions } from './sequencer/crawlers.js'
import { recordCrawl } from './sequencer/crawl-log.js'
import { RateLimits, clientAddress, type RateLimitTuning } from './auth/rate-limits.js'
import { requestLimits } from './auth/request-limits.js'
import { findAccount } from './account/store.js'
import { sweepExpiredChallenges } from './account/factors/passkeys.js'
import type { Refusal, StreamAdmission } from './sequencer/admission.js'
import { DidResolver } from './identity/did-resolver.js'
import { k256Keypair } from './identity/k256.js'
import { createProxy } from './proxy/index.js'
import { createMetrics, type Metrics } from './metrics.js'
import { OutboundGuard } from './net/guard.js'
import { jsonBodies, type HttpLimits, HTTP_LIMITS } from './limits.js'
import { lexicons } from './generated/server/lexicons.js'
import { stage } from './startup-errors.js'

export const version: string = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version

const JSON_LIMIT = 1024 * 1024

export type Pds = {
  services: Services
  /** method ids with a handler */
  methods: string[]
  url: string
  port: number
  close(): Promise<void>
}

export type StartOptions = {
  logger?: Logger
  /** tuning the tests use; operators have no reason to change these */
  firehose?: Partial<FirehoseOptions>
  rateLimits?: RateLimitTuning
  crawlers?: Partial<CrawlerOptions>
  http?: Partial<HttpLimits>
  /** fault injection for tests only */
  testHooks?: TestHooks
  /**
   * check every response body against its lexicon before sending it (the tests do; in service,
   * as with the reference PDS, the handlers' types and the tests stand for it)
   */
  validateResponses?: boolean
  /** how often expired passkey challenges are deleted (tests shorten it) */
  challengeSweepMs?: number
  /** scheduled S3 backups in milliseconds instead of PDS_BACKUP_INTERVAL_HOURS (tests) */
  backups?: { intervalMs?: number; checkMs?: number }
}

export async function startPds(config: Config, opts: StartOptions = {}): Promise<Pds> {
  const logger = opts.logger ?? createLogger(config.logLevel)
  for (const w of config.warnings) logger.warn(w)
  // before anything reaches out: the PLC directory, relays, the AppView, the email API, S3
  const restoreDns = config.dnsNameservers.length ? await useNameserversForHttp(config.dnsNameservers) : undefined
  const metrics = await createMetrics(config.metrics)
  // each step of the start under `stage`: a mistake there stops it with one line saying what to do
  await stage('data', config, () => dataDirsWritable(config))
  const db = await stage('database', config, () =>
    openDb(config.db, {
      onWalFsync: () => metrics.walFsyncs.inc(),
      onCheckpointError: (err) => logger.error({ err }, 'WAL checkpoint worker failed: checkpoints run on commit from now on'),
    }),
  )
  const firehose = new Firehose(db, logger, {
    pollMs: 25,
    safetyPollMs: 1000,
    retentionHours: config.firehoseRetentionHours,
    maxBuffer: 5000,
    maxBacklogBytes: 16 * 1024 * 1024,
    stallMs: 30_000,
    maxBackfills: 4,
    maxConnectionsPerAddress: config.firehoseConnectionsPerAddress,
    ...opts.firehose,
  })
  // a restored older backup or a reinstall must not hand out seq numbers relays already read
  const seqFloor = Math.max(config.seqFloor, readSeqFloor(config.dataDir))
  if (seqFloor && (await raiseEventSeq(db, seqFloor))) {
    logger.warn({ seqFloor }, 'event sequence raised to its floor: new events continue above every seq handed out before')
  }
  await firehose.start()
  db.firehose = (events) => firehose.deliverLocal(events)
  // several processes on one PostgreSQL: a commit anywhere wakes every process's firehose
  const wakeup =
    config.db.kind === 'postgres'
      ? new PgEventWakeup({
          url: config.db.url,
          schema: config.db.schema,
          onWake: () => firehose.wake(),
          onHealth: (ok) => firehose.setWakeupHealthy(ok),
          logger,
        })
      : undefined
  await wakeup?.start()
  const outbound = new OutboundGuard({ devMode: config.devMode, nameservers: config.dnsNameservers })
  // one connection for shared state (rate-limit counters); commands fail fast while it is down,
  // and within 2 s while it hangs with the connection open (the limits then let the request through)
  const redis = config.redisUrl
    ? new (await import('ioredis')).Redis(config.redisUrl, {
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
        lazyConnect: false,
        commandTimeout: 2000,
      })
    : undefined
  redis?.on('error', (err) => logger.warn({ err: String(err) }, 'redis error'))
  if (redis) await stage('redis', config, () => redisReady(redis))
  const rateLimits = new RateLimits(config, logger, redis, opts.rateLimits, {
    accountOf: async (identifier) => (await findAccount(db, identifier))?.did,
  })
  const services: Services = {
    firehose,
    config,
    db,
    logger,
    tokenKeys: tokenKeys(config.secrets.jwtSecret, config.serviceDid),
    rotationKey: await k256Keypair(config.secrets.plcRotationKey),
    metrics,
    oauth: await createOAuthServices(config, outbound),
    mailer: countFailures(createMailer(config.email, logger, config.branding), metrics),
    blobstore: await stage('blobstore', config, () => openBlobStore(config, { probe: true })),
    outbound,
    didResolver: new DidResolver(db, config.plcUrl, outbound),
    passwords: rateLimits,
    testHooks: opts.testHooks,
  }

  const api = createXrpcServer({
    validateResponse: opts.validateResponses ?? false,
    payload: { jsonLimit: JSON_LIMIT, blobLimit: config.blobUploadLimit, textLimit: JSON_LIMIT },
    errorParser: (err) => toXrpcError(err, logger),
    rateLimits: rateLimits.xrpcOptions(),
    catchall: createProxy(services),
  })
  skipAuthResultParsing(api.xrpc)
  const xrpcRoutes = exactXrpcRoutes(api.xrpc, {
    checkOutput: opts.validateResponses ? (nsid, out) => assertValidJsonText(api.xrpc.lex, nsid, out) : undefined,
  })
  const methods = mountApi(api, services, rateLimits)
  const known = new Set(methods)
  // firehose subscribers only send a handshake: a client frame beyond a few KiB is abuse
  capStreamFrames(api.xrpc, HTTP_LIMITS.wsMaxPayloadBytes)
  registerGauges(services)

  const app = express()
  app.disable('x-powered-by')
  // XRPC clients never revalidate with If-None-Match; hashing every body for an ETag is waste
  app.disable('etag')
  api.xrpc.router.disable('etag')
  app.set('trust proxy', config.trustProxy)
  app.use(requestLog(logger))
  app.use(metrics.middleware((nsid) => known.has(nsid)))
  // first of the routes: every API answer, errors and proxied calls included, carries it
  app.use(browserHeaders({ plcReads: !config.plcUrl }))
  app.use(dpopNonceHeader(services.oauth.nonces))
  if (config.metrics && !config.metricsPort) app.get('/metrics', metricsRoute(metrics))
  app.use(skipForXrpc(wellKnownRoutes(services, version), ['/xrpc/_health']))
  app.use(skipForXrpc(webRoutes(config)))
  // the pages and the OAuth endpoints spend their budgets before any of their routes runs
  app.use(skipForXrpc(requestLimits(config, rateLimits)))
  app.use(skipForXrpc(homeRoutes(config)))
  app.use(skipForXrpc(oauthRoutes(services)))
  app.use(skipForXrpc(accountPages(services)))
  // only while the DIDs live in the local log: with a directory configured, it answers these
  if (!config.plcUrl) app.use(skipForXrpc(localPlcRoutes(services)))
  app.use(optionalBodies)
  // raw inputs (uploadBlob, importRepo) stay streams whatever their Content-Type: a JSON file
  // uploaded as a blob is bytes to store, not a body to parse. Paths match in any letter case,
  // as the router matches them, so every spelling a handler answers is parsed (and capped) alike.
  const jsonInput = new Set(
    methods
      .filter((nsid) => {
        const encoding = (lexicons.getDef(nsid) as { input?: { encoding?: string } } | undefined)?.input?.encoding
        return encoding === undefined || encoding === 'application/json'
      })
      .map((nsid) => nsid.toLowerCase()),
  )
  app.use(jsonBodies(JSON_LIMIT, (nsid) => jsonInput.has(nsid)))
  // the method routes and the catch-all (proxying, 501) straight on this app: mounting
  // xrpc-server's own express app would run express's request setup a second time per request.
  // Errors reach the handler below, which answers them as xrpc-server's would.
  app.use(xrpcRoutes)
  app.use(api.xrpc.catchall)
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'NotFound', message: 'Not found' })
  })
  app.use((err: unknown, req: Request, res: Response, next: NextFunction) => {
    // a stream that fails after its headers went out: express ends the connection
    if (res.headersSent) return next(err)
    // refused before its body was read (bad encoding, too large, bad auth): the unread rest would
    // stall this keep-alive connection for the client's next request, so end it after the answer
    if (!req.complete) res.setHeader('connection', 'close')
    const x = toXrpcError(err, logger)
    res.status(x.statusCode).json(x.payload)
  })

  const limits = { ...HTTP_LIMITS, ...opts.http }
  const http = await stage('listen', config, () =>
    listen(app, { xrpc: api.xrpc, admission: firehose.admission }, config.port, config.bind, limits),
  )
  const port = (http.address() as AddressInfo).port
  const host = config.bind === '0.0.0.0' || config.bind === '::' ? '127.0.0.1' : config.bind
  const metricsHttp = config.metricsPort
    ? await stage('listen', config, () =>
        listen(express().get('/metrics', metricsRoute(metrics)), undefined, config.metricsPort!, config.bind, limits),
      )
    : undefined
  logger.info({ port, publicUrl: config.publicUrl, db: config.db.kind }, 'pds listening')

  const crawlers = new Crawlers(config.crawlers, config.hostname, firehose, logger, metrics, {
    intervalMs: config.crawlIntervalMinutes * 60_000,
    checkMs: 5000,
    unwatchedMs: 5 * 60_000,
    attempts: 5,
    backoffMs: 1000,
    timeoutMs: 10_000,
    onOutcome: (relay, ok) => recordCrawl(config.dataDir, relay, ok),
    ...opts.crawlers,
  })
  crawlers.start()
  const keepSeqFloor = () => {
    try {
      recordSeqFloor(config.dataDir, firehose.headSeq)
    } catch (err) {
      logger.warn({ err: String(err) }, 'could not record the seq floor')
    }
  }
  const seqFloorTimer = setInterval(keepSeqFloor, 30_000)
  seqFloorTimer.unref()
  const gc = setInterval(
    () => {
      sweepBlobs(services, config.blobGraceMs)
        .then(
          ({ removed, bytes, staged }) =>
            (removed.length || staged) && logger.info({ removed: removed.length, bytes, staged }, 'blobs swept'),
        )
        .catch((err) => logger.warn({ err }, 'blob sweep failed'))
    },
    10 * 60 * 1000,
  )
  gc.unref()
  // expired passkey challenges leave by an indexed delete here, never on a request's path
  const challengeSweep = setInterval(() => {
    sweepExpiredChallenges(db).catch((err) => logger.warn({ err }, 'passkey challenge sweep failed'))
  }, opts.challengeSweepMs ?? 60_000)
  challengeSweep.unref()
  // the AWS SDK loads only when scheduled backups are configured
  const backups = config.backupS3
    ? (await import('./cli/backup-s3.js')).scheduleBackups(config, db, logger, opts.backups)
    : { stop: async () => {} }

  let closing: Promise<void> | undefined
  return {
    services,
    methods,
    port,
    url: `http://${host}:${port}`,
    close: () =>
      (closing ??= (async () => {
        clearInterval(gc)
        clearInterval(challengeSweep)
        await backups.stop()
        await crawlers.stop()
        clearInterval(seqFloorTimer)
        metricsHttp?.close()
        await shutdown(http, services, api.xrpc)
        await wakeup?.stop()
        keepSeqFloor()
        redis?.disconnect()
        await restoreDns?.()
      })()),
  }
}

// Stop accepting, let in-flight requests finish (cut off after 4 s so exit stays within 5 s),
// then close the store.
async function shutdown(http: HttpServer, { db, logger, firehose, oauth, outbound }: Services, xrpc: XrpcServer) {
  const done = new Promise<void>((resolve) => http.close(() => resolve()))
  closeStreams(xrpc)
  // keep-alive connections turn idle as their last response ends: close them as they do
  const sweep = setInterval(() => http.closeIdleConnections(), 50)
  const timer = setTimeout(() => http.closeAllConnections(), 4000)
  await done
  clearInterval(sweep)
  clearTimeout(timer)
  await firehose.stop()
  await Promise.all([db.destroy(), oauth.close(), outbound.close()])
  logger.info('pds stopped')
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
    const t = setTimeout(() => resolve(false), 5000)
    redis.once('ready', () => {
      clearTimeout(t)
      resolve(true)
    })
  })
  redis.off('error', onError)
  if (!ok) {
    redis.disconnect()
    throw last instanceof Error ? last : Object.assign(new Error('no answer within 5 s'), { code: 'ETIMEDOUT' })
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

// The HTTP listener with the request limits (slowloris timeouts, header size); upgrades go to
// the XRPC subscriptions, as xrpc-server's own listen hook would route them.
async function listen(
  app: express.Express,
  streams: { xrpc: XrpcServer; admission: StreamAdmission } | undefined,
  port: number,
  bind: string,
  limits: HttpLimits,
): Promise<HttpServer> {
  const server = createHttpServer(
    {
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    app,
  )
  if (streams) {
    const subs = streamServers(streams.xrpc)
    server.on('upgrade', (req, socket, head) => {
      const nsid = req.url?.match(/^\/xrpc\/([^?/]+)/)?.[1]
      const sub = nsid ? subs.get(nsid) : undefined
      if (!sub) return socket.destroy()
      socket.on('error', () => {})
      // express's request methods, as every other request gets them: req.ip is the address the
      // rate limits count, under the same proxy trust
      Object.setPrototypeOf(req, app.request)
      const refused = streams.admission.admit(req, socket, clientAddress(req))
      if (refused) return refuseUpgrade(socket, refused)
      sub.wss.handleUpgrade(req, socket, head, (ws) => {
        streams.admission.attach(req, ws)
        sub.wss.emit('connection', ws, req)
      })
    })
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, bind, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return server
}

/** an HTTP error instead of the upgrade: the client has no WebSocket to read an error frame from */
function refuseUpgrade(socket: Duplex, { status, error, message }: Refusal) {
  const body = JSON.stringify({ error, message })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    () => socket.destroy(),
  )
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

function countFailures(mailer: Mailer, metrics: Metrics): Mailer {
  return {
    send: (mail) =>
      mailer.send(mail).catch((err) => {
        metrics.emailFailures.inc()
        throw err
      }),
  }
}

function metricsRoute(metrics: Metrics) {
  return async (_req: Request, res: Response, next: NextFunction) => {
    try {
      const { contentType, body } = await metrics.render()
      res.type(contentType).send(body)
    } catch (err) {
      next(err)
    }
  }
}

// WebSocket subscribers are not the HTTP server's connections any more: say goodbye to each
// (1001, going away), and cut off any that do not finish the close handshake in time.
function closeStreams(xrpc: XrpcServer) {
  for (const { wss } of streamServers(xrpc).values()) {
    for (const ws of wss.clients) ws.close(1001, 'server shutting down')
    setTimeout(() => wss.clients.forEach((ws) => ws.terminate()), 1000).unref()
  }
}

function toXrpcError(err: unknown, logger: Logger): XRPCError {
  // body-parser failures (bad JSON, too large) arrive as http-errors, sometimes already wrapped:
  // the client's fault, named plainly
  const cause = err instanceof XRPCError ? err.cause : err
  const http = cause as { statusCode?: number; expose?: boolean; message?: string }
  if (http && typeof http === 'object' && typeof http.expose === 'boolean' && typeof http.statusCode === 'number') {
    if (http.statusCode === 413) return new XRPCError(413, 'Request body too large', 'PayloadTooLarge')
    if (http.statusCode >= 400 && http.statusCode < 500) {
      return new XRPCError(400, http.message || 'Malformed request', 'InvalidRequest')
    }
  }
  // a named error thrown on purpose; what it wraps (a store's failure underneath) is for the log only
  if (err instanceof XRPCError && err.statusCode !== 500) {
    const under = err.cause
    if (err.statusCode >= 502 && under !== undefined) {
      logger.warn(
        { err: under instanceof Error ? `${under.name}: ${under.message}` : JSON.stringify(under), error: err.error },
        err.message,
      )
    }
    return err
  }
  // PostgreSQL refuses text holding a NUL character (SQLite stores it): only a request can have
  // put one there, and the statement's transaction is rolled back, so it is the client's error
  const pgCode = (cause as { code?: unknown } | null)?.code
  if (pgCode === '22021' || pgCode === '22P05') {
    return new XRPCError(400, 'Text may not contain NUL characters', 'InvalidRequest')
  }
  // the database connection went away under this request (and could not be retried safely):
  // say so plainly; the pool reconnects by itself
  if (!(cause instanceof XRPCError) && isConnectionLost(cause)) {
    logger.warn({ err: String(cause) }, 'database connection lost during a request')
    return new XRPCError(503, 'Database connection lost; try again', 'TemporarilyUnavailable')
  }
  if (!(cause instanceof XRPCError) && isDiskFull(cause)) {
    logger.error({ err: String(cause) }, 'disk full: a write was refused')
    return xrpcError('InsufficientStorage', 'The server is out of storage space; nothing was written. Try again later')
  }
  const x = XRPCError.fromError(err)
  if (x.statusCode === 500) logger.error({ err }, 'unhandled error')
  return x
}

function requestLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint()
    const id = randomUUID()
    res.setHeader('x-request-id', id)
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6
      // the path only: query strings may carry identifiers we do not want in logs
      logger.info({ reqId: id, method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10 }, 'request')
    })
    next()
  }
}
