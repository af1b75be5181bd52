// OAuth clients (atproto OAuth profile): a loopback client (`http://localhost?redirect_uri=…&scope=…`,
// nothing fetched) or a discoverable client whose client_id is the URL of its metadata document,
// fetched once through the outbound guard (size- and time-limited, no redirects, no private
// addresses outside development mode) and cached for ten minutes.
import type { OutboundGuard } from '../net/guard.js'

export type ClientMetadata = {
  client_id: string
  client_name?: string
  /** https only, shown on the consent page */
  client_uri?: string
  logo_uri?: string
  tos_uri?: string
  policy_uri?: string
  redirect_uris: string[]
  /** space-separated scopes the client may ask for */
  scope: string
  loopback: boolean
}

export class ClientError extends Error {}

const MAX_METADATA_BYTES = 64 * 1024
const FETCH_TIMEOUT_MS = 5000
const CACHE_MAX = 1000
// per process: a client that changes its metadata is seen by every process within this long
const CACHE_TTL_MS = 10 * 60 * 1000

export class ClientResolver {
  private cache = new Map<string, { metadata: ClientMetadata; expires: number }>()

  constructor(private outbound: OutboundGuard) {}

  async resolve(clientId: string): Promise<ClientMetadata> {
    let url: URL
    try {
      url = new URL(clientId)
    } catch {
      throw new ClientError('client_id must be a URL')
    }
    if (url.protocol === 'http:' && url.hostname === 'localhost' && !url.port) return loopbackClient(clientId, url)
    const cached = this.cache.get(clientId)
    if (cached && cached.expires > Date.now()) return cached.metadata
    this.cache.delete(clientId)
    const metadata = await this.fetchMetadata(clientId, url)
    if (this.cache.size >= CACHE_MAX) this.cache.delete(this.cache.keys().next().value as string)
    this.cache.set(clientId, { metadata, expires: Date.now() + CACHE_TTL_MS })
    return metadata
  }

