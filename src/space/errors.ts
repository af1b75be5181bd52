// The named XRPC errors the space primitives raise, each with its HTTP status, so bad input
// reaching a handler through them answers a clear 4xx without the handler translating anything.
import { XRPCError } from '@atproto/xrpc-server'

const named = {
  // the space host: simplespace management, credentials, notifications
  SpaceNotFound: 400,
  SpaceDeleted: 400,
  SpaceAlreadyExists: 400,
  UnsupportedPolicy: 400,
  UnsupportedAppAccess: 400,
  NotSpaceOwner: 400,
  UserNotAuthorized: 400,
  AppNotAuthorized: 400,
  InvalidClientAttestation: 400,
  ServiceNotResolvable: 400,
  MissingDpopProof: 401,
  BadDpopProof: 401,
  DpopKeyMismatch: 401,
  DpopProofExpired: 401,
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
  // permissioned repos: the lexicons' names, 400 as the reference answers them
  RecordNotFound: 400,
  RecordAlreadyExists: 400,
  RepoNotFound: 400,
  RepoTakendown: 400,
  RepoSuspended: 400,
  RepoDeactivated: 400,
  BlobNotFound: 400,
  Forbidden: 403,
} as const

export type SpaceErrorName = keyof typeof named

export function spaceError(name: SpaceErrorName, message: string): XRPCError {
  return new XRPCError(named[name], message, name)
}
