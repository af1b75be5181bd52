// Mounts every handler on the generated server. The table comes from the file tree (a handler at
// src/api/<nsid path>.ts serves that method; `make codegen` writes it). Each method's auth, rate
// limit and body permissions come from its registry row, attached here, so a handler module only
// implements the method.
import type { HandlerContext, MethodHandler, StreamAuthVerifier, StreamHandler } from '@atproto/xrpc-server'
import type { Server } from '../generated/server/index.js'
import type { Services } from '../context.js'
import { checkBodyPermissions, createVerifier } from '../auth/verifier.js'
import type { RateLimits } from '../auth/rate-limits.js'
import { registry, rowFor, type Row } from '../auth/registry.js'
import { handlers, type HandledMethod } from '../generated/handlers.js'
import { subscriptions } from '../generated/methods.js'
import type { NextFunction, Request, Response } from 'express'
import { xrpcError } from '../errors.js'

// a handler file without a registry row does not compile: its auth would be undefined
void (registry satisfies Record<HandledMethod, Row>)

/** a handler module as the mount sees it, whatever its method's types */
type AnyMethod = { id: string; make: (services: Services) => unknown }

/** mounts the handlers and returns the method ids they registered */
export function mountApi(api: Server, services: Services, rateLimits?: RateLimits): string[] {
  const mounted: string[] = []
  for (const [nsid, mod] of Object.entries(handlers as Record<string, AnyMethod>)) {
    if (isSpacesMethod(nsid) && !services.config.spacesEnabled) continue
    // the generated table types this too; a handler copied from another file must be renamed inside
    if (mod.id !== nsid) throw new Error(`src/api handler for ${nsid} declares ${mod.id}`)
    const auth = createVerifier(nsid, services)
    if (subscriptions.has(nsid)) {
      // a subscription's upgrade has no response object: the verifiers set headers only when there is one
      api.xrpc.streamMethod(nsid, { auth: auth as StreamAuthVerifier, handler: mod.make(services) as StreamHandler })
    } else {
      const rateLimit = rateLimits?.forMethod(nsid)
      const handler = withBodyPermissions(rowFor(nsid), mod.make(services) as MethodHandler)
      api.xrpc.method(nsid, { auth, handler, ...(rateLimit ? { rateLimit } : {}) })
    }
    mounted.push(nsid)
  }
  return mounted
}

/** what the body decides is checked once xrpc-server has parsed it, still from the registry row */
function withBodyPermissions(row: Row, handler: MethodHandler): MethodHandler {
  if (!row.bodyPermissions) return handler
  return (ctx: HandlerContext) => {
    checkBodyPermissions(row, ctx.auth, ctx.input)
    return handler(ctx)
  }
}

/** Spaces (permissioned data) methods, which PDS_SPACES_ENABLED switches off */
export const isSpacesMethod = (nsid: string) => /^com\.atproto\.(space|simplespace)\./i.test(nsid)

/**
 * A Spaces method this server does not serve (switched off, or not yet served) answers 501
 * itself: it is never forwarded to another service.
 */
export function spacesGate(mounted: ReadonlySet<string>) {
  return (req: Request, _res: Response, next: NextFunction) => {
    const m = /^\/xrpc\/([^/?#]+)/.exec(req.url)
    if (m && isSpacesMethod(m[1]) && !mounted.has(m[1])) return next(xrpcError('MethodNotImplemented', 'Method Not Implemented'))
    next()
  }
}
