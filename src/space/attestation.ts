// Client attestations: an app proves its OAuth client_id to a space host that gates on app
// identity by a short-lived JWT signed with a key of its published JWKS (the client metadata
// document's `jwks`, or its `jwks_uri`), addressed to the authority's space host, single use.
import { compactVerify, importJWK, type JWK } from 'jose'
import type { Services } from '../context.js'
import { readCapped } from '../outbound.js'
import { decodeParts } from '../jwt/es256k.js'
import { spaceError } from './errors.js'
import { spaceHostAudience, type SpaceRef } from './refs.js'
import { EXP_SKEW_S } from './tokens.js'

export const ATTESTATION_TYP = 'atproto-client-attestation+jwt'
const CACHE_TTL_MS = 60 * 60 * 1000
const CACHE_MAX = 500
const MAX_DOC_BYTES = 64 * 1024
const TIMEOUT_MS = 5000
// an attestation is short-lived: one promising more than this is refused
const MAX_LIFETIME_S = 300

const jwksCache = new Map<string, { keys: JWK[]; expires: number }>()

type Deps = Pick<Services, 'outbound' | 'oauth'>

/** the attested client_id; InvalidClientAttestation for any failure */
export async function verifyClientAttestation(deps: Deps, jwt: string, space: SpaceRef): Promise<string> {
  const bad = (why: string) => spaceError('InvalidClientAttestation', `The client attestation is invalid: ${why}`)
  const parts = decodeParts(jwt)
  if (!parts || jwt.split('.').length !== 3) throw bad('not a compact JWS')
  const { header, payload } = parts
  if (header.typ !== ATTESTATION_TYP) throw bad(`typ must be ${ATTESTATION_TYP}`)
  // the keys OAuth clients publish are P-256: the atproto OAuth profile signs client auth ES256
  if (header.alg !== 'ES256') throw bad('alg must be ES256')
  if (typeof header.kid !== 'string' || !header.kid) throw bad('kid is missing')
  const { iss, sub, aud, exp, jti } = payload
  if (typeof iss !== 'string' || iss !== sub) throw bad('iss and sub must both be the client_id')
  if (aud !== spaceHostAudience(space.authority)) throw bad(`aud must be ${spaceHostAudience(space.authority)}`)
  const now = Math.floor(Date.now() / 1000)
  if (typeof exp !== 'number' || exp + EXP_SKEW_S < now) throw bad('it has expired')
  if (exp - now > MAX_LIFETIME_S) throw bad(`it may live at most ${MAX_LIFETIME_S} s`)
  if (typeof jti !== 'string' || !jti) throw bad('jti is missing')
  let url: URL
  try {
    url = new URL(iss)
  } catch {
    throw bad('the client_id must be the URL of its metadata document')
  }
  let keys: JWK[]
  try {
    keys = await clientKeys(deps, iss, url)
  } catch (err) {
    if (err instanceof AttestationError) throw bad(err.message)
    throw bad('the client metadata or its keys could not be fetched')
  }
  const jwk = keys.find(
    (k) => k.kid === header.kid && (k.use === undefined || k.use === 'sig') && (k.alg === undefined || k.alg === header.alg),
  )
  if (!jwk) throw bad(`the client publishes no signing key ${header.kid}`)
  try {
    await compactVerify(jwt, await importJWK(jwk, header.alg))
  } catch {
    throw bad('the signature does not verify')
  }
  if (!(await deps.oauth.replay.firstSeen(`space-attestation ${iss} ${jti}`, `space-attestation ${iss}`, (exp + EXP_SKEW_S) * 1000)))
    throw bad('it was already used')
  return iss
}

class AttestationError extends Error {}

async function clientKeys(deps: Deps, clientId: string, url: URL): Promise<JWK[]> {
  const hit = jwksCache.get(clientId)
  if (hit && hit.expires > Date.now()) return hit.keys
  const metadata = (await getJson(deps, url.href)) as { client_id?: unknown; jwks?: { keys?: unknown }; jwks_uri?: unknown }
  // as at the authorization server: a document speaks only for the client_id it is published at
  if (metadata.client_id !== clientId) throw new AttestationError('the client metadata names another client_id')
  let jwks = metadata.jwks
  if (!jwks && typeof metadata.jwks_uri === 'string') jwks = await getJson(deps, metadata.jwks_uri)
  // a document's junk entries are skipped rather than trusted to be keys
  const keys = Array.isArray(jwks?.keys)
    ? (jwks.keys as unknown[]).filter((k): k is JWK => !!k && typeof k === 'object' && !Array.isArray(k))
    : []
  if (jwksCache.size >= CACHE_MAX) jwksCache.delete(jwksCache.keys().next().value as string)
  jwksCache.set(clientId, { keys, expires: Date.now() + CACHE_TTL_MS })
  return keys
}

// through the outbound guard: a client_id may not make this server reach private addresses
async function getJson(deps: Deps, url: string): Promise<Record<string, unknown>> {
  const res = await deps.outbound.request(url, {
    headersTimeout: TIMEOUT_MS,
    bodyTimeout: TIMEOUT_MS,
    signal: AbortSignal.timeout(TIMEOUT_MS),
    headers: { accept: 'application/json' },
  })
  if (res.statusCode !== 200) {
    await res.body.dump()
    throw new Error(`${url} answered ${res.statusCode}`)
  }
  const bytes = await readCapped(res.body, MAX_DOC_BYTES)
  if (!bytes) throw new Error(`${url} is too large`)
  const doc = JSON.parse(bytes.toString('utf8'))
  if (!doc || typeof doc !== 'object') throw new Error(`${url} is not a JSON object`)
  return doc
}
