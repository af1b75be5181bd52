// Mounts every handler on the generated server. Each method's auth comes from its registry row,
// injected here, so a handler module only implements the method.
import type { Server } from '../generated/server/index.js'
import type { Services } from '../context.js'
import { createVerifier } from '../auth/verifier.js'
import type { RateLimits } from '../auth/rate-limits.js'
import getPreferences from './app/bsky/actor/getPreferences.js'
import putPreferences from './app/bsky/actor/putPreferences.js'
import resolveHandle from './com/atproto/identity/resolveHandle.js'
import createAccount from './com/atproto/server/createAccount.js'
import createSession from './com/atproto/server/createSession.js'
import deleteSession from './com/atproto/server/deleteSession.js'
import describeServer from './com/atproto/server/describeServer.js'
import getSession from './com/atproto/server/getSession.js'
import refreshSession from './com/atproto/server/refreshSession.js'
import subscribeRepos from './com/atproto/sync/subscribeRepos.js'

const handlers: ((api: Server, s: Services) => void)[] = [
  createAccount,
  createSession,
  deleteSession,
  describeServer,
  getSession,
  refreshSession,
  resolveHandle,
  subscribeRepos,
  getPreferences,
  putPreferences,
]

/** mounts the handlers and returns the method ids they registered */
export function mountApi(api: Server, services: Services, rateLimits?: RateLimits): string[] {
  const mounted: string[] = []
  const xrpc = api.xrpc
  const method = xrpc.method.bind(xrpc)
  xrpc.method = ((nsid: string, cfg: unknown) => {
    const config = typeof cfg === 'function' ? { handler: cfg } : (cfg as object)
    if (mounted.includes(nsid)) throw new Error(`${nsid} has two handlers`)
    mounted.push(nsid)
    const rateLimit = rateLimits?.forMethod(nsid)
    method(nsid, { ...config, auth: createVerifier(nsid, services), ...(rateLimit ? { rateLimit } : {}) } as never)
  }) as typeof xrpc.method
  const streamMethod = xrpc.streamMethod.bind(xrpc)
  xrpc.streamMethod = ((nsid: string, cfg: unknown) => {
    const config = typeof cfg === 'function' ? { handler: cfg } : (cfg as object)
    if (mounted.includes(nsid)) throw new Error(`${nsid} has two handlers`)
    mounted.push(nsid)
    streamMethod(nsid, { ...config, auth: createVerifier(nsid, services) } as never)
  }) as typeof xrpc.streamMethod
  for (const mount of handlers) mount(api, services)
  return mounted
}
