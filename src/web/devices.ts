// Device sessions: a cookie of a random id and a random secret names this browser; the server
// keeps only a hash of the secret, so a copy of the database signs nobody in. Each account that
// signed in on the device gets a row saying when its password (or another check) last succeeded
// and whether the person asked to be remembered here. Pages decide how recent a sign-in must be.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Request, Response } from 'express'
import type { Store } from '../db/schema.js'
import { readCookie, setCookie } from './cookies.js'

export const DEVICE_COOKIE = 'pds_device'
/** the cookie's lifetime; a device unseen this long is forgotten with its accounts */
export const DEVICE_TTL_S = 365 * 24 * 3600
/** a sign-in without "Remember this device" counts this long at most: the rest of one visit */
export const UNREMEMBERED_MAX_S = 15 * 60
// last_seen_at is rewritten at most this often: a page view should not always cost a write
const TOUCH_EVERY_MS = 24 * 3600 * 1000

export type Device = { id: string; secret: string }
export type DeviceAccount = { did: string; handle: string; remember: boolean; authenticatedAt: string }

const hashSecret = (secret: string) => createHash('sha256').update(secret).digest('base64url')
const nowIso = () => new Date().toISOString()
const ago = (s: number) => new Date(Date.now() - s * 1000).toISOString()

/** the device the request's cookie proves, or undefined (no cookie, unknown id, wrong secret) */
export async function readDevice(db: Store, req: Pick<Request, 'headers'>): Promise<Device | undefined> {
  const cookie = readCookie(req, DEVICE_COOKIE)
  const m = cookie && /^([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{32,128})$/.exec(cookie)
  if (!m) return undefined
  const [, id, secret] = m as unknown as [string, string, string]
  const row = await db.selectFrom('device').select(['secret_hash', 'last_seen_at']).where('id', '=', id).executeTakeFirst()
  if (!row) return undefined
  const a = Buffer.from(row.secret_hash)
  const b = Buffer.from(hashSecret(secret))
  if (a.length !== b.length || !timingSafeEqual(a, b)) return undefined
  if (Date.parse(row.last_seen_at) < Date.now() - TOUCH_EVERY_MS) {
    await db.updateTable('device').set({ last_seen_at: nowIso() }).where('id', '=', id).execute()
  }
  return { id, secret }
}

/** the request's device, or a new one whose cookie goes out with the response */
export async function ensureDevice(db: Store, req: Pick<Request, 'headers'>, res: Response, publicUrl: string): Promise<Device> {
  const known = await readDevice(db, req)
  if (known) return known
  // devices gone quiet are swept as new ones arrive, their accounts with them
  const stale = ago(DEVICE_TTL_S)
  const old = db.selectFrom('device').select('id').where('last_seen_at', '<', stale)
  await db.deleteFrom('device_account').where('device_id', 'in', old).execute()
  await db.deleteFrom('device').where('last_seen_at', '<', stale).execute()
  const device = { id: randomBytes(16).toString('base64url'), secret: randomBytes(32).toString('base64url') }
  const now = nowIso()
  await db
    .insertInto('device')
    .values({ id: device.id, secret_hash: hashSecret(device.secret), created_at: now, last_seen_at: now })
    .execute()
  setCookie(res, DEVICE_COOKIE, `${device.id}.${device.secret}`, { publicUrl, maxAgeS: DEVICE_TTL_S })
  return device
}

/** records that `did` just proved itself on the device (a password, a sign-up) */
export async function rememberAccount(db: Store, deviceId: string, did: string, opts: { remember: boolean }): Promise<void> {
  const now = nowIso()
  const values = { authenticated_at: now, remember: opts.remember ? 1 : 0 }
  const updated = await db
    .updateTable('device_account')
    .set(values)
    .where('device_id', '=', deviceId)
    .where('did', '=', did)
    .executeTakeFirst()
  if (Number(updated.numUpdatedRows) > 0) return
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
 * UNREMEMBERED_MAX_S when it was not remembered), else undefined
 */
export async function signedInAccount(db: Store, deviceId: string, did: string, maxAgeS: number): Promise<DeviceAccount | undefined> {
  const row = await accountRows(db, deviceId).where('device_account.did', '=', did).executeTakeFirst()
  if (!row) return undefined
  const limit = row.remember ? maxAgeS : Math.min(maxAgeS, UNREMEMBERED_MAX_S)
  return row.authenticated_at >= ago(limit) ? toDeviceAccount(row) : undefined
}

function accountRows(db: Store, deviceId: string) {
  return db
    .selectFrom('device_account')
    .innerJoin('account', 'account.did', 'device_account.did')
    .select(['device_account.did', 'account.handle', 'device_account.remember', 'device_account.authenticated_at'])
    .where('device_account.device_id', '=', deviceId)
    .where('account.status', '!=', 'deleted')
    .orderBy('device_account.authenticated_at', 'desc')
}

const toDeviceAccount = (r: { did: string; handle: string; remember: number; authenticated_at: string }): DeviceAccount => ({
  did: r.did,
  handle: r.handle,
  remember: r.remember === 1,
  authenticatedAt: r.authenticated_at,
})
