// Passkeys (WebAuthn, through @simplewebauthn/server): registered by a signed-in account, then
// usable as a second factor after the password and for signing in without one (a discoverable
// credential: the credential id names the account). The relying party is this server: its id is
// the public URL's host name, the origin the public URL's. Challenges are kept server-side, taken
// once by a conditional delete, and live five minutes; expired ones are swept in the background.
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server'
import type { Config } from '../../config.js'
import type { Store } from '../../db/schema.js'
import { isUniqueViolation } from '../../db/index.js'
import { dropRecoveryCodesIfUnneeded, issueRecoveryCodes } from './recovery.js'
import { userHandleOf } from './sealing.js'
import { noticeCredentialChange, type NoticeDeps } from '../notices.js'
import { JOBS } from '../../limits.js'

export type { AuthenticationResponseJSON, RegistrationResponseJSON }
export type PasskeyDeps = { db: Store; config: Pick<Config, 'secrets' | 'publicUrl' | 'hostname'> }

const CHALLENGE_TTL_MS = 5 * 60_000
// loaded at the first ceremony: the library and its dependencies weigh ~25 MiB, which a server
// whose users never add a passkey should not carry
const webauthn = () => import('@simplewebauthn/server')
const MAX_NAME = 64

export type Passkey = {
  /** the credential id, base64url */
  id: string
  name: string
  createdAt: string
  lastUsedAt: string | null
  /** synced between devices by its provider (a "multi-device" credential) */
  backedUp: boolean
}

const relyingParty = (config: Pick<Config, 'publicUrl'>) => {
  const url = new URL(config.publicUrl)
  return { rpID: url.hostname, origin: url.origin }
}

async function rememberChallenge(db: Store, challenge: string, purpose: 'register' | 'authenticate', did: string | null) {
  await db
    .insertInto('webauthn_challenge')
    .values({ challenge, purpose, did, expires_at: new Date(Date.now() + CHALLENGE_TTL_MS).toISOString() })
    .execute()
}

const SWEEP_BATCH = JOBS.challengeSweepBatch

/**
 * deletes expired challenges (the server runs it every minute, off any request's path): batches
 * found through the expires_at index, so no delete scans the table or holds the write lock long
 */
export async function sweepExpiredChallenges(db: Store, now = new Date()): Promise<number> {
  const cutoff = now.toISOString()
  let removed = 0
  for (;;) {
    const batch = db.selectFrom('webauthn_challenge').select('challenge').where('expires_at', '<', cutoff).limit(SWEEP_BATCH)
    const res = await db.deleteFrom('webauthn_challenge').where('challenge', 'in', batch).executeTakeFirst()
    const n = Number(res.numDeletedRows)
    removed += n
    if (n < SWEEP_BATCH) return removed
  }
}

/** the challenge the browser signed (from clientDataJSON), taken if it is live and was issued for this purpose */
async function takeChallenge(db: Store, clientDataJSON: unknown, purpose: 'register' | 'authenticate') {
  let challenge: unknown
  try {
    challenge = (JSON.parse(Buffer.from(String(clientDataJSON), 'base64url').toString('utf8')) as { challenge?: unknown }).challenge
  } catch {
    return undefined
  }
  if (typeof challenge !== 'string' || !challenge) return undefined
  return db
    .deleteFrom('webauthn_challenge')
    .where('challenge', '=', challenge)
    .where('purpose', '=', purpose)
    .where('expires_at', '>', new Date().toISOString())
    .returningAll()
    .executeTakeFirst()
}

const cleanName = (name: string | undefined) => (name ?? '').trim().slice(0, MAX_NAME) || 'Passkey'

/** the options for `navigator.credentials.create` (as JSON); the account's passkeys are excluded */
export async function passkeyRegistrationOptions(
  deps: PasskeyDeps,
  account: { did: string; handle: string },
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const { db, config } = deps
  const existing = await db.selectFrom('passkey').select(['credential_id', 'transports']).where('did', '=', account.did).execute()
  const options = await (
    await webauthn()
  ).generateRegistrationOptions({
    rpName: config.hostname,
    rpID: relyingParty(config).rpID,
    userName: account.handle,
    userDisplayName: account.handle,
    userID: new Uint8Array(userHandleOf(config, account.did)),
    attestationType: 'none',
    excludeCredentials: existing.map((c) => ({ id: c.credential_id, transports: JSON.parse(c.transports) as string[] })),
    // discoverable, so the same passkey also signs in without a password
    authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
  })
  await rememberChallenge(db, options.challenge, 'register', account.did)
  return options
}

