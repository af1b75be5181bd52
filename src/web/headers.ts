// The headers every HTML page of the server carries: nothing cached (pages show account data and
// carry form tokens), no framing (a framed sign-in form invites clickjacking), and a content
// security policy that allows styles only from the server's own stylesheet and no script, except
// that a page offering passkeys may load the server's own static scripts (never inline ones).
import type { Response } from 'express'
import type { SafeHtml } from './html.js'

export type PageHeaderOptions = {
  status?: number
  /** allow <img> from any https origin (a client's logo on the consent page) */
  httpsImages?: boolean
  retryAfterS?: number
  /** allow the server's own script files and same-origin fetches (the passkey ceremony) */
  scripts?: boolean
}

export function contentSecurityPolicy(opts: { httpsImages?: boolean; scripts?: boolean } = {}): string {
  // no form-action: browsers apply it to the redirect back to the app after a form post
  return [
    "default-src 'none'",
    "style-src 'self'",
    `img-src 'self'${opts.httpsImages ? ' https:' : ''}`,
    ...(opts.scripts ? ["script-src 'self'", "connect-src 'self'"] : []),
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ')
}

export function pageHeaders(res: Response, opts: PageHeaderOptions = {}): void {
  res.setHeader('Cache-Control', 'no-store')
  res.setHeader('X-Frame-Options', 'DENY')
  res.setHeader('X-Content-Type-Options', 'nosniff')
  res.setHeader('Referrer-Policy', 'same-origin')
  res.setHeader('Content-Security-Policy', contentSecurityPolicy(opts))
  if (opts.retryAfterS !== undefined) res.setHeader('Retry-After', String(opts.retryAfterS))
}

/** answers with a whole page and the page headers */
export function sendPage(res: Response, page: SafeHtml, opts: PageHeaderOptions = {}): void {
  pageHeaders(res, opts)
  res
    .status(opts.status ?? 200)
    .type('html')
    .send(page.value)
}
