// xrpc-server's per-request path, trimmed where profiles showed it costing more than the work:
// routes found by exact path in a map (express tries each of ~100 route patterns in turn), and
// parameter checks without stack traces (an absent optional boolean builds a ValidationError, with
// its stack, that is thrown away). Registered on the router as before, so any path the map does
// not know (other letter case, a trailing slash) still reaches the route express would pick.
import type { NextFunction, Request, RequestHandler, Response } from 'express'
import type { Server as XrpcServer } from '@atproto/xrpc-server'
import type { LexiconDoc, Lexicons } from '@atproto/lexicon'
import { assertValidJsonText } from './json-text.js'

type Def = { type: string }
type Config = { handler: (ctx: unknown) => unknown }
type Internals = {
  lex: Lexicons
  routes: { get(path: string, h: RequestHandler): void; post(path: string, h: RequestHandler): void }
  addRoute(nsid: string, def: Def, config: Config): void
  createHandler(nsid: string, def: Def, config: Config): RequestHandler
  createLexiconParamsVerifier(nsid: string, def: LexiconDoc): (req: Request) => unknown
}

/**
 * Call before any method is added. `validateResponses`: JSON text bodies (json-text.ts) are
 * checked against the output schema, as xrpc-server checks other bodies.
 */
export function exactXrpcRoutes(xrpc: XrpcServer, opts: { validateResponses: boolean }): RequestHandler {
  const internals = xrpc as unknown as Internals
  const gets = new Map<string, RequestHandler>()
  const posts = new Map<string, RequestHandler>()

  const paramsVerifier = internals.createLexiconParamsVerifier.bind(xrpc)
  internals.createLexiconParamsVerifier = (nsid, def) => {
    const verify = paramsVerifier(nsid, def)
    return (req) => withoutStackTraces(() => verify(req))
  }

  internals.addRoute = (nsid, def, config) => {
    const cfg: Config = opts.validateResponses
      ? {
          ...config,
          handler: async (ctx) => {
            const out = await config.handler(ctx)
            assertValidJsonText(internals.lex, nsid, out)
            return out
          },
        }
      : config
    const handler = internals.createHandler(nsid, def, cfg)
    const path = `/xrpc/${nsid}`
    if (def.type === 'procedure') {
      posts.set(path, handler)
      internals.routes.post(path, handler)
    } else {
      gets.set(path, handler)
      internals.routes.get(path, handler)
    }
  }

  const routes = internals.routes as unknown as RequestHandler
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

/** `router` for every request but XRPC calls (`except`: XRPC paths it does serve) */
export function skipForXrpc(router: RequestHandler, except: string[] = []): RequestHandler {
  return (req, res, next) => {
    if (req.url.startsWith('/xrpc/') && !except.some((p) => req.url.toLowerCase().startsWith(p))) return next()
    router(req, res, next)
  }
}
