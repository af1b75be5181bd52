// The named XRPC errors of the official lexicons and of this server's additions (docs/decisions.md),
// each with its HTTP status. Handlers throw these; nobody builds error bodies.
import { XRPCError } from '@atproto/xrpc-server'

const named = {
  // request errors
  InvalidRequest: 400,
  HandleNotAvailable: 400,
  EmailNotAvailable: 400,
  AppPasswordNameExists: 400,
  InvalidHandle: 400,
  InvalidEmail: 400,
  InvalidPassword: 400,
  InvalidInviteCode: 400,
  UnsupportedDomain: 400,
  UnresolvableDid: 400,
  IncompatibleDidDoc: 400,
  HandleNotFound: 400,
  BadExpiration: 400,
  BadDestination: 400,
  AccountAlreadyExists: 400,
  MissingReservedKey: 400,
  MismatchedSigningKey: 400,
  MismatchedServiceEndpoint: 400,
  InvalidCar: 400,
  RepoNotEmpty: 400,
  InvalidSwap: 400,
  TokenRequired: 400,
  AccountNotFound: 400,
  BlockNotFound: 400,
  RepoDeactivated: 400,
  RepoTakendown: 400,
  RepoSuspended: 400,
  DidDeactivated: 400,
  UnknownFeed: 400,
  // authentication
  AuthMissing: 401,
  InvalidToken: 401,
  ExpiredToken: 401,
  AuthenticationRequired: 401,
  AccountTakedown: 401,
  AuthFactorTokenRequired: 401,
  // RFC 9449's name, which the official OAuth clients look for
  use_dpop_nonce: 401,
  // service tokens, named as the reference PDS names them (the calling service logs them)
  BadJwt: 401,
  BadJwtType: 401,
  JwtExpired: 401,
  BadJwtAudience: 401,
  BadJwtLexiconMethod: 401,
  BadJwtIss: 401,
  BadJwtSignature: 401,
  UntrustedIss: 401,
  // status gate and scope
  AccountDeactivated: 403,
  AccountDeleted: 403,
  AccountSuspended: 403,
  InsufficientScope: 403,
  // not found
  RecordNotFound: 404,
  BlobNotFound: 404,
  RepoNotFound: 404,
  NotFound: 404,
  DidNotFound: 404,
  HeadNotFound: 404,
  // others
  PayloadTooLarge: 413,
  RateLimitExceeded: 429,
  // a service we depend on (the PLC directory, the mail relay) refused or failed
  UpstreamFailure: 502,
  MethodNotImplemented: 501,
  UpstreamTimeout: 504,
  // shared state this server depends on (the DPoP replay store in Redis, the database) is not
  // answering right now; the request did nothing and may be retried
  TemporarilyUnavailable: 503,
  // the disk under the data directory or the blob store is full: nothing was written; 503 rather
  // than 507, which clients know no name for and report as an internal error
  InsufficientStorage: 503,
} as const

export type ErrorName = keyof typeof named

/**
 * `xrpcError('ExpiredToken', 'Token has been revoked')`; `status` overrides where one method answers
 * another; `cause`, what went wrong underneath, is logged, never sent
 */
export function xrpcError(name: ErrorName, message: string, status?: number, cause?: unknown): XRPCError {
  return new XRPCError(status ?? named[name], message, name, cause === undefined ? undefined : { cause })
}

/**
 * The status gate's 403 for an account in `status`. AccountTakedown is 401 at
 * createSession (the official lexicon's error) but 403 here.
 */
export function statusGateError(status: string): XRPCError {
  switch (status) {
    case 'takendown':
      return xrpcError('AccountTakedown', 'Account has been taken down', 403)
    case 'deactivated':
      return xrpcError('AccountDeactivated', 'Account is deactivated')
    case 'deleted':
      return xrpcError('AccountDeleted', 'Account has been deleted')
    default:
      return xrpcError('AccountSuspended', 'Account is suspended')
  }
}

// ENOSPC/EDQUOT from the file system, EFBIG past a file size limit, SQLite's and PostgreSQL's disk full
const DISK_FULL = new Set(['ENOSPC', 'EDQUOT', 'EFBIG', 'SQLITE_FULL', '53100'])

/** true when `err` (or what it wraps) says the storage under a write is full */
export function isDiskFull(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 5; e = e.cause as typeof e, i++) {
    if (typeof e.code === 'string' && DISK_FULL.has(e.code)) return true
  }
  return false
}
