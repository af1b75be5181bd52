// The named XRPC errors the space primitives raise, each with its HTTP status, so bad input
// reaching a handler through them answers a clear 4xx without the handler translating anything.
import { XRPCError } from '@atproto/xrpc-server'

const named = {
  InvalidRequest: 400,
  MalformedCursor: 400,
  InvalidCredential: 400,
  InvalidDelegationToken: 400,
  MissingJwt: 401,
  BadJwt: 401,
  BadJwtType: 401,
  BadJwtAudience: 401,
  BadJwtIss: 401,
  BadJwtSignature: 401,
  JwtExpired: 401,
  JwtReplayed: 401,
} as const

export type SpaceErrorName = keyof typeof named

export function spaceError(name: SpaceErrorName, message: string): XRPCError {
  return new XRPCError(named[name], message, name)
}
