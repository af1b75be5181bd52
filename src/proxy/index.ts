// Service proxying: a call to a method id this server does not serve, carrying
// `atproto-proxy: <did>#<service>` (or, for app.bsky.* and chat.bsky.*, going to the configured
// AppView), is forwarded for the signed-in caller with a fresh service-auth JWT signed by the
// account's repository key. Bodies stream both ways; only allow-listed headers cross; time and
// size are bounded. Without a target the method stays 501 MethodNotImplemented. A target named by
// the header comes from someone's DID document, so it is reached through the outbound guard; only
// the configured AppView is dialled directly.
import { Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { NextFunction, Request, Response } from 'express'
import { ensureValidNsid } from '@atproto/syntax'
import { isUndiciTimeout, request } from '../outbound.js'
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { mintServiceAuth, proxyAudience } from '../auth/service-auth.js'
import { verifyAccessRequest } from '../auth/verifier.js'
import { rpcNeed } from '../auth/permissions.js'
import type { DidResolver } from '../identity/did-resolver.js'
import { isReadAfterWrite, readAfterWrite, type Upstream } from '../read-after-write/index.js'
import { defaultTarget, inNamespace, proxyRef, resolveRef, serviceIdOf, type Target } from './targets.js'

/** request headers a client may send on to the target */
const REQ_HEADERS = [
  'accept',
  'accept-encoding',
  'accept-language',
  'atproto-accept-labelers',
  'x-bsky-topics',
  'content-type',
  'content-encoding',
  'content-length',
]
/** response headers the target may send back */
const RES_HEADERS = [
  'content-type',
  'content-length',
  'content-encoding',
  'content-language',
  'atproto-repo-rev',
  'atproto-upstream-lag',
  'atproto-content-labelers',
  'retry-after',
]

export type ProxyDeps = Pick<Services, 'config' | 'db' | 'tokenKeys' | 'oauth' | 'logger' | 'metrics' | 'outbound'> & {
  didResolver: DidResolver
}

export function createProxy(deps: ProxyDeps) {
  const { config, logger } = deps
  return async (req: Request, res: Response, next: NextFunction) => {
    try {
      const nsid = nsidOf(req.url)
      if (req.method !== 'GET' && req.method !== 'POST') {
        throw xrpcError('InvalidRequest', `Incorrect HTTP method (${req.method}): XRPC uses GET and POST`)
      }
      const header = req.headers['atproto-proxy']
      const fallback = defaultTarget(nsid, config)
      if (header === undefined && !fallback) throw xrpcError('MethodNotImplemented', 'Method Not Implemented')
      // an OAuth app needs `rpc:<method>?aud=<did#service>` for the service the call goes to
      const aud = header !== undefined ? proxyRef(String(header)) : fallback!.ref
      const creds = await verifyAccessRequest(req, res, deps, { check: 'access', permissions: [rpcNeed(nsid, aud)] })
      // chat reaches private messages: app passwords need the privileged flag
      if (inNamespace(nsid, 'chat.bsky.') && creds.appPassword && !creds.appPassword.privileged) {
        throw xrpcError('InsufficientScope', 'Chat needs a privileged app password or the main password')
      }
      const target = header !== undefined ? await resolveRef(String(header), deps.didResolver) : fallback!
      // the same service token getServiceAuth mints (ES256K, repository key), for the target's DID
      const jwt = await mintServiceAuth(deps, {
        iss: creds.did,
        aud: proxyAudience(config, target.did, serviceIdOf(target.ref)),
        lxm: nsid,
      })
      await forward(req, res, target, jwt, deps, { nsid, did: creds.did })
    } catch (err) {
      if (res.headersSent) {
        logger.warn({ err: String(err) }, 'proxied response cut short')
        res.destroy()
        return
      }
      next(err)
    }
  }

  function nsidOf(url: string): string {
    const path = url.slice('/xrpc/'.length).split('?')[0]
    try {
      ensureValidNsid(path)
    } catch {
      throw xrpcError('InvalidRequest', 'invalid xrpc path')
    }
    return path
  }

  async function forward(req: Request, res: Response, target: Target, jwt: string, deps: ProxyDeps, call: { nsid: string; did: string }) {
    const headers: Record<string, string> = { authorization: `Bearer ${jwt}` }
    for (const name of REQ_HEADERS) {
      const v = req.headers[name]
      if (typeof v === 'string') headers[name] = v
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD'
    const limit = config.blobUploadLimit
    if (hasBody && Number(req.headers['content-length'] ?? 0) > limit) {
      throw xrpcError('PayloadTooLarge', 'Request body too large')
    }
    const url = target.url + req.url
    let upstream: Upstream
    try {
      const send = target.trusted ? request : deps.outbound.request.bind(deps.outbound)
      upstream = await send(url, {
        method: req.method as 'GET' | 'POST',
        headers,
        body: hasBody ? req.pipe(byteLimit(limit, () => xrpcError('PayloadTooLarge', 'Request body too large'))) : undefined,
        headersTimeout: config.proxy.timeoutMs,
        bodyTimeout: config.proxy.timeoutMs,
      })
    } catch (err) {
      throw upstreamError(err, deps)
    }
    // the requester's own records the AppView has not indexed yet join its answer
    if (req.method === 'GET' && isReadAfterWrite(call.nsid)) {
      upstream = await readAfterWrite(deps, { ...call, url: req.url }, upstream)
    }
    const declared = Number(upstream.headers['content-length'] ?? 0)
    if (declared > config.proxy.maxResponseBytes) {
      upstream.body.on('error', () => {})
      upstream.body.destroy()
      throw xrpcError('UpstreamFailure', 'Upstream response too large')
    }
    res.status(upstream.statusCode)
    for (const name of RES_HEADERS) {
      const v = upstream.headers[name]
      if (typeof v === 'string') res.setHeader(name, v)
    }
    const cap = byteLimit(config.proxy.maxResponseBytes, () => new Error('upstream response too large'))
    try {
      await pipeline(upstream.body, cap, res)
      deps.metrics.proxied.inc({ status: String(upstream.statusCode) })
    } catch (err) {
      deps.metrics.proxied.inc({ status: 'aborted' })
      deps.logger.warn({ err: String(err), target: target.did }, 'proxied response aborted')
      res.destroy()
    }
  }
}

/** passes bytes through until `max`, then fails with `error()` */
function byteLimit(max: number, error: () => Error): Transform {
  let seen = 0
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      seen += chunk.length
      if (seen > max) cb(error())
      else cb(null, chunk)
    },
  })
}

function upstreamError(err: unknown, { logger }: ProxyDeps) {
  if (isUndiciTimeout(err)) {
    return xrpcError('UpstreamTimeout', 'Upstream service timed out')
  }
  if ((err as { error?: string })?.error === 'PayloadTooLarge') return err
  logger.warn({ err: String(err) }, 'proxy upstream unreachable')
  return xrpcError('UpstreamFailure', 'Upstream service unreachable')
}
