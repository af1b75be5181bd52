// The headers every HTML page of the server carries: nothing cached (pages show account data and
// carry form tokens), no framing (a framed sign-in form invites clickjacking), and a content
// security policy that allows styles only from the server's own stylesheet and no script at all,
// or, on a page that asks, only the server's own script files talking to the server itself.
import type { Response } from 'express'
import type { SafeHtml } from './html.js'

export type PageHeaderOptions = {
  status?: number
  /** allow <img> from any https origin (a client's logo on the consent page) */
  httpsImages?: boolean
  /** allow the server's own script files and their requests back to the server */
  scripts?: boolean
  retryAfterS?: number
}

/** res.locals key: the origin of the operator's logo, which every page may show */
export const LOGO_ORIGIN = 'pdsLogoOrigin'

export function contentSecurityPolicy(opts: { httpsImages?: boolean; scripts?: boolean; logoOrigin?: string } = {}): string {
  // no form-action: browsers apply it to the redirect back to the app after a form post
  return [
    "default-src 'none'",
    ...(opts.scripts ? ["script-src 'self'", "connect-src 'self'"] : []),
    "style-src 'self'",
    `img-src 'self'${opts.httpsImages ? ' https:' : ''}${opts.logoOrigin ? ' ' + opts.logoOrigin : ''}`,
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ')
}

export function pageHeaders(res: Response, opts: PageHeaderOptions = {}): void {
  res.setHeader('Cache-Control', 'no-store')
  res.setHeader('X-Frame-Options', 'DENY')
  res.setHeader('X-Content-Type-Options', 'nosniff')
  res.setHeader('Referrer-Policy', 'same-origin')
  const logoOrigin = res.locals?.[LOGO_ORIGIN] as string | undefined
  res.setHeader('Content-Security-Policy', contentSecurityPolicy({ ...opts, logoOrigin }))
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
