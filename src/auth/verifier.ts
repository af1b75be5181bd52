// Turns a registry row into the verifier xrpc-server runs before the handler.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { MethodAuthContext } from '@atproto/xrpc-server'
import type { Config } from '../config.js'
import { xrpcError } from '../errors.js'
import { rowFor } from './registry.js'

export type Credentials = { type: 'none' } | { type: 'admin' }

export type AuthOutput<C extends Credentials = Credentials> = { credentials: C }

export type VerifierDeps = { config: Config }

export function createVerifier(nsid: string, deps: VerifierDeps) {
  const row = rowFor(nsid)
  switch (row.check) {
    case 'none':
      return async (): Promise<AuthOutput> => ({ credentials: { type: 'none' } })
    case 'admin':
      return async (ctx: MethodAuthContext): Promise<AuthOutput> => {
        verifyAdmin(ctx.req.headers.authorization, deps.config.adminPassword)
        return { credentials: { type: 'admin' } }
      }
    default:
      throw new Error(`${nsid}: the ${row.check} check is not available yet`)
  }
}

const digest = (s: string) => createHash('sha256').update(s).digest()

function verifyAdmin(header: string | undefined, password: string | undefined) {
  if (!password) throw xrpcError('AuthenticationRequired', 'The admin API is off on this server')
  if (!header) throw xrpcError('AuthMissing', 'Authentication Required')
  const [scheme, value = ''] = header.split(' ', 2)
  if (scheme.toLowerCase() !== 'basic') throw xrpcError('InvalidToken', 'Unexpected authorization type')
  const given = Buffer.from(value, 'base64').toString('utf8')
  // equal-length digests: the comparison costs the same whatever the guess
  if (!timingSafeEqual(digest(given), digest(`admin:${password}`))) {
    throw xrpcError('AuthenticationRequired', 'Invalid admin credentials')
  }
}
