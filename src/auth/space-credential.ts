// The two DPoP-bound checks of Spaces. A space credential (`Authorization: DPoP <credential>`)
// is checked as a host accepting it must: the credential's own claims and signature, then a proof
// with `ath` made by the key the credential is bound to, its jti remembered in the replay store
// OAuth DPoP uses (shared between processes). The exchange (`Authorization: Bearer <delegation
// token>`) takes a proof without `ath`, and the delegation token is single use in the same store.
import type { MethodAuthContext } from '@atproto/xrpc-server'
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { checkDpopProof, DpopBusy, DpopError, rememberDpopProof, type CheckedProof } from '../jwt/dpop.js'
import { decodeParts } from '../jwt/es256k.js'
import { ReplayStoreFull, ReplayStoreUnavailable } from '../jwt/replay.js'
import { spaceError } from '../space/errors.js'
import { verificationKeyOf } from './service-auth.js'
import {
  CREDENTIAL_TYP,
  DELEGATION_TYP,
  peekTokenType,
  verifyDelegationToken,
  verifySpaceCredential,
  requireCredentialFor,
  type CredentialClaims,
  type DelegationClaims,
  type KeyResolver,
} from '../space/tokens.js'
import type { SpaceReader } from '../space/repo-read.js'

/** a request carrying a space credential: any repo of `claims.space` may be read */
export type SpaceCredentialCredentials = { type: 'spaceCredential'; claims: CredentialClaims }
/** getSpaceCredential's caller: an app acting for `claims.iss`, holding the DPoP key `jkt` */
export type DelegationCredentials = { type: 'delegation'; claims: DelegationClaims; jkt: string }

/** who reads a permissioned repo: the account itself (its own repo only), or a credential holder
 *  (any repo of the credential's space; InvalidCredential for another space) */
export function spaceReader(creds: { type: 'access'; did: string } | SpaceCredentialCredentials, space: string): SpaceReader {
  if (creds.type === 'access') return { did: creds.did }
  requireCredentialFor(creds.claims, space)
  return {}
}

export type SpaceAuthDeps = Pick<Services, 'config' | 'db' | 'tokenKeys' | 'oauth'> & Partial<Pick<Services, 'didResolver'>>

// a proof may not come from further in the future than this
const PROOF_FUTURE_S = 5
const PROOF_MAX_AGE_S = 60

/** whether the request presents a space credential, as DPoP or (refused later) as Bearer; the
 *  token's typ is peeked unverified, for routing only */
export function carriesSpaceCredential(ctx: MethodAuthContext): boolean {
  const m = /^(dpop|bearer)\s+(\S+)/i.exec(ctx.req.headers.authorization ?? '')
  return m !== null && peekTokenType(m[2]) === CREDENTIAL_TYP
}

export async function spaceCredentialAuth(ctx: MethodAuthContext, deps: SpaceAuthDeps): Promise<SpaceCredentialCredentials> {
  const header = ctx.req.headers.authorization
  if (!header) throw spaceError('MissingJwt', 'A space credential is required')
  const m = /^(\S+)\s+(.+)$/.exec(header)
  const scheme = m?.[1].toLowerCase()
  const token = m?.[2].trim()
  if (scheme !== 'dpop' || !token) {
    if (scheme === 'bearer' && token && peekTokenType(token) === CREDENTIAL_TYP)
      throw xrpcError('InvalidToken', 'A space credential is presented as DPoP, never as Bearer', 400)
    throw spaceError('MissingJwt', 'A space credential is required (Authorization: DPoP <credential>)')
  }
  const claims = await verifySpaceCredential(token, { keyFor: keyResolver(requireResolver(deps)) })
  const proof = await checkProof(ctx, deps, token)
  if (proof.jkt !== claims.jkt) throw spaceError('DpopKeyMismatch', 'The DPoP proof is not signed by the key the credential is bound to')
  await remember(ctx, deps, proof)
  return { type: 'spaceCredential', claims }
}

