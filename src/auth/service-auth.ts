// Service-auth tokens, both ways.
// Outgoing: signed for their audience: for another service, ES256K with the account's repository
// key (verifiable from the DID document); for this server's own DID, HS256 with PDS_JWT_SECRET.
// Claims iss, aud, lxm (when given), iat, exp, jti.
// Incoming: a token another party minted for one of our methods (a user's token on uploadBlob or
// createAccount, the moderation service's on the moderator methods), checked as the network's
// revised rules say: `aud` this server's DID, bare or as `did#atproto_pds`; `lxm` present and the
// called method; unexpired; signed by the verification method the `kid` header names in the
// issuer's DID document (by default `#atproto`, or `#atproto_label` for a `did#atproto_labeler`
// issuer).
import { timingSafeEqual, createHmac } from 'node:crypto'
import { formatDidKey, multibaseToBytes, parseDidKey, verifySignature } from '@atproto/crypto'
import { base64url } from 'jose'
import { k256Keypair } from '../identity/k256.js'
import { SignJWT } from 'jose'
import type { Services } from '../context.js'
import { xrpcError } from '../errors.js'
import { decodeParts, signEs256k, verifyEs256k } from '../jwt/es256k.js'
import { plcData } from '../identity/directory.js'
import { latestOp } from '../identity/plc.js'
import type { DidResolver, ServiceDidDoc } from '../identity/did-resolver.js'
import { newJti } from '../account/session-tokens.js'

export const SERVICE_AUTH_MAX_TTL_S = 60
/** this server's service entry in its own DID document: a token may name it in `aud` */
export const OWN_SERVICE_ID = 'atproto_pds'

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

/** the audience a proxied call's token names: the service's DID, or `did#serviceId` when the
 *  operator turned PDS_SERVICE_AUTH_AUD_SERVICE_ID on (services that follow the revised rules) */
export function proxyAudience(config: Pick<Services['config'], 'serviceAuthAudServiceId'>, did: string, serviceId: string): string {
  return config.serviceAuthAudServiceId ? `${did}${serviceId.startsWith('#') ? '' : '#'}${serviceId}` : did
}

/** a verified inbound service token: `iss` as sent (it may carry a fragment), `did` its DID part */
export type ServiceCredentials = { type: 'service'; iss: string; did: string; aud: string; lxm: string }

export type VerifyDeps = Pick<Services, 'db' | 'config' | 'tokenKeys'> & { didResolver?: DidResolver }

/** JWT types that are never service tokens: OAuth access tokens, our refresh tokens, DPoP proofs */
const NOT_SERVICE_TYP = new Set(['at+jwt', 'refresh+jwt', 'dpop+jwt'])

/**
 * Verifies a service token presented to method `lxm`. `issuers`: the only `iss` values accepted
 * (the moderation service); without it, a bare DID (a user). Throws 401 with the reference
 * PDS's error names, so the calling service can tell what it got wrong.
 */
export async function verifyServiceToken(
  deps: VerifyDeps,
  jwt: string,
  lxm: string,
  opts: { issuers?: readonly string[]; anyAudience?: boolean } = {},
): Promise<ServiceCredentials> {
  const parts = decodeParts(jwt)
  if (!parts || jwt.split('.').length !== 3) throw xrpcError('BadJwt', 'poorly formatted jwt')
  const { header, payload } = parts
  if (typeof header.typ === 'string' && NOT_SERVICE_TYP.has(header.typ.toLowerCase())) {
    throw xrpcError('BadJwtType', `Invalid jwt type "${header.typ}"`)
  }
  const { iss, aud, exp } = payload
  if (typeof iss !== 'string' || typeof aud !== 'string' || typeof exp !== 'number') throw xrpcError('BadJwt', 'poorly formatted jwt')
  if (exp <= Math.floor(Date.now() / 1000)) throw xrpcError('JwtExpired', 'jwt expired')
  const own = deps.tokenKeys.serviceDid
  // a space's write notification is addressed to its authority, which the handler checks
  if (opts.anyAudience ? !/^did:[a-z]+:[a-zA-Z0-9._:%-]+$/.test(aud) : aud !== own && aud !== `${own}#${OWN_SERVICE_ID}`) {
    throw xrpcError('BadJwtAudience', 'jwt audience does not match service did')
  }
  // an XRPC call's token names its method: one minted for another method, or for none, is refused
  if (payload.lxm !== lxm) {
    throw xrpcError(
      'BadJwtLexiconMethod',
      payload.lxm === undefined
        ? `missing jwt lexicon method ("lxm"). must match: ${lxm}`
        : `bad jwt lexicon method ("lxm"). must match: ${lxm}`,
    )
  }
  const hash = iss.indexOf('#')
  const did = hash < 0 ? iss : iss.slice(0, hash)
  if (!/^did:[a-z]+:[a-zA-Z0-9._:%-]+$/.test(did) || (hash >= 0 && !/^[a-zA-Z0-9._~-]+$/.test(iss.slice(hash + 1)))) {
    throw xrpcError('BadJwtIss', 'jwt iss is not a valid did')
  }
  if (opts.issuers ? !opts.issuers.includes(iss) : hash >= 0) throw xrpcError('UntrustedIss', 'Untrusted issuer')

  if (header.alg === 'HS256' && !opts.anyAudience) {
    // getServiceAuth's own tokens for this server: only this server could have signed them
    if (!(await verifyOwnHs256(deps, jwt))) throw xrpcError('BadJwtSignature', 'jwt signature does not match jwt issuer')
    return { type: 'service', iss, did, aud, lxm }
  }
  const methodId = keyIdOf(header.kid, did, iss)
  let key = await verificationKey(deps, did, methodId, false)
  let ok = key ? await checkSignature(jwt, header.alg, key) : false
  if (!ok) {
    // the issuer may have rotated its key since its document was cached
    const fresh = await verificationKey(deps, did, methodId, true)
    if (fresh && fresh !== key) ok = await checkSignature(jwt, header.alg, fresh)
    key ??= fresh
  }
  if (!key) throw xrpcError('BadJwtSignature', `the DID document of ${did} has no #${methodId} key`)
  if (!ok) throw xrpcError('BadJwtSignature', 'jwt signature does not match jwt issuer')
  return { type: 'service', iss, did, aud, lxm }
}

