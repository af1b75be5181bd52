// Device sessions: a cookie of a random id and a random secret names this browser; the server
// keeps only a hash of the secret, so a copy of the database signs nobody in. A page view only
// hands out the cookie: the device row is stored at the browser's first form post (with its form
// token), so anonymous page views never grow the database. Each account that signed in on the
// device gets a row saying when it last signed in here, when a password was last given (a
// passkey alone signs in but is no password), whether that sign-in included a second factor,
// under which credential generation, and whether the person asked to be remembered here.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Request, Response } from 'express'
import type { Store } from '../db/schema.js'
import { readCookie, setCookie } from './cookies.js'
import { checkCsrf } from './csrf.js'

export const DEVICE_COOKIE = 'pds_device'
/** the cookie's lifetime; a device unseen this long is forgotten with its accounts */
export const DEVICE_TTL_S = 365 * 24 * 3600
/** a sign-in without "Remember this device" counts this long at most: the rest of one visit */
export const UNREMEMBERED_MAX_S = 15 * 60
// last_seen_at is rewritten at most this often: a page view should not always cost a write
const TOUCH_EVERY_MS = 24 * 3600 * 1000

export type Device = { id: string; secret: string }
export type DeviceAccount = {
  did: string
  handle: string
  remember: boolean
  authenticatedAt: string
  /** when a password was last given for the account here (a passkey-only sign-in leaves it) */
  passwordAt: string | null
  /** whether the latest sign-in here included a second factor */
  factorGiven: boolean
}

const hashSecret = (secret: string) => createHash('sha256').update(secret).digest('base64url')
const nowIso = () => new Date().toISOString()
const ago = (s: number) => new Date(Date.now() - s * 1000).toISOString()

