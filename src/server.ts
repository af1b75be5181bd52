// Wiring: store, services, routes, HTTP listener and graceful shutdown.
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import express, { type NextFunction, type Request, type Response } from 'express'
import { XRPCError, type Server as XrpcServer } from '@atproto/xrpc-server'
import type { WebSocketServer } from 'ws'
import { Secp256k1Keypair } from '@atproto/crypto'
import type { Config } from './config.js'
import { tokenKeys } from './auth/session-tokens.js'
import type { Services } from './context.js'
import { openDb } from './db/index.js'
import { createServer as createXrpcServer } from './generated/server/index.js'
import { createLogger, type Logger } from './logger.js'
import { mountApi } from './api/index.js'
import { createMailer } from './mail/index.js'
import { optionalBodies } from './api/compat.js'
import { wellKnownRoutes } from './well-known.js'
import { Firehose, type FirehoseOptions } from './sequencer/firehose.js'
import { createOAuthServices } from './oauth/index.js'
import { oauthRoutes } from './oauth/routes.js'
import { DiskBlobStore } from './repo/blobstore.js'
import { collectBlobs } from './repo/blobs.js'

export const version: string = JSON.parse(
  readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
).version

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
}

export async function startPds(config: Config, opts: StartOptions = {}): Promise<Pds> {
  const logger = opts.logger ?? createLogger(config.logLevel)
  for (const w of config.warnings) logger.warn(w)
  const db = await openDb(config.db)
  const firehose = new Firehose(db, logger, {
    pollMs: 25,
    retentionHours: config.firehoseRetentionHours,
    maxBuffer: 5000,
    ...opts.firehose,
  })
  await firehose.start()
  const services: Services = {
    firehose,
    config,
    db,
    logger,
    tokenKeys: tokenKeys(config.secrets.jwtSecret, config.serviceDid),
    rotationKey: await Secp256k1Keypair.import(config.secrets.plcRotationKey),
    oauth: await createOAuthServices(config),
    mailer: createMailer(config.email, logger),
    blobstore: new DiskBlobStore(config.blobDir),
  }

  const api = createXrpcServer({
    validateResponse: true,
    payload: { jsonLimit: JSON_LIMIT, blobLimit: config.blobUploadLimit, textLimit: JSON_LIMIT },
    errorParser: (err) => toXrpcError(err, logger),
  })
  const methods = mountApi(api, services)

  const app = express()
  app.disable('x-powered-by')
  app.set('trust proxy', true)
  app.use(requestLog(logger))
  app.use(wellKnownRoutes(services, version))
  app.use(oauthRoutes(services))
  app.use(optionalBodies)
  app.use(api.xrpc.router)
  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'NotFound', message: 'Not found' })
  })
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const x = toXrpcError(err, logger)
    res.status(x.statusCode).json(x.payload)
  })

  // app.listen, not http.createServer: the xrpc router hooks it to upgrade WebSocket requests
  const http: HttpServer = await new Promise((resolve, reject) => {
    const s = app.listen(config.port, config.bind, () => resolve(s))
    s.once('error', reject)
  })
  const port = (http.address() as AddressInfo).port
  const host = config.bind === '0.0.0.0' || config.bind === '::' ? '127.0.0.1' : config.bind
  logger.info({ port, publicUrl: config.publicUrl, db: config.db.kind }, 'pds listening')

  // unreferenced uploads past their grace period (DECISIONS.md 15)
  const gc = setInterval(() => {
    collectBlobs(services).catch((err) => logger.warn({ err }, 'blob collection failed'))
  }, 10 * 60 * 1000)
  gc.unref()

  let closing: Promise<void> | undefined
  return {
    services,
    methods,
    port,
    url: `http://${host}:${port}`,
    close: () => {
      clearInterval(gc)
      return (closing ??= shutdown(http, services, api.xrpc))
    },
  }
}

// Stop accepting, let in-flight requests finish (cut off after 4 s so exit stays within 5 s),
// then close the store.
async function shutdown(http: HttpServer, { db, logger, firehose, oauth }: Services, xrpc: XrpcServer) {
  const done = new Promise<void>((resolve) => http.close(() => resolve()))
  closeStreams(xrpc)
  // keep-alive connections turn idle as their last response ends: close them as they do
  const sweep = setInterval(() => http.closeIdleConnections(), 50)
  const timer = setTimeout(() => http.closeAllConnections(), 4000)
  await done
  clearInterval(sweep)
  clearTimeout(timer)
  await firehose.stop()
  await Promise.all([db.destroy(), oauth.close()])
  logger.info('pds stopped')
}

// WebSocket subscribers are not the HTTP server's connections any more: say goodbye to each
// (1001, going away), and cut off any that do not finish the close handshake in time.
function closeStreams(xrpc: XrpcServer) {
  const subs = (xrpc as unknown as { subscriptions: Map<string, { wss: WebSocketServer }> }).subscriptions
  for (const { wss } of subs.values()) {
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
      logger.info(
        { reqId: id, method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10 },
        'request',
      )
    })
    next()
  }
}