  private async fetchMetadata(clientId: string, url: URL): Promise<ClientMetadata> {
    if (!this.outbound.allowsScheme(url)) throw new ClientError('client_id must be an https URL')
    if (url.hash || url.username || url.password) throw new ClientError('client_id must not carry a fragment or credentials')
    let json: unknown
    try {
      const res = await this.outbound.request(url, {
        method: 'GET',
        headers: { accept: 'application/json' },
        headersTimeout: FETCH_TIMEOUT_MS,
        bodyTimeout: FETCH_TIMEOUT_MS,
        signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      })
      if (res.statusCode !== 200) {
        await res.body.dump()
        throw new ClientError(`client metadata answered ${res.statusCode}`)
      }
      const chunks: Buffer[] = []
      let size = 0
      for await (const chunk of res.body) {
        size += chunk.length
        if (size > MAX_METADATA_BYTES) {
          res.body.destroy()
          throw new ClientError('client metadata document is too large')
        }
        chunks.push(chunk)
      }
      json = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch (err) {
      if (err instanceof ClientError) throw err
      throw new ClientError('client metadata could not be fetched')
    }
    return validateMetadata(clientId, json, this.outbound.devMode)
  }
}

function loopbackClient(clientId: string, url: URL): ClientMetadata {
  if (url.pathname !== '/' && url.pathname !== '') throw new ClientError('a loopback client_id has no path')
  if (url.hash) throw new ClientError('client_id must not carry a fragment')
  for (const key of url.searchParams.keys()) {
    if (key !== 'redirect_uri' && key !== 'scope') throw new ClientError(`loopback client_id has unknown parameter ${key}`)
  }
  const redirectUris = url.searchParams.getAll('redirect_uri')
  for (const uri of redirectUris) {
    let r: URL
    try {
      r = new URL(uri)
    } catch {
      throw new ClientError('loopback redirect_uri must be a URL')
    }
    if (r.protocol !== 'http:' || (r.hostname !== '127.0.0.1' && r.hostname !== '[::1]')) {
      throw new ClientError('loopback redirect_uri must be http://127.0.0.1 or http://[::1]')
    }
  }
  const scope = url.searchParams.get('scope') ?? 'atproto'
  if (!scope.split(' ').includes('atproto')) throw new ClientError('client scope must include atproto')
  return {
    client_id: clientId,
    client_name: 'An application on this computer',
    redirect_uris: redirectUris.length ? redirectUris : ['http://127.0.0.1/', 'http://[::1]/'],
    scope,
    loopback: true,
  }
}

function validateMetadata(clientId: string, json: unknown, allowLoopbackHttp: boolean): ClientMetadata {
  if (!json || typeof json !== 'object' || Array.isArray(json)) throw new ClientError('client metadata must be a JSON object')
  const m = json as Record<string, unknown>
  if (m.client_id !== clientId) throw new ClientError('client metadata client_id does not match its URL')
  const strings = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string')
  if (!strings(m.redirect_uris) || !m.redirect_uris.length) {
    throw new ClientError('client metadata needs redirect_uris')
  }
  if (m.grant_types !== undefined && (!strings(m.grant_types) || !m.grant_types.includes('authorization_code'))) {
    throw new ClientError('client metadata grant_types must include authorization_code')
  }
  if (m.response_types !== undefined && (!strings(m.response_types) || !m.response_types.includes('code'))) {
    throw new ClientError('client metadata response_types must include code')
  }
  if (m.dpop_bound_access_tokens !== true) throw new ClientError('client metadata must set dpop_bound_access_tokens')
  const auth = m.token_endpoint_auth_method ?? 'none'
  if (auth !== 'none') throw new ClientError(`token_endpoint_auth_method ${JSON.stringify(auth)} is not supported`)
  const scope = typeof m.scope === 'string' ? m.scope : 'atproto'
  if (!scope.split(' ').includes('atproto')) throw new ClientError('client metadata scope must include atproto')
  const clientUrl = new URL(clientId)
  for (const uri of m.redirect_uris) {
    let r: URL
    try {
      r = new URL(uri)
    } catch {
      throw new ClientError(`redirect_uri ${uri} is not a URL`)
    }
    if (r.hash) throw new ClientError('redirect_uri must not carry a fragment')
    const ok =
      (r.protocol === 'https:' && r.hostname === clientUrl.hostname) ||
      (r.protocol === 'http:' && (r.hostname === '127.0.0.1' || r.hostname === '[::1]')) ||
      (r.protocol === 'http:' && allowLoopbackHttp && isLoopbackHost(r.hostname) && r.hostname === clientUrl.hostname) ||
      // native apps: a private-use scheme, the client's host reversed (RFC 8252 §7.1)
      (/^[a-z][a-z0-9+.-]*\.[a-z0-9+.-]+:$/.test(r.protocol) &&
        r.protocol.slice(0, -1) === clientUrl.hostname.split('.').reverse().join('.'))
    if (!ok) throw new ClientError(`redirect_uri ${uri} is not allowed for this client`)
  }
  return {
    client_id: clientId,
    client_name: typeof m.client_name === 'string' ? m.client_name.slice(0, 100) : undefined,
    client_uri: httpsUri(m.client_uri),
    logo_uri: httpsUri(m.logo_uri),
    tos_uri: httpsUri(m.tos_uri),
    policy_uri: httpsUri(m.policy_uri),
    redirect_uris: m.redirect_uris,
    scope,
    loopback: false,
  }
}

/** a link the consent page may show: an https URL, else nothing (a bad link is dropped, the
 *  client still signs in) */
function httpsUri(v: unknown): string | undefined {
  if (typeof v !== 'string' || v.length > 2048) return undefined
  try {
    const u = new URL(v)
    return u.protocol === 'https:' && !u.username && !u.password ? u.href : undefined
  } catch {
    return undefined
  }
}

function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '')
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h)
}