type Cookie = { id: string; secret: string }
function cookieOf(req: Pick<Request, 'headers'>): Cookie | undefined {
  const cookie = readCookie(req, DEVICE_COOKIE)
  const m = cookie && /^([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{32,128})$/.exec(cookie)
  return m ? { id: m[1], secret: m[2] } : undefined
}

/** the stored row of the cookie's id: 'known' (the secret matches), 'forged' (it does not) or 'new' */
async function lookup(db: Store, c: Cookie): Promise<'known' | 'forged' | 'new'> {
  const row = await db.selectFrom('device').select(['secret_hash', 'last_seen_at']).where('id', '=', c.id).executeTakeFirst()
  if (!row) return 'new'
  const a = Buffer.from(row.secret_hash)
  const b = Buffer.from(hashSecret(c.secret))
  if (a.length !== b.length || !timingSafeEqual(a, b)) return 'forged'
  if (Date.parse(row.last_seen_at) < Date.now() - TOUCH_EVERY_MS) {
    await db.updateTable('device').set({ last_seen_at: nowIso() }).where('id', '=', c.id).execute()
  }
  return 'known'
}

/** the stored device the request's cookie proves, or undefined (no cookie, unknown id, wrong secret) */
export async function readDevice(db: Store, req: Pick<Request, 'headers'>): Promise<Device | undefined> {
  const c = cookieOf(req)
  return c && (await lookup(db, c)) === 'known' ? c : undefined
}

/**
 * a page view's device: the stored one, the cookie's not yet stored one, or a new cookie that
 * goes out with the response. Nothing is written: the row waits for the first form post.
 */
export async function pageDevice(db: Store, req: Pick<Request, 'headers'>, res: Response, publicUrl: string): Promise<Device> {
  const c = cookieOf(req)
  if (c && (await lookup(db, c)) !== 'forged') return c
  const device = { id: randomBytes(16).toString('base64url'), secret: randomBytes(32).toString('base64url') }
  setCookie(res, DEVICE_COOKIE, `${device.id}.${device.secret}`, { publicUrl, maxAgeS: DEVICE_TTL_S })
  return device
}

/**
 * a form post's device, when its form token matches the cookie's secret: stored now if this is
 * the browser's first post. undefined for a missing or wrong token, or a cookie whose id is
 * stored with another secret.
 */
export async function formDevice(db: Store, req: Pick<Request, 'headers'>, token: unknown): Promise<Device | undefined> {
  const c = cookieOf(req)
  if (!c || !checkCsrf(c, token)) return undefined
  const state = await lookup(db, c)
  if (state === 'known') return c
  if (state === 'forged') return undefined
  // devices gone quiet are swept as new ones arrive, their accounts with them
  const stale = ago(DEVICE_TTL_S)
  const old = db.selectFrom('device').select('id').where('last_seen_at', '<', stale)
  await db.deleteFrom('device_account').where('device_id', 'in', old).execute()
  await db.deleteFrom('device').where('last_seen_at', '<', stale).execute()
  const now = nowIso()
  await db
    .insertInto('device')
    .values({ id: c.id, secret_hash: hashSecret(c.secret), created_at: now, last_seen_at: now })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute()
  // of two first posts racing with one id, both pass only when they carry the same secret
  return (await lookup(db, c)) === 'known' ? c : undefined
}

/** what a sign-in on the device proved: a password, a second factor ('keep': what the last one had) */
export type Proof = { remember: boolean; password: boolean; factor: boolean | 'keep' }

/**
 * records that `did` just signed in on the device, under the account's current credential
 * generation; a password sets password_at, a second factor factor_at (both to this sign-in)
 */
export async function rememberAccount(db: Store, deviceId: string, did: string, proof: Proof): Promise<void> {
  const now = nowIso()
  const prev = await db
    .selectFrom('device_account')
    .select(['authenticated_at', 'factor_at', 'password_at'])
    .where('device_id', '=', deviceId)
    .where('did', '=', did)
    .executeTakeFirst()
  const gen = await db.selectFrom('account').select('credential_gen').where('did', '=', did).executeTakeFirst()
  const hadFactor = !!prev?.factor_at && prev.factor_at >= prev.authenticated_at
  const factor = proof.factor === 'keep' ? hadFactor : proof.factor
  const values = {
    authenticated_at: now,
    remember: proof.remember ? 1 : 0,
    credential_gen: gen?.credential_gen ?? 0,
    password_at: proof.password ? now : (prev?.password_at ?? null),
    factor_at: factor ? now : (prev?.factor_at ?? null),
  }
  await db
    .insertInto('device_account')
    .values({ device_id: deviceId, did, created_at: now, ...values })
    .onConflict((oc) => oc.columns(['device_id', 'did']).doUpdateSet(values))
    .execute()
}

/** the accounts remembered on the device, most recently used first (deleted accounts left out) */
export async function deviceAccounts(db: Store, deviceId: string): Promise<DeviceAccount[]> {
  const rows = await accountRows(db, deviceId).where('device_account.remember', '=', 1).execute()
  return rows.map(toDeviceAccount)
}

export async function forgetAccount(db: Store, deviceId: string, did: string): Promise<void> {
  await db.deleteFrom('device_account').where('device_id', '=', deviceId).where('did', '=', did).execute()
}

/**
 * `did` as signed in on the device when its last sign-in here is at most `maxAgeS` old (at most
 * UNREMEMBERED_MAX_S when it was not remembered) and no password change or reset came after it,
 * else undefined. Whether a second factor was needed is the sign-in flow's rule (web/sign-in).
 */
export async function signedInAccount(db: Store, deviceId: string, did: string, maxAgeS: number): Promise<DeviceAccount | undefined> {
  const row = await accountRows(db, deviceId)
    .where('device_account.did', '=', did)
    .whereRef('device_account.credential_gen', '=', 'account.credential_gen')
    .executeTakeFirst()
  if (!row) return undefined
  const limit = row.remember ? maxAgeS : Math.min(maxAgeS, UNREMEMBERED_MAX_S)
  return row.authenticated_at >= ago(limit) ? toDeviceAccount(row) : undefined
}

function accountRows(db: Store, deviceId: string) {
  return db
    .selectFrom('device_account')
    .innerJoin('account', 'account.did', 'device_account.did')
    .select([
      'device_account.did',
      'account.handle',
      'device_account.remember',
      'device_account.authenticated_at',
      'device_account.password_at',
      'device_account.factor_at',
    ])
    .where('device_account.device_id', '=', deviceId)
    .where('account.status', '!=', 'deleted')
    .orderBy('device_account.authenticated_at', 'desc')
}

type Row = { did: string; handle: string; remember: number; authenticated_at: string; password_at: string | null; factor_at: string | null }
const toDeviceAccount = (r: Row): DeviceAccount => ({
  did: r.did,
  handle: r.handle,
  remember: r.remember === 1,
  authenticatedAt: r.authenticated_at,
  passwordAt: r.password_at,
  factorGiven: !!r.factor_at && r.factor_at >= r.authenticated_at,
})