export type RegistrationResult = { ok: true; passkey: Passkey; recoveryCodes?: string[] } | { ok: false; message: string }

/**
 * checks the browser's answer to passkeyRegistrationOptions and stores the passkey under `name`;
 * the account's first passkey or app also brings recovery codes, to show once
 */
export async function verifyPasskeyRegistration(
  deps: PasskeyDeps & NoticeDeps,
  did: string,
  response: RegistrationResponseJSON,
  name?: string,
): Promise<RegistrationResult> {
  const { db, config } = deps
  const fail = (message: string) => ({ ok: false as const, message })
  const challenge = await takeChallenge(db, response?.response?.clientDataJSON, 'register')
  if (!challenge || challenge.did !== did) return fail('The passkey request expired or was already used; start again')
  const { rpID, origin } = relyingParty(config)
  let verified
  try {
    verified = await (
      await webauthn()
    ).verifyRegistrationResponse({
      response,
      expectedChallenge: challenge.challenge,
      expectedOrigin: origin,
      expectedRPID: rpID,
      requireUserVerification: false,
    })
  } catch (err) {
    return fail(`The passkey could not be verified: ${(err as Error).message}`)
  }
  if (!verified.verified) return fail('The passkey could not be verified')
  const info = verified.registrationInfo
  const hadStrongFactor = await hasStrongFactor(db, did)
  const now = new Date().toISOString()
  const row = {
    credential_id: info.credential.id,
    did,
    public_key: Buffer.from(info.credential.publicKey).toString('base64url'),
    counter: info.credential.counter,
    transports: JSON.stringify(info.credential.transports ?? response.response.transports ?? []),
    name: cleanName(name),
    backed_up: info.credentialBackedUp ? 1 : 0,
    created_at: now,
    last_used_at: null,
  }
  // added by a signed-in owner: confirmed under the password the account has now
  const gen = await db.selectFrom('account').select('credential_gen').where('did', '=', did).executeTakeFirst()
  try {
    await db
      .insertInto('passkey')
      .values({ ...row, confirmed_gen: gen?.credential_gen ?? 0 })
      .execute()
  } catch (err) {
    if (isUniqueViolation(err)) return fail('This passkey is already registered')
    throw err
  }
  const recoveryCodes = hadStrongFactor ? undefined : await issueRecoveryCodes(db, config, did)
  await noticeCredentialChange(deps, did, { kind: 'passkey', name: row.name, change: 'added' }, new Date(now))
  return { ok: true, passkey: viewOf(row), ...(recoveryCodes ? { recoveryCodes } : {}) }
}

async function hasStrongFactor(db: Store, did: string) {
  const totp = await db.selectFrom('totp').select('did').where('did', '=', did).where('confirmed_at', 'is not', null).executeTakeFirst()
  const passkey = await db.selectFrom('passkey').select('did').where('did', '=', did).executeTakeFirst()
  return !!totp || !!passkey
}

const viewOf = (r: {
  credential_id: string
  name: string
  created_at: string
  last_used_at: string | null
  backed_up: number
}): Passkey => ({
  id: r.credential_id,
  name: r.name,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  backedUp: r.backed_up === 1,
})

export async function listPasskeys(db: Store, did: string): Promise<Passkey[]> {
  const rows = await db.selectFrom('passkey').selectAll().where('did', '=', did).orderBy('created_at').execute()
  return rows.map(viewOf)
}

/** false when `did` has no passkey `id` */
export async function renamePasskey(db: Store, did: string, id: string, name: string): Promise<boolean> {
  const res = await db
    .updateTable('passkey')
    .set({ name: cleanName(name) })
    .where('did', '=', did)
    .where('credential_id', '=', id)
    .executeTakeFirst()
  return res.numUpdatedRows === 1n
}

/** false when `did` has no passkey `id`; recovery codes go with the last passkey when no app is on; the owner is told */
export async function removePasskey(deps: NoticeDeps, did: string, id: string): Promise<boolean> {
  const { db } = deps
  const gone = await db.deleteFrom('passkey').where('did', '=', did).where('credential_id', '=', id).returning('name').executeTakeFirst()
  await dropRecoveryCodesIfUnneeded(db, did)
  if (gone) await noticeCredentialChange(deps, did, { kind: 'passkey', name: gone.name, change: 'removed' })
  return !!gone
}

