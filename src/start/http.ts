// The HTTP side: the XRPC server with every handler mounted, the express app in front of it (CORS,
// well-known, pages, OAuth, JSON bodies, the method routes, proxying, errors), and the listeners,
// which drain their requests at shutdown.
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import express, { type NextFunction, type Request, type Response } from 'express'
import { XRPCError } from '@atproto/xrpc-server'
import type { Services } from '../context.js'
import type { Logger } from '../logger.js'
import type { Metrics } from '../metrics.js'
import type { StartOptions } from './options.js'
import type { RateLimits } from '../auth/rate-limits.js'
import { requestLimits } from '../auth/request-limits.js'
import { isConnectionLost } from '../db/index.js'
import { isDiskFull, xrpcError } from '../errors.js'
import { createServer as createXrpcServer } from '../generated/server/index.js'
import { lexicons } from '../generated/server/lexicons.js'
import { mountApi, spacesGate } from '../api/index.js'
import { optionalBodies } from '../api/compat.js'
import { skipForXrpc } from '../api/xrpc-paths.js'
import { assertValidJsonText } from '../api/json-text.js'
import { capStreamFrames, exactXrpcRoutes, skipAuthResultParsing } from '../patches/xrpc-server.js'
import { browserHeaders } from '../cors.js'
import { oauthRoutes } from '../oauth/routes.js'
import { dpopNonceHeader } from '../jwt/dpop-nonce.js'
import { homeRoutes, webRoutes } from '../web/index.js'
import { accountPages } from '../web/account/index.js'
import { wellKnownRoutes } from '../well-known.js'
import { localPlcRoutes } from '../local-plc.js'
import { createProxy } from '../proxy/index.js'
import { stage } from '../startup-errors.js'
import { HTTP_LIMITS, JSON_BODY_BYTES } from '../limits.js'
import { jsonBodies } from './json-bodies.js'
import { drain, listen } from './listen.js'
import type { Lifecycle } from './lifecycle.js'

export const version: string = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version

export async function startHttp(
  services: Services,
  rateLimits: RateLimits,
  opts: StartOptions,
  life: Lifecycle,
): Promise<{ methods: string[]; port: number; url: string }> {
  const { config, logger, metrics, firehose } = services
  const api = createXrpcServer({
    validateResponse: opts.validateResponses ?? false,
    payload: { jsonLimit: JSON_BODY_BYTES, blobLimit: config.blobUploadLimit, textLimit: JSON_BODY_BYTES },
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
  capStreamFrames(api.xrpc, HTTP_LIMITS.wsMaxPayloadBytes)

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
  app.use(jsonBodies(JSON_BODY_BYTES, (nsid) => jsonInput.has(nsid)))
  // the method routes and the catch-all (proxying, 501) straight on this app: mounting
  // xrpc-server's own express app would run express's request setup a second time per request.
  // Errors reach the handler below, which answers them as xrpc-server's would.
  app.use(spacesGate(known))
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
  life.onClose('http', () => drain(http, api.xrpc))
  const port = (http.address() as AddressInfo).port
  const host = config.bind === '0.0.0.0' || config.bind === '::' ? '127.0.0.1' : config.bind
  if (config.metricsPort) {
    const metricsHttp = await stage('listen', config, () =>
      listen(express().get('/metrics', metricsRoute(metrics)), undefined, config.metricsPort!, config.bind, limits),
    )
    life.onClose('metrics listener', () => void metricsHttp.close())
  }
  logger.info({ port, publicUrl: config.publicUrl, db: config.db.kind }, 'pds listening')
  return { methods, port, url: `http://${host}:${port}` }
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
