// Mounts every handler on the generated server. The table comes from the file tree (a handler at
// src/api/<nsid path>.ts serves that method; `make codegen` writes it). Each method's auth comes
// from its registry row, injected here, so a handler module only implements the method.
import type { Server } from '../generated/server/index.js'
import type { Services } from '../context.js'
import { checkBodyPermissions, createVerifier } from '../auth/verifier.js'
import type { RateLimits } from '../auth/rate-limits.js'
import { onMethodAdded } from '../patches/xrpc-server.js'
import { registry, rowFor, type Row } from '../auth/registry.js'
import { handlers, type HandledMethod } from '../generated/handlers.js'

// a handler file without a registry row does not compile: its auth would be undefined
void (registry satisfies Record<HandledMethod, Row>)

/** mounts the handlers and returns the method ids they registered */
export function mountApi(api: Server, services: Services, rateLimits?: RateLimits): string[] {
  const mounted: string[] = []
  const claim = (nsid: string) => {
    if (mounted.includes(nsid)) throw new Error(`${nsid} has two handlers`)
    mounted.push(nsid)
  }
  onMethodAdded(api.xrpc, {
    method: (nsid, config) => {
      claim(nsid)
      const rateLimit = rateLimits?.forMethod(nsid)
      const row = rowFor(nsid)
      // what the body decides is checked once it is parsed, still from the registry row
      const inner = config.handler as (ctx: { auth?: unknown; input?: unknown }) => unknown
      const handler = row.bodyPermissions
        ? (ctx: { auth?: unknown; input?: unknown }) => {
            checkBodyPermissions(row, ctx.auth, ctx.input)
            return inner(ctx)
          }
        : inner
      return { ...config, handler, auth: createVerifier(nsid, services), ...(rateLimit ? { rateLimit } : {}) }
    },
    stream: (nsid, config) => {
      claim(nsid)
      return { ...config, auth: createVerifier(nsid, services) }
    },
  })
  for (const [nsid, mount] of Object.entries(handlers)) {
    const before = mounted.length
    mount(api, services)
    // a handler copied from another file must be renamed inside as well
    if (mounted.length !== before + 1 || mounted[before] !== nsid) {
      throw new Error(`src/api handler for ${nsid} mounted ${mounted.slice(before).join(', ') || 'nothing'}`)
    }
  }
  return mounted
}
