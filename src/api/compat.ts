// Procedures whose input this server adds to an official lexicon that has none: official
// clients call them without a body, which xrpc-server would refuse once the lexicon declares an
// input. A bodiless call is treated as an empty JSON object.
import type { NextFunction, Request, Response } from 'express'

const OPTIONAL_BODY = new Set(['/xrpc/com.atproto.server.requestEmailUpdate'])

export function optionalBodies(req: Request, _res: Response, next: NextFunction) {
  if (req.method === 'POST' && OPTIONAL_BODY.has(req.path) && !req.headers['transfer-encoding']) {
    const len = req.headers['content-length']
    if (len === undefined || len === '0') {
      req.headers['content-length'] = '0'
      req.headers['content-type'] = 'application/json'
    }
  }
  next()
}
