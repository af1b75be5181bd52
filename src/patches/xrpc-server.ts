// Every place this server reaches inside @atproto/xrpc-server (pinned to an exact version in
// package.json; test/library-patches.nodb.test.ts fails when the library changes under them).
// Each exists for speed or for control the library's public surface does not offer:
//
// - exactXrpcRoutes: routes found by exact path in a map (express tries each of ~100 route
//   patterns in turn), and parameter checks without stack traces (an absent optional boolean
//   builds a ValidationError, with its stack, that is thrown away). Relies on the protected
//   `addRoute(nsid, def, config)` being how `method()` registers a query or procedure, on the
//   public `createHandler` building the route's handler, on the private
//   `createLexiconParamsVerifier(nsid, def)` being called by `createHandler`, and on `routes`
//   being the router the library mounts its routes on.
// - skipAuthResultParsing: the private `createAuthVerifier(config)` wraps each verifier in a
//   schema check of its result that builds (and throws away) an error with a stack trace on every
//   successful authentication. Our verifiers fail by throwing, so the result passes through.
// - streamServers: the WebSocket server of each subscription, kept in `subscriptions`, for our own
//   HTTP listener to route upgrades to and close at shutdown (the library's `listen` does the
//   routing only for a server it starts itself).
// - capStreamFrames: the library creates those servers with ws's default frame limit (100 MiB)
//   and no way to set it; ws (pinned too) reads `options.maxPayload` at each upgrade, so setting
//   it afterwards caps every later connection.
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import type { Server as XrpcServer } from '@atproto/xrpc-server'
import type { WebSocketServer } from 'ws'
import type { LexXrpcProcedure, LexXrpcQuery, LexXrpcSubscription } from '@atproto/lexicon'

// the private members' shapes as of the pinned version (the declarations leave them untyped)
type MethodDef = LexXrpcQuery | LexXrpcProcedure | LexXrpcSubscription
type ParamsVerifier = (nsid: string, def: MethodDef) => (req: Request) => unknown
type AuthVerifierFactory = (cfg: { auth?: unknown }) => unknown

/**
 * Call before any method is added. `checkOutput(nsid, output)`, when given, sees every handler's
 * output before it is sent (xrpc-server skips its own check for pass-through bodies). Returns
 * the request handler to mount in place of the library's router; paths the map does not know
 * (other letter case, a trailing slash) still reach the route express would pick.
 */
export function exactXrpcRoutes(xrpc: XrpcServer, opts: { checkOutput?: (nsid: string, output: unknown) => void } = {}): RequestHandler {
  const gets = new Map<string, RequestHandler>()
  const posts = new Map<string, RequestHandler>()
  const routes = xrpc.routes

  const paramsVerifier: ParamsVerifier = xrpc['createLexiconParamsVerifier'].bind(xrpc)
  const quietParamsVerifier: ParamsVerifier = (nsid, def) => {
    const verify = paramsVerifier(nsid, def)
    return (req) => withoutStackTraces(() => verify(req))
  }
  xrpc['createLexiconParamsVerifier'] = quietParamsVerifier

  xrpc['addRoute'] = async (nsid, def, config) => {
    const check = opts.checkOutput
    const cfg: typeof config = check
      ? {
          ...config,
          handler: async (ctx) => {
            const out = await config.handler(ctx)
            check(nsid, out)
            return out
          },
        }
      : config
    const handler = xrpc.createHandler(nsid, def, cfg)
    const path = `/xrpc/${nsid}`
    if (def.type === 'procedure') {
      posts.set(path, handler)
      routes.post(path, handler)
    } else {
      gets.set(path, handler)
      routes.get(path, handler)
    }
  }

  return (req: Request, res: Response, next: NextFunction) => {
    const url = req.url
    const q = url.indexOf('?')
    const path = q < 0 ? url : url.slice(0, q)
    const method = req.method
    const handler = method === 'POST' ? posts.get(path) : method === 'GET' || method === 'HEAD' ? gets.get(path) : undefined
    if (handler) handler(req, res, next)
    else routes(req, res, next)
  }
}

function withoutStackTraces<T>(fn: () => T): T {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  try {
    return fn()
  } finally {
    Error.stackTraceLimit = limit
  }
}

/** auth results pass straight through: our verifiers signal failure by throwing */
export function skipAuthResultParsing(xrpc: XrpcServer): void {
  const passThrough: AuthVerifierFactory = (cfg) => cfg.auth ?? null
  xrpc['createAuthVerifier'] = passThrough
}

/** each subscription's WebSocket server, by method id */
export function streamServers(xrpc: XrpcServer): ReadonlyMap<string, { wss: WebSocketServer }> {
  return xrpc.subscriptions
}

/** the largest frame a subscriber may send; call before the listener accepts upgrades */
export function capStreamFrames(xrpc: XrpcServer, maxPayload: number): void {
  for (const { wss } of xrpc.subscriptions.values()) wss.options.maxPayload = maxPayload
}