export async function delegationAuth(ctx: MethodAuthContext, deps: SpaceAuthDeps): Promise<DelegationCredentials> {
  const header = ctx.req.headers.authorization
  const m = header ? /^(\S+)\s+(.+)$/.exec(header) : null
  if (!m || m[1].toLowerCase() !== 'bearer')
    throw spaceError('MissingJwt', 'A delegation token is required (Authorization: Bearer <token>)')
  const token = m[2].trim()
  if (peekTokenType(token) !== DELEGATION_TYP) throw spaceError('BadJwtType', `The token's typ must be ${DELEGATION_TYP}`)
  // the proof first: a token is spent only by a request that could have used it
  const proof = await checkProof(ctx, deps, undefined)
  const replay = deps.oauth.replay
  const claims = await verifyDelegationToken(token, {
    keyFor: keyResolver(requireResolver(deps)),
    claimOnce: (iss, jti, expMs) =>
      guarded(ctx, () => replay.firstSeen(`space-delegation ${iss} ${jti}`, `space-delegation ${iss}`, expMs)),
  })
  await remember(ctx, deps, proof)
  return { type: 'delegation', claims, jkt: proof.jkt }
}

// every check of the proof but its replay: typ, alg, key, signature, htm, htu on the public URL,
// age, and `ath` exactly when a credential comes with it
async function checkProof(ctx: MethodAuthContext, deps: SpaceAuthDeps, credential: string | undefined): Promise<CheckedProof> {
  const req = ctx.req
  const dpop = req.headers.dpop
  if (dpop === undefined) throw spaceError('MissingDpopProof', 'A DPoP proof is required')
  const iat = typeof dpop === 'string' ? decodeParts(dpop)?.payload.iat : undefined
  const now = Date.now() / 1000
  if (typeof iat === 'number' && (iat > now + PROOF_FUTURE_S || iat < now - PROOF_MAX_AGE_S))
    throw spaceError('DpopProofExpired', 'The DPoP proof is too old or from the future')
  try {
    return await checkDpopProof({
      proof: dpop,
      method: req.method ?? 'GET',
      url: deps.config.publicUrl + (req.originalUrl ?? req.url ?? '').split('?')[0],
      accessToken: credential,
    })
  } catch (err) {
    if (err instanceof DpopError) {
      if (credential === undefined && /ath/.test(err.message))
        throw spaceError('BadDpopProof', 'The exchange takes a DPoP proof without ath')
      throw spaceError('BadDpopProof', err.message)
    }
    throw err
  }
}

async function remember(ctx: MethodAuthContext, deps: SpaceAuthDeps, proof: CheckedProof): Promise<void> {
  try {
    await guarded(ctx, () => rememberDpopProof(proof, deps.oauth.replay))
  } catch (err) {
    if (err instanceof DpopError) throw spaceError('JwtReplayed', 'This DPoP proof was already used')
    throw err
  }
}

// a replay store that cannot answer refuses the request, never waves it through
async function guarded<T>(ctx: MethodAuthContext, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    if (err instanceof DpopBusy || err instanceof ReplayStoreFull || err instanceof ReplayStoreUnavailable) {
      ctx.res?.setHeader('Retry-After', '5')
      throw xrpcError('TemporarilyUnavailable', 'Tokens cannot be checked for replay right now; try again shortly')
    }
    throw err
  }
}

/** resolves a token issuer's verification method `kid` (`#atproto` or `#atproto_space`) */
const keyResolver =
  (deps: Pick<Services, 'db' | 'config' | 'tokenKeys' | 'didResolver'>): KeyResolver =>
  (iss, kid, fresh) =>
    verificationKeyOf(deps, iss, kid.replace(/^#/, ''), fresh)

function requireResolver(deps: SpaceAuthDeps): SpaceAuthDeps & Pick<Services, 'didResolver'> {
  if (!deps.didResolver) throw new Error('space credentials need the DID resolver')
  return deps as SpaceAuthDeps & Pick<Services, 'didResolver'>
}