/** the verification method's id (without `#`) the token is signed with */
function keyIdOf(kid: unknown, did: string, iss: string): string {
  if (kid !== undefined) {
    if (typeof kid !== 'string') throw xrpcError('BadJwt', 'kid must be a string')
    // `#id` or `<did>#id`, the issuer's own document only
    const at = kid.indexOf('#')
    if (at < 0 || (at > 0 && kid.slice(0, at) !== did) || !/^[a-zA-Z0-9._~-]+$/.test(kid.slice(at + 1))) {
      throw xrpcError('BadJwt', "kid must name a verification method of the issuer's DID document")
    }
    return kid.slice(at + 1)
  }
  return iss.endsWith('#atproto_labeler') ? 'atproto_label' : 'atproto'
}

async function checkSignature(jwt: string, alg: unknown, didKey: string): Promise<boolean> {
  let keyAlg: string
  try {
    keyAlg = parseDidKey(didKey).jwtAlg
  } catch {
    return false
  }
  if (alg !== keyAlg) return false
  if (alg === 'ES256K') return verifyEs256k(jwt, didKey, { allowMalleable: true })
  const [h, p, s] = jwt.split('.')
  try {
    return await verifySignature(didKey, new TextEncoder().encode(`${h}.${p}`), base64url.decode(s), { allowMalleableSig: true })
  } catch {
    return false
  }
}

async function verifyOwnHs256(deps: VerifyDeps, jwt: string): Promise<boolean> {
  const [h, p, s] = jwt.split('.')
  const want = createHmac('sha256', deps.tokenKeys.secret).update(`${h}.${p}`).digest()
  let given: Buffer
  try {
    given = Buffer.from(s, 'base64url')
  } catch {
    return false
  }
  return given.length === want.length && timingSafeEqual(given, want)
}

/**
 * The did:key of verification method `#id` of `did` as the network sees it: for did:plc, the PLC
 * directory's current data (or, without a directory, the local operation log); for did:web, its
 * document (cached by the resolver for an hour; `fresh` fetches it again).
 */
async function verificationKey(deps: VerifyDeps, did: string, id: string, fresh: boolean): Promise<string | undefined> {
  if (did.startsWith('did:plc:')) {
    if (fresh) return undefined // nothing is cached for did:plc
    if (deps.config.plcUrl) {
      const key = (await plcData(deps.config.plcUrl, did))?.verificationMethods?.[id]
      return typeof key === 'string' ? key : undefined
    }
    return (await latestOp(deps.db, did))?.op.verificationMethods[id]
  }
  if (!deps.didResolver) return undefined
  const doc = await deps.didResolver.resolve(did, { fresh })
  return doc ? methodKey(doc, id) : undefined
}

/** the did:key of `did`'s verification method `#id`, as service tokens are checked against it */
export const verificationKeyOf = (deps: VerifyDeps, did: string, id: string, fresh: boolean) => verificationKey(deps, did, id, fresh)

/** a document's verification method `#id` as a did:key */
function methodKey(doc: ServiceDidDoc, id: string): string | undefined {
  for (const m of doc.verificationMethod ?? []) {
    const vm = m as { id?: unknown; type?: unknown; publicKeyMultibase?: unknown }
    if (vm.id !== `#${id}` && vm.id !== `${doc.id}#${id}`) continue
    if (typeof vm.publicKeyMultibase !== 'string') return undefined
    try {
      if (vm.type === 'Multikey') {
        const didKey = `did:key:${vm.publicKeyMultibase}`
        parseDidKey(didKey)
        return didKey
      }
      // the older key types carry the raw compressed point
      if (vm.type === 'EcdsaSecp256k1VerificationKey2019') return formatDidKey('ES256K', multibaseToBytes(vm.publicKeyMultibase))
      if (vm.type === 'EcdsaSecp256r1VerificationKey2019') return formatDidKey('ES256', multibaseToBytes(vm.publicKeyMultibase))
    } catch {
      return undefined
    }
    return undefined
  }
  return undefined
}
