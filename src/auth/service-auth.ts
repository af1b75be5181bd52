// Service-auth tokens of part 2 §4.7 with DECISIONS.md 7: for another service, ES256K signed with
// the account's repository key (verifiable from the DID document); for this server's own DID,
// HS256 with PDS_JWT_SECRET. Claims iss, aud, lxm (when given), iat, exp, jti.
import { k256Keypair } from '../identity/k256.js'
import { SignJWT } from 'jose'
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { signEs256k } from '../oauth/es256k.js'
import { newJti } from './session-tokens.js'

export const SERVICE_AUTH_MAX_TTL_S = 60

type Deps = Pick<Services, 'db' | 'tokenKeys'>

export async function mintServiceAuth(
  deps: Deps,
  req: { iss: string; aud: string; lxm?: string; exp?: number },
): Promise<string> {
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
