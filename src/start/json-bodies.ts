// JSON bodies of served methods are parsed here with a depth cap, so no request can make
// validation recurse without bound.
import express, { type NextFunction, type Request, type Response } from 'express'
import { MAX_JSON_DEPTH } from '../limits.js'

/** nesting depth of a JSON text, without parsing it */
export function jsonDepth(buf: Uint8Array, stopAt = Infinity): number {
  let depth = 0
  let max = 0
  let inString = false
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i]
    if (inString) {
      if (c === 0x5c)
        i++ // backslash: skip the escaped byte
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max && (max = depth) > stopAt) return max
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return max
}

class TooDeep extends Error {
  status = 400
  expose = true
}

/**
 * Parses JSON bodies of the methods this server serves (xrpc-server then uses the parsed body)
 * and refuses any nested deeper than MAX_JSON_DEPTH. Proxied requests are left as streams.
 * The method is named as the router matches it (any letter case, one trailing slash), so no
 * spelling of a served method reaches its handler with a body this did not check.
 */
/** `served`: whether a method id, in lower case, is served here */
export function jsonBodies(limit: number, served: (nsid: string) => boolean) {
  const parse = express.json({
    limit,
    verify: (_req, _res, buf) => {
      if (jsonDepth(buf, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
        throw new TooDeep(`JSON nested deeper than ${MAX_JSON_DEPTH} levels`)
      }
    },
  })
  return (req: Request, res: Response, next: NextFunction) => {
    if (req.method !== 'POST') return next()
    const path = req.path.toLowerCase()
    if (!path.startsWith('/xrpc/') || !served(path.slice(6).replace(/\/$/, ''))) return next()
    parse(req, res, next)
  }
}