/**
 * the options for `navigator.credentials.get` (as JSON). With `did`: a second factor after the
 * password, offering that account's passkeys. Without: a password-less sign-in, offering none so
 * the browser lists the discoverable passkeys it holds for this server, user verification required.
 */
export async function passkeyAuthenticationOptions(deps: PasskeyDeps, did?: string): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const { db, config } = deps
  const allow = did ? await db.selectFrom('passkey').select(['credential_id', 'transports']).where('did', '=', did).execute() : []
  const options = await (
    await webauthn()
  ).generateAuthenticationOptions({
    rpID: relyingParty(config).rpID,
    allowCredentials: allow.map((c) => ({ id: c.credential_id, transports: JSON.parse(c.transports) as string[] })),
    userVerification: did ? 'preferred' : 'required',
  })
  await rememberChallenge(db, options.challenge, 'authenticate', did ?? null)
  return options
}

/**
 * checks the browser's answer to passkeyAuthenticationOptions: the account the passkey belongs to,
 * or undefined. `did` given: the passkey must be that account's and the options must have been
 * made for it. The signature counter must grow (when the authenticator keeps one), so a cloned
 * authenticator is refused.
 */
export async function verifyPasskeyAuthentication(
  deps: PasskeyDeps,
  response: AuthenticationResponseJSON,
  did?: string,
): Promise<{ did: string; passkeyId: string } | undefined> {
  const { db, config } = deps
  const challenge = await takeChallenge(db, response?.response?.clientDataJSON, 'authenticate')
  if (!challenge || (did !== undefined && challenge.did !== did)) return undefined
  if (typeof response.id !== 'string') return undefined
  const stored = await db.selectFrom('passkey').selectAll().where('credential_id', '=', response.id).executeTakeFirst()
  if (!stored || (challenge.did !== null && stored.did !== challenge.did)) return undefined
  // a discoverable credential names its user: it must be the handle this server gave the account
  const userHandle = response.response.userHandle
  if (userHandle && userHandle !== Buffer.from(userHandleOf(config, stored.did)).toString('base64url')) return undefined
  const { rpID, origin } = relyingParty(config)
  let verified
  try {
    verified = await (
      await webauthn()
    ).verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge.challenge,
      expectedOrigin: origin,
      expectedRPID: rpID,
      credential: {
        id: stored.credential_id,
        publicKey: new Uint8Array(Buffer.from(stored.public_key, 'base64url')),
        counter: Number(stored.counter),
        transports: JSON.parse(stored.transports) as string[],
      },
      requireUserVerification: challenge.did === null,
    })
  } catch {
    return undefined
  }
  if (!verified.verified) return undefined
  // the conditional update keeps two racing assertions with one counter value from both passing
  const res = await db
    .updateTable('passkey')
    .set({ counter: verified.authenticationInfo.newCounter, last_used_at: new Date().toISOString() })
    .where('credential_id', '=', stored.credential_id)
    .where('counter', '=', stored.counter)
    .executeTakeFirst()
  if (res.numUpdatedRows !== 1n) return undefined
  return { did: stored.did, passkeyId: stored.credential_id }
}

/**
 * whether the passkey was confirmed with the password under the account's current credential
 * generation: after a password change or reset, a passkey alone no longer signs in until the
 * new password is given once with it
 */
export async function passkeyCurrent(db: Store, passkeyId: string): Promise<boolean> {
  const row = await db
    .selectFrom('passkey')
    .innerJoin('account', 'account.did', 'passkey.did')
    .select(['passkey.confirmed_gen', 'account.credential_gen'])
    .where('passkey.credential_id', '=', passkeyId)
    .executeTakeFirst()
  return !!row && row.confirmed_gen === row.credential_gen
}

/** the passkey was just used together with the account's password: it is current again */
export async function confirmPasskey(db: Store, did: string, passkeyId: string): Promise<void> {
  const gen = await db.selectFrom('account').select('credential_gen').where('did', '=', did).executeTakeFirst()
  if (!gen) return
  await db
    .updateTable('passkey')
    .set({ confirmed_gen: gen.credential_gen })
    .where('did', '=', did)
    .where('credential_id', '=', passkeyId)
    .execute()
}
