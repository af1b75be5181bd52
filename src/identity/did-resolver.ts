// Resolves the DID documents of other services (proxy targets): did:web over HTTPS through the
// outbound guard (plain HTTP for loopback hosts in development mode, which is how tests stand
// services up), did:plc from PDS_DID_PLC_URL or, without one, the local operation log. Documents
// are cached for an hour.
import type { OutboundGuard } from '../net/guard.js'
import { readCapped, request } from '../outbound.js'
import type { Db } from '../db/index.js'
import { latestOp, renderDidDoc } from './plc.js'

export type ServiceDidDoc = {
  id: string
  service?: { id: string; type?: string; serviceEndpoint: unknown }[]
  verificationMethod?: unknown[]
}

const TTL_MS = 60 * 60 * 1000
const FAIL_TTL_MS = 30 * 1000
const MAX_ENTRIES = 1000
const MAX_DOC_BYTES = 64 * 1024
const TIMEOUT_MS = 5000

const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$/

export class DidResolver {
  private cache = new Map<string, { doc: ServiceDidDoc | null; expires: number }>()

  constructor(
    private db: Db,
    private plcUrl: string | undefined,
    private outbound: OutboundGuard,
  ) {}

  /** the document, or null when the DID does not resolve; `fresh`: fetched again, not cached */
  async resolve(did: string, opts: { fresh?: boolean } = {}): Promise<ServiceDidDoc | null> {
    const hit = opts.fresh ? undefined : this.cache.get(did)
    if (hit && hit.expires > Date.now()) return hit.doc
    this.cache.delete(did)
    let doc: ServiceDidDoc | null
    try {
      doc = await this.fetchDoc(did)
    } catch {
      doc = null
    }
    if (doc && doc.id !== did) doc = null
    if (this.cache.size >= MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value!)
    this.cache.set(did, { doc, expires: Date.now() + (doc ? TTL_MS : FAIL_TTL_MS) })
    return doc
  }

  private async fetchDoc(did: string): Promise<ServiceDidDoc | null> {
    if (did.startsWith('did:web:')) {
      const rest = did.slice('did:web:'.length)
      // atproto allows host-level did:web only (no path segments)
      if (!rest || rest.includes(':')) return null
      const host = decodeURIComponent(rest)
      if (!/^[a-zA-Z0-9.-]+(:\d+)?$|^\[::1\](:\d+)?$/.test(host)) return null
      const scheme = LOOPBACK.test(host) && this.outbound.devMode ? 'http' : 'https'
      return this.getJson(`${scheme}://${host}/.well-known/did.json`, true)
    }
    if (did.startsWith('did:plc:')) {
      // the operator's directory is trusted wherever it points
      if (this.plcUrl) return this.getJson(`${this.plcUrl}/${encodeURIComponent(did)}`, false)
      const latest = await latestOp(this.db, did)
      return latest ? renderDidDoc(did, latest.op) : null
    }
    return null
  }

  private async getJson(url: string, guarded: boolean): Promise<ServiceDidDoc | null> {
    const opts = {
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      headers: { accept: 'application/did+ld+json, application/json' },
    }
    const res = guarded ? await this.outbound.request(url, opts) : await request(url, opts)
    if (res.statusCode !== 200) {
      await res.body.dump()
      return null
    }
    const bytes = await readCapped(res.body, MAX_DOC_BYTES)
    if (!bytes) return null
    const doc = JSON.parse(bytes.toString('utf8'))
    return doc && typeof doc === 'object' && typeof doc.id === 'string' ? doc : null
  }
}

/** the endpoint of service `#id` in `doc`, when it is an http(s) URL */
export function serviceEndpoint(doc: ServiceDidDoc, id: string): string | undefined {
  const svc = doc.service?.find((s) => s.id === id || s.id === `${doc.id}${id}`)
  const url = svc?.serviceEndpoint
  if (typeof url !== 'string') return undefined
  try {
    const u = new URL(url)
    return u.protocol === 'https:' || u.protocol === 'http:' ? url.replace(/\/+$/, '') : undefined
  } catch {
    return undefined
  }
}
