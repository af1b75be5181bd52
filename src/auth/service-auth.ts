// Service-auth tokens signed for their audience: for another service, ES256K signed with
// the account's repository key (verifiable from the DID document); for this server's own DID,
// HS256 with PDS_JWT_SECRET. Claims iss, aud, lxm (when given), iat, exp, jti.
import { k256Keypair } from '../identity/k256.js'
import { SignJWT } from 'jose'
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { decodeParts, signEs256k, verifyEs256k } from '../oauth/es256k.js'
import { plcData } from '../identity/directory.js'
import { latestOp } from '../identity/plc.js'
import { newJti } from './session-tokens.js'

export const SERVICE_AUTH_MAX_TTL_S = 60

type Deps = Pick<Services, 'db' | 'tokenKeys'>

export async function mintServiceAuth(deps: Deps, req: { iss: string; aud: string; lxm?: string; exp?: number }): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  const exp = req.exp ?? now + SERVICE_AUTH_MAX_TTL_S
  if (exp <= now) throw xrpcError('BadExpiration', 'exp is in the past')
  if (exp > now + SERVICE_AUTH_MAX_TTL_S) {
    throw xrpcError('BadExpiration', `exp may be at most ${SERVICE_AUTH_MAX_TTL_S} seconds in the future`)
  }
  if (!/^did:[a-z]+:[a-zA-Z0-9._:%-]+(#[a-zA-Z0-9._~-]+)?$/.test(req.aud)) {
    throw xrpcError('InvalidRequest', 'aud must be a DID, optionally with a #service fragment')
  }
  const claims = {
    iss: req.iss,
    aud: req.aud,
    ...(req.lxm ? { lxm: req.lxm } : {}),
    iat: now,
    exp,
    jti: newJti(),
  }
  const ownDid = deps.tokenKeys.serviceDid
  if (req.aud === ownDid || req.aud.startsWith(ownDid + '#')) {
    return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(deps.tokenKeys.secret)
  }
  const row = await deps.db.selectFrom('signing_key').select('private_key_hex').where('did', '=', req.iss).executeTakeFirst()
  if (!row) throw xrpcError('InvalidRequest', 'This account has no repository signing key on this server')
  const keypair = await k256Keypair(row.private_key_hex)
  return signEs256k(keypair, { typ: 'JWT' }, claims)
}

export type ServiceCredentials = { type: 'service'; iss: string; aud: string; lxm: string }

type VerifyDeps = Pick<Services, 'db' | 'config' | 'tokenKeys'>

/**
 * A service-auth JWT another server minted for this one (the standard atproto migration:
 * createAccount with `did`): ES256K, `aud` this server's DID, `lxm` the called method, unexpired,
 * signed by the `atproto` key of the issuer's DID document (from the PLC directory when one is
 * configured, else the local operation log).
 */
export async function verifyServiceAuth(deps: VerifyDeps, jwt: string, lxm: string): Promise<ServiceCredentials> {
  const invalid = (why: string) => xrpcError('InvalidToken', `Service auth token: ${why}`)
  const parts = decodeParts(jwt)
  if (!parts) throw invalid('malformed')
  const { header, payload } = parts
  if (header.alg !== 'ES256K') throw invalid('alg must be ES256K')
  const iss = typeof payload.iss === 'string' ? payload.iss.split('#')[0] : ''
  if (!/^did:plc:[a-z2-7]{24}$/.test(iss)) throw invalid('iss must be a did:plc')
  if (payload.aud !== deps.tokenKeys.serviceDid) throw invalid(`aud must be ${deps.tokenKeys.serviceDid}`)
  if (payload.lxm !== lxm) throw invalid(`lxm must be ${lxm}`)
  const now = Math.floor(Date.now() / 1000)
  if (typeof payload.exp !== 'number' || payload.exp <= now) throw xrpcError('ExpiredToken', 'Service auth token has expired')
  const key = await atprotoKeyOf(deps, iss)
  if (!key) throw invalid(`the DID document of ${iss} has no atproto key`)
  if (!(await verifyEs256k(jwt, key))) throw invalid('signature does not verify against the DID document')
  return { type: 'service', iss, aud: payload.aud, lxm }
}

async function atprotoKeyOf(deps: VerifyDeps, did: string): Promise<string | undefined> {
  if (deps.config.plcUrl) {
    // the operation data names keys as did:key (documents of older directories use another encoding)
    const data = await plcData(deps.config.plcUrl, did)
    const key = data?.verificationMethods?.atproto
    return typeof key === 'string' ? key : undefined
  }
  const latest = await latestOp(deps.db, did)
  return latest?.op.verificationMethods.atproto
}
