// The sign-in page's second step, on the server's side. A correct password for an account with
// second factors is held here, bound to the browser's device session and to one pushed
// authorization request, for a few minutes; the form carries nothing that says "password done",
// so nothing a client sends can skip the factor. The held step is taken once, by a conditional
// delete, when the factor is right. A device's sign-in of an account counts without asking again
// only while its latest sign-in there included a second factor (or the account has none).
import type { Store } from '../db/schema.js'
import { factorsOf, needsSecondFactor } from '../account/factors/index.js'

/** how long a correct password waits for its second factor */
export const STEP_TTL_S = 10 * 60
/** wrong codes at one step before the password is asked again */
export const STEP_MAX_FAILURES = 5
/** "send again" waits this long after the last mail of the step */
export const RESEND_AFTER_S = 30

export type HeldStep = { deviceId: string; requestUri: string; did: string; remember: boolean; failures: number; mailedAt: string | null }

const nowIso = () => new Date().toISOString()
const later = (s: number) => new Date(Date.now() + s * 1000).toISOString()

/** holds a correct password of `did` for the device and request, replacing an earlier one there */
export async function holdPassword(
  db: Store,
  s: { deviceId: string; requestUri: string; did: string; remember: boolean },
): Promise<HeldStep> {
  // expired steps of anybody go here, so the table stays small without a sweeper
  await db.deleteFrom('sign_in_step').where('expires_at', '<', nowIso()).execute()
  const values = {
    did: s.did,
    remember: s.remember ? 1 : 0,
    failures: 0,
    mailed_at: null,
    created_at: nowIso(),
    expires_at: later(STEP_TTL_S),
  }
  await db
    .insertInto('sign_in_step')
    .values({ device_id: s.deviceId, request_uri: s.requestUri, ...values })
    .onConflict((oc) => oc.columns(['device_id', 'request_uri']).doUpdateSet(values))
    .execute()
  return { ...s, failures: 0, mailedAt: null }
}

/** the live held step of the device for the request, if any */
export async function heldStep(db: Store, deviceId: string, requestUri: string): Promise<HeldStep | undefined> {
  const row = await db
    .selectFrom('sign_in_step')
    .selectAll()
    .where('device_id', '=', deviceId)
    .where('request_uri', '=', requestUri)
    .where('expires_at', '>', nowIso())
    .executeTakeFirst()
  return row
    ? { deviceId, requestUri, did: row.did, remember: row.remember === 1, failures: row.failures, mailedAt: row.mailed_at }
    : undefined
}

/** counts a wrong factor; false when that was one too many and the step is gone */
export async function stepFailed(db: Store, step: HeldStep): Promise<boolean> {
  await db
    .updateTable('sign_in_step')
    .set((eb) => ({ failures: eb('failures', '+', 1) }))
    .where('device_id', '=', step.deviceId)
    .where('request_uri', '=', step.requestUri)
    .execute()
  if (step.failures + 1 < STEP_MAX_FAILURES) return true
  await dropStep(db, step)
  return false
}

/** the step, taken once: of two racing right answers, one continues */
export async function takeStep(db: Store, step: HeldStep): Promise<boolean> {
  const res = await db
    .deleteFrom('sign_in_step')
    .where('device_id', '=', step.deviceId)
    .where('request_uri', '=', step.requestUri)
    .where('did', '=', step.did)
    .where('expires_at', '>', nowIso())
    .executeTakeFirst()
  return res.numDeletedRows === 1n
}

export async function dropStep(db: Store, step: Pick<HeldStep, 'deviceId' | 'requestUri'>): Promise<void> {
  await db.deleteFrom('sign_in_step').where('device_id', '=', step.deviceId).where('request_uri', '=', step.requestUri).execute()
}

/**
 * claims the step's next mail: true (and recorded) unless the last one went out less than
 * RESEND_AFTER_S ago; `first` claims it whatever the time (the mail that opens the step)
 */
export async function claimMail(db: Store, step: HeldStep, first = false): Promise<boolean> {
  let q = db
    .updateTable('sign_in_step')
    .set({ mailed_at: nowIso() })
    .where('device_id', '=', step.deviceId)
    .where('request_uri', '=', step.requestUri)
  if (!first) q = q.where((eb) => eb.or([eb('mailed_at', 'is', null), eb('mailed_at', '<', later(-RESEND_AFTER_S))]))
  return (await q.executeTakeFirst()).numUpdatedRows === 1n
}

/** records that the device's latest sign-in of `did` (just recorded) included a second factor */
export async function recordFactor(db: Store, deviceId: string, did: string): Promise<void> {
  await db
    .updateTable('device_account')
    .set((eb) => ({ factor_at: eb.ref('authenticated_at') }))
    .where('device_id', '=', deviceId)
    .where('did', '=', did)
    .execute()
}

/** whether the device's latest sign-in of `did` included a second factor */
export async function factorGiven(db: Store, deviceId: string, did: string): Promise<boolean> {
  const row = await db
    .selectFrom('device_account')
    .select(['authenticated_at', 'factor_at'])
    .where('device_id', '=', deviceId)
    .where('did', '=', did)
    .executeTakeFirst()
  return !!row?.factor_at && row.factor_at >= row.authenticated_at
}

/** whether the device's sign-in of `did` is enough: the account has no second factor, or it was given */
export async function factorSatisfied(db: Store, deviceId: string, did: string): Promise<boolean> {
  if (await factorGiven(db, deviceId, did)) return true
  return !needsSecondFactor(await factorsOf(db, did))
}
