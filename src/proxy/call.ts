// A handler's call to another service for the signed-in account: the service token is minted
// here (the caller's key, the audience and method the handler names), the answer comes back as a
// stream the handler hands on, or as the service's own XRPC error. Time and size are bounded as
// for the catch-all proxy; a target someone else named goes through the outbound guard.
import { Transform, type Readable } from 'node:stream'
import { XRPCError } from '@atproto/xrpc-server'
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { isUndiciTimeout, readCapped, request } from '../outbound.js'
import { mintServiceAuth, proxyAudience } from '../auth/service-auth.js'
import type { Target } from './targets.js'

export type CallDeps = Pick<Services, 'config' | 'db' | 'tokenKeys' | 'outbound' | 'logger'>

/** response headers a service may send back to the app */
const PASS_BACK = ['content-language', 'atproto-repo-rev', 'atproto-content-labelers']
/** request headers an app may send on */
const PASS_ON = ['accept-language', 'atproto-accept-labelers', 'x-bsky-topics']

export type Forward = {
  /** the service the call goes to */
  target: Target
  /** the method called there (also the token's `lxm` unless `lxm` says otherwise) */
  nsid: string
  /** the signed-in account, the token's issuer */
  iss: string
  /** the token's audience and method, when they are not the target's (a feed's generator) */
  aud?: { did: string; serviceId: string }
  lxm?: string
  /** GET: the raw query string, `?` included; POST: the JSON body */
  query?: string
  body?: unknown
  /** the app's request headers, of which the allow-listed ones go on */
  headers?: Record<string, string | string[] | undefined>
}

/** the service's successful answer, as a pass-through stream xrpc-server sends with status 200 */
export async function forwardCall(deps: CallDeps, f: Forward) {
  const aud = f.aud ?? { did: f.target.did, serviceId: f.target.ref.slice(f.target.ref.indexOf('#')) }
  const jwt = await mintServiceAuth(deps, { iss: f.iss, aud: proxyAudience(deps.config, aud.did, aud.serviceId), lxm: f.lxm ?? f.nsid })
  const headers: Record<string, string> = { authorization: `Bearer ${jwt}` }
  for (const name of PASS_ON) {
    const v = f.headers?.[name]
    if (typeof v === 'string') headers[name] = v
  }
  const post = f.body !== undefined
  if (post) headers['content-type'] = 'application/json'
  const { timeoutMs, maxResponseBytes } = deps.config.proxy
  let upstream
  try {
    const send = f.target.trusted ? request : deps.outbound.request.bind(deps.outbound)
    upstream = await send(`${f.target.url}/xrpc/${f.nsid}${f.query ?? ''}`, {
      method: post ? 'POST' : 'GET',
      headers,
      body: post ? JSON.stringify(f.body) : undefined,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    })
  } catch (err) {
    if (isUndiciTimeout(err)) throw xrpcError('UpstreamTimeout', 'Upstream service timed out')
    if ((err as { error?: string })?.error) throw err
    deps.logger.warn({ err: String(err), target: f.target.did }, 'service unreachable')
    throw xrpcError('UpstreamFailure', 'Upstream service unreachable')
  }
  if (upstream.statusCode !== 200) throw await upstreamError(upstream.statusCode, upstream.body)
  if (Number(upstream.headers['content-length'] ?? 0) > maxResponseBytes) {
    upstream.body.on('error', () => {})
    upstream.body.destroy()
    throw xrpcError('UpstreamFailure', 'Upstream response too large')
  }
  const back: Record<string, string> = {}
  for (const name of PASS_BACK) {
    const v = upstream.headers[name]
    if (typeof v === 'string') back[name] = v
  }
  const type = upstream.headers['content-type']
  return {
    encoding: typeof type === 'string' ? type : 'application/json',
    stream: (upstream.body as Readable).pipe(byteLimit(maxResponseBytes)),
    headers: back,
  }
}

/** the service's XRPC error as ours (same status, name and message), so the app sees what it said */
async function upstreamError(status: number, body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<XRPCError> {
  const bytes = await readCapped(body, 64 * 1024).catch(() => undefined)
  let parsed: { error?: unknown; message?: unknown } = {}
  try {
    parsed = bytes ? JSON.parse(bytes.toString('utf8')) : {}
  } catch {
    // not JSON: the status alone
  }
  if (status < 400 || status > 599) return xrpcError('UpstreamFailure', `Upstream service answered ${status}`)
  const name = typeof parsed.error === 'string' ? parsed.error : undefined
  const message = typeof parsed.message === 'string' ? parsed.message : `Upstream service answered ${status}`
  return new XRPCError(status, message, name)
}

function byteLimit(max: number): Transform {
  let seen = 0
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      seen += chunk.length
      if (seen > max) cb(new Error('upstream response too large'))
      else cb(null, chunk)
    },
  })
}
