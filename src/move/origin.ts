// Origin side of account migration: resolving the destination, the migrating-out
// state and the 60-minute migration token that getRepo and getBlob accept as Bearer.
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose'
import type { OutboundGuard } from '../net/guard.js'
import type { Config } from '../config.js'
import type { Db } from '../db/index.js'
import type { Logger } from '../logger.js'
import { getAccount, type AccountRow } from '../account/store.js'
import { xrpcError } from '../errors.js'
import { accountEvent } from '../sequencer/index.js'
import { newJti, type TokenKeys } from '../account/session-tokens.js'
import { readCapped } from '../outbound.js'

export const MIGRATION_TOKEN_TTL_S = 60 * 60
const FETCH_TIMEOUT_MS = 5000
const MAX_DOC_BYTES = 64 * 1024

export type Destination = { did: string; endpoint: string }

const bad = (why: string) => xrpcError('BadDestination', `The destination does not resolve: ${why}`)

/** step 1 and 2: `to` as a URL (HTTPS outside development mode), its did.json */
export async function resolveDestination(to: string, outbound: OutboundGuard, ownDid: string): Promise<Destination> {
  let url: URL
  try {
    url = new URL(to)
  } catch {
    throw bad('`to` is not a URL')
  }
  if (!outbound.allowsScheme(url)) throw bad('`to` must be an https URL')
  const docUrl = new URL('/.well-known/did.json', url)
  // one answer for a refused, closed, silent or failing host, so the error probes nothing
  const unreachable = () => bad('its DID document could not be fetched')
  let text: string
  try {
    const res = await outbound.request(docUrl, {
      headersTimeout: FETCH_TIMEOUT_MS,
      bodyTimeout: FETCH_TIMEOUT_MS,
      signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      headers: { accept: 'application/did+ld+json, application/json' },
    })
    if (res.statusCode !== 200) {
      await res.body.dump()
      throw unreachable()
    }
    const bytes = await readCapped(res.body, MAX_DOC_BYTES)
    if (!bytes) throw bad('the DID document is too large')
    text = bytes.toString('utf8')
  } catch (err) {
    if ((err as { error?: string }).error === 'BadDestination') throw err
    throw unreachable()
  }
  let doc: any
  try {
    doc = JSON.parse(text)
  } catch {
    throw bad('the DID document is not JSON')
  }
  if (!doc || typeof doc !== 'object' || typeof doc.id !== 'string' || !/^did:[a-z]+:[a-zA-Z0-9._:%-]+$/.test(doc.id)) {
    throw bad('the DID document has no valid id')
  }
  const services = Array.isArray(doc.service) ? doc.service : []
  const svc = services.find((s: any) => s && s.type === 'AtprotoPersonalDataServer')
  if (!svc || typeof svc.serviceEndpoint !== 'string') throw bad('the DID document has no AtprotoPersonalDataServer service')
  let endpoint: URL
  try {
    endpoint = new URL(svc.serviceEndpoint)
  } catch {
    throw bad('the service endpoint is not a URL')
  }
  if (endpoint.protocol !== 'https:' && endpoint.protocol !== 'http:') throw bad('the service endpoint is not an http(s) URL')
  if (doc.id === ownDid) throw bad('it is this server')
  return { did: doc.id, endpoint: svc.serviceEndpoint.replace(/\/+$/, '') }
}

type Deps = { db: Db; config: Pick<Config, 'serviceDid'>; tokenKeys: TokenKeys; logger: Logger; outbound: OutboundGuard }

/** steps 3 to 5: migrating-out, the token, the best-effort `#account` event */
export async function startMigrationOut(deps: Deps, account: AccountRow, to: string) {
  const destination = await resolveDestination(to, deps.outbound, deps.config.serviceDid)
  await deps.db
    .updateTable('account')
    .set({ migration_state: 'migrating-out', migration_destination: destination.did })
    .where('did', '=', account.did)
    .execute()
  const token = await mintMigrationToken(deps.tokenKeys, account.did, destination.did)
  try {
    // the account's status is unchanged; consumers are told it is leaving
    await accountEvent(deps.db, account.did, 'deactivated')
  } catch (err) {
    deps.logger.warn({ err: String(err), did: account.did }, 'requestAccountMigrate: #account event not emitted')
  }
  return { token, destination }
}

export function mintMigrationToken(keys: TokenKeys, iss: string, aud: string) {
  const now = Math.floor(Date.now() / 1000)
  return new SignJWT({ iss, aud, iat: now, exp: now + MIGRATION_TOKEN_TTL_S, jti: newJti() })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .sign(keys.secret)
}

export type MigrationCredentials = { type: 'migration'; did: string; account: AccountRow }

/**
 * A Bearer token on getRepo/getBlob: a migration token of this server (HS256 with our secret,
 * `aud` the destination the account is moving to, unexpired) yields the account it was issued
 * to; anything else that is not one of ours (session tokens, other services' tokens) is ignored
 * and the call stays anonymous.
 */
export async function verifyMigrationToken(
  deps: { db: Db; tokenKeys: TokenKeys },
  token: string,
): Promise<MigrationCredentials | undefined> {
  let payload: Record<string, unknown>
  try {
    ;({ payload } = await jwtVerify(token, deps.tokenKeys.secret, { algorithms: ['HS256'] }))
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired && isMigrationShaped(err.payload, deps.tokenKeys.serviceDid)) {
      throw xrpcError('ExpiredToken', 'The migration token has expired')
    }
    return undefined
  }
  if (!isMigrationShaped(payload, deps.tokenKeys.serviceDid)) return undefined
  const account = await getAccount(deps.db, payload.iss as string)
  if (!account || account.migration_state !== 'migrating-out' || account.migration_destination !== payload.aud) {
    throw xrpcError('InvalidToken', 'The migration token does not match a migration in progress')
  }
  return { type: 'migration', did: account.did, account }
}

// session tokens carry `sub` and our own DID as audience; migration tokens name another service
function isMigrationShaped(p: Record<string, unknown> | undefined, ownDid: string) {
  return !!p && typeof p.iss === 'string' && typeof p.aud === 'string' && p.aud !== ownDid && p.sub === undefined && p.lxm === undefined
}
