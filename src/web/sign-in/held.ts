// Held sign-in steps, server-side. A correct password of an account with second factors (or a
// passkey whose last confirmation predates a password change) is held here, bound to the
// browser's device session, to one place (a pushed authorization request, or the account page)
// and to the account's credential generation, for a few minutes; the browser carries nothing
// that says "password done", so nothing a client sends can skip the rest. A step is taken once,
// by a conditional delete, and a password change or reset in between ends it.
import { sql } from 'kysely'
import type { Store } from '../../db/schema.js'

/** how long a held step waits */
export const STEP_TTL_S = 10 * 60
/** wrong answers at one step before the sign-in starts again */
export const STEP_MAX_FAILURES = 5
/** "send again" waits this long after the last mail of the step */
export const RESEND_AFTER_S = 30

/** where a sign-in happens: the device, and the place on it */
export type Place = { deviceId: string; place: string }
/** what the step waits for: a second factor after the password, or the password after a passkey */
export type Awaits = 'factor' | 'password'
export type HeldStep = Place & {
  did: string
  remember: boolean
  failures: number
  mailedAt: string | null
  awaits: Awaits
  passkeyId: string | null
}

const nowIso = () => new Date().toISOString()
const later = (s: number) => new Date(Date.now() + s * 1000).toISOString()
// the account's generation now, for a condition on the step row
const currentGen = () => sql<number>`(select credential_gen from account where account.did = sign_in_step.did)`

const where = <Q extends { where: (c: 'device_id' | 'request_uri', op: '=', v: string) => Q }>(q: Q, at: Place): Q =>
  q.where('device_id', '=', at.deviceId).where('request_uri', '=', at.place)

/** holds a step of `did` at the place, replacing an earlier one there */
export async function hold(
  db: Store,
  at: Place,
  s: { did: string; remember: boolean; awaits: Awaits; passkeyId?: string },
): Promise<HeldStep> {
  // expired steps of anybody go here, so the table stays small without a sweeper
  await db.deleteFrom('sign_in_step').where('expires_at', '<', nowIso()).execute()
  const account = await db.selectFrom('account').select('credential_gen').where('did', '=', s.did).executeTakeFirstOrThrow()
  const values = {
    did: s.did,
    remember: s.remember ? 1 : 0,
    failures: 0,
    mailed_at: null,
    created_at: nowIso(),
    expires_at: later(STEP_TTL_S),
    credential_gen: account.credential_gen,
    awaits: s.awaits,
    passkey_id: s.passkeyId ?? null,
  }
  await db
    .insertInto('sign_in_step')
    .values({ device_id: at.deviceId, request_uri: at.place, ...values })
    .onConflict((oc) => oc.columns(['device_id', 'request_uri']).doUpdateSet(values))
    .execute()
  return { ...at, did: s.did, remember: s.remember, failures: 0, mailedAt: null, awaits: s.awaits, passkeyId: s.passkeyId ?? null }
}

/** the live held step at the place: not expired, and no password change since it was held */
export async function heldStep(db: Store, at: Place): Promise<HeldStep | undefined> {
  const row = await where(db.selectFrom('sign_in_step').selectAll(), at)
    .where('expires_at', '>', nowIso())
    .where('credential_gen', '=', currentGen())
    .executeTakeFirst()
  if (!row) return undefined
  return {
    ...at,
    did: row.did,
    remember: row.remember === 1,
    failures: row.failures,
    mailedAt: row.mailed_at,
    awaits: row.awaits === 'password' ? 'password' : 'factor',
    passkeyId: row.passkey_id,
  }
}

/** counts a wrong answer; false when that was one too many and the step is gone */
export async function stepFailed(db: Store, step: HeldStep): Promise<boolean> {
  await where(
    db.updateTable('sign_in_step').set((eb) => ({ failures: eb('failures', '+', 1) })),
    step,
  ).execute()
  if (step.failures + 1 < STEP_MAX_FAILURES) return true
  await dropStep(db, step)
  return false
}

/** the step, taken once: of two racing right answers one continues, and none after a password change */
export async function takeStep(db: Store, step: HeldStep): Promise<boolean> {
  const res = await where(db.deleteFrom('sign_in_step'), step)
    .where('did', '=', step.did)
    .where('awaits', '=', step.awaits)
    .where('expires_at', '>', nowIso())
    .where('credential_gen', '=', currentGen())
    .executeTakeFirst()
  return res.numDeletedRows === 1n
}

export async function dropStep(db: Store, at: Place): Promise<void> {
  await where(db.deleteFrom('sign_in_step'), at).execute()
}

/**
 * claims the step's next mail: true (and recorded) unless the last one went out less than
 * RESEND_AFTER_S ago; `first` claims it whatever the time (the mail that opens the step)
 */
export async function claimMail(db: Store, step: HeldStep, first = false): Promise<boolean> {
  let q = where(db.updateTable('sign_in_step').set({ mailed_at: nowIso() }), step)
  if (!first) q = q.where((eb) => eb.or([eb('mailed_at', 'is', null), eb('mailed_at', '<', later(-RESEND_AFTER_S))]))
  return (await q.executeTakeFirst()).numUpdatedRows === 1n
}
