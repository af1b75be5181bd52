// Which requests the non-XRPC routers see (the exact XRPC routes are in patches/xrpc-server.ts).
import type { RequestHandler } from 'express'

/** `router` for every request but XRPC calls (`except`: XRPC paths it does serve) */
export function skipForXrpc(router: RequestHandler, except: string[] = []): RequestHandler {
  return (req, res, next) => {
    if (req.url.startsWith('/xrpc/') && !except.some((p) => req.url.toLowerCase().startsWith(p))) return next()
    router(req, res, next)
  }
}
