// Handle → DID for any handle, the one function every handle lookup goes through: accounts hosted
// here first, then the two public methods raced with short timeouts (DNS TXT `_atproto.<handle>` = `did=<did>`, and
// https://<handle>/.well-known/atproto-did), both through the outbound guard, answers cached briefly.
import { isValidDid, isValidHandle, isValidTld } from '@atproto/syntax'
import type { Config } from '../config.js'
import type { Store } from '../db/schema.js'
import type { OutboundGuard } from '../net/guard.js'
import { readCapped } from '../outbound.js'

const TIMEOUT_MS = 3000
const FOUND_TTL_MS = 5 * 60_000
// short, so a user who just published the record is not kept waiting long
const MISSING_TTL_MS = 30_000
const CACHE_MAX = 10_000
// a DID is at most 2 KB; anything much longer is not an answer
const BODY_MAX = 4096

type Deps = { db: Store; outbound: OutboundGuard; config: Pick<Config, 'handleDomains'> }
type Entry = { did: string | undefined; expires: number }

// one cache per server (keyed by its guard), so servers sharing a process never share answers
const caches = new WeakMap<OutboundGuard, Map<string, Entry>>()

/** lower case, the form every handle is stored and compared in */
export const normalizeHandle = (handle: string) => handle.trim().toLowerCase()

/** true when `handle` is one this server hands out (under one of its service domains) */
export const onServiceDomain = (handle: string, domains: string[]) => domains.some((d) => handle.endsWith(d))

/**
 * The DID `handle` names, or undefined: this server's live accounts first; a handle on this
 * server's domains is answered by this server alone; any other is looked up on the network
 * (`fresh`: not from the cache).
 */
export async function resolveHandleDid(deps: Deps, input: string, opts: { fresh?: boolean } = {}): Promise<string | undefined> {
  const handle = normalizeHandle(input)
  if (!isValidHandle(handle)) return undefined
  const row = await deps.db
    .selectFrom('account')
    .select('did')
    .where('handle', '=', handle)
    .where('status', '!=', 'deleted')
    .executeTakeFirst()
  if (row) return row.did
  if (onServiceDomain(handle, deps.config.handleDomains)) return undefined
  return resolveExternalHandle(deps.outbound, handle, opts)
}

/**
 * The DID the network says `handle` names (DNS, then the well-known file), or undefined. `fresh`
 * skips the cache: proving a handle for an account must see the record as it is now.
 */
export async function resolveExternalHandle(
  outbound: OutboundGuard,
  input: string,
  opts: { fresh?: boolean } = {},
): Promise<string | undefined> {
  const handle = normalizeHandle(input)
  // names the network never resolves (.local, .invalid, .onion, ...) are not looked up
  if (!isValidHandle(handle) || !isValidTld(handle)) return undefined
  let cache = caches.get(outbound)
  if (!cache) caches.set(outbound, (cache = new Map()))
  const hit = cache.get(handle)
  if (hit && !opts.fresh && hit.expires > Date.now()) return hit.did
  const did = await lookup(outbound, handle)
  cache.delete(handle)
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!)
  cache.set(handle, { did, expires: Date.now() + (did ? FOUND_TTL_MS : MISSING_TTL_MS) })
  return did
}

// both methods start together; DNS wins when it answers, the well-known file otherwise
async function lookup(outbound: OutboundGuard, handle: string): Promise<string | undefined> {
  const https = fromWellKnown(outbound, handle)
  const dns = await fromDns(outbound, handle)
  return dns ?? (await https)
}

async function fromDns(outbound: OutboundGuard, handle: string): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<string[]>((resolve) => (timer = setTimeout(() => resolve([]), TIMEOUT_MS)))
  try {
    const records = await Promise.race([outbound.resolveTxt(`_atproto.${handle}`).catch(() => []), timeout])
    const dids = records.filter((r) => r.startsWith('did=')).map((r) => r.slice('did='.length).trim())
    // two different answers are no answer
    return dids.length === 1 && isValidDid(dids[0]) ? dids[0] : undefined
  } finally {
    clearTimeout(timer)
  }
}

async function fromWellKnown(outbound: OutboundGuard, handle: string): Promise<string | undefined> {
  const signal = AbortSignal.timeout(TIMEOUT_MS)
  try {
    const res = await outbound.request(`https://${handle}/.well-known/atproto-did`, {
      method: 'GET',
      signal,
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
    })
    if (res.statusCode !== 200) {
      await res.body.dump().catch(() => {})
      return undefined
    }
    const bytes = await readCapped(res.body, BODY_MAX)
    if (!bytes) return undefined
    const did = bytes.toString('utf8').split('\n')[0].trim()
    return isValidDid(did) ? did : undefined
  } catch {
    return undefined
  }
}
