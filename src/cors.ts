// Browser access: the XRPC API and the OAuth endpoints a browser client calls answer any origin
// (no cookies are ever honoured there, so a wildcard without credentials is safe); the HTML pages
// stay same-origin and may not be framed (a framed sign-in form invites clickjacking).
import type { NextFunction, Request, Response } from 'express'
import { isPlcRead } from './local-plc.js'

const OAUTH_API = new Set([
  '/.well-known/oauth-protected-resource',
  '/.well-known/oauth-authorization-server',
  '/oauth/jwks',
  '/oauth/par',
  '/oauth/token',
  '/oauth/revoke',
])
const HTML_PAGES = new Set(['/oauth/authorize'])

const ALLOW_METHODS = 'GET, HEAD, POST, OPTIONS'
/** answered when a preflight names no headers (or names them unreadably) */
const ALLOW_HEADERS = 'authorization, dpop, content-type, content-encoding, atproto-proxy, atproto-accept-labelers, x-bsky-topics'
const EXPOSE_HEADERS = [
  'dpop-nonce',
  'www-authenticate',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'ratelimit-policy',
  'retry-after',
  'atproto-repo-rev',
  'atproto-content-labelers',
].join(', ')
// a day; browsers cap it lower themselves (Chromium at two hours)
const MAX_AGE_S = '86400'
// a comma-separated list of header names (RFC 9110 tokens), nothing else
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/

/** path without the query string, as the routes see it */
function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

/** `plcReads`: the server answers PLC directory reads from its local log, for browser apps too */
export function browserHeaders(opts: { plcReads?: boolean } = {}) {
  return (req: Request, res: Response, next: NextFunction) => {
    const path = pathOf(req.url)
    if (path.startsWith('/xrpc/') || OAUTH_API.has(path) || (opts.plcReads && isPlcRead(path))) {
      res.setHeader('Access-Control-Allow-Origin', '*')
      if (req.method !== 'OPTIONS') {
        res.setHeader('Access-Control-Expose-Headers', EXPOSE_HEADERS)
        return next()
      }
      // a preflight: every header the page asks to send is allowed; authorization is checked
      // per request anyway, so naming a header here grants nothing
      const asked = req.headers['access-control-request-headers']
      res.setHeader('Access-Control-Allow-Methods', ALLOW_METHODS)
      res.setHeader(
        'Access-Control-Allow-Headers',
        typeof asked === 'string' && HEADER_LIST.test(asked.trim()) ? asked.trim() : ALLOW_HEADERS,
      )
      res.setHeader('Access-Control-Expose-Headers', EXPOSE_HEADERS)
      res.setHeader('Access-Control-Max-Age', MAX_AGE_S)
      res.setHeader('Vary', 'Access-Control-Request-Headers')
      res.statusCode = 204
      return res.end()
    }
    if (HTML_PAGES.has(path)) {
      res.setHeader('X-Frame-Options', 'DENY')
      res.setHeader('Content-Security-Policy', "frame-ancestors 'none'")
    }
    next()
  }
}
