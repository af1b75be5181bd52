// Account status transitions and their `#account` / `#tombstone` events, each in
// the transaction of the change. Updates are conditional on the status they leave, so a
// transition that lost a race does nothing and emits nothing.
import type { Db, Tx } from '../db/index.js'
import type { AccountStatus } from '../db/index.js'
import { syncCurrentCommit } from '../repo/sync.js'
import { xrpcError } from '../errors.js'
import { consumeEmailToken } from './email-tokens.js'
import { accountEvent, identityEvent, tombstoneEvent } from '../sequencer/index.js'
import type { Store } from '../db/schema.js'
import { endAccess } from './end-access.js'
import { deleteSpaceRepos, type NotifySpacesDeleted } from '../space/repo-write.js'

/** what a deletion needs: the store, and the space host's word to the syncers of the spaces it takes */
export type DeletionDeps = { db: Db; notifySpacesDeleted: NotifySpacesDeleted }

async function transition(trx: Store, did: string, from: AccountStatus[], to: AccountStatus, extra: { takedown_ref?: string | null } = {}) {
  const res = await trx
    .updateTable('account')
    .set({ status: to, status_changed_at: new Date().toISOString(), ...extra })
    .where('did', '=', did)
    .where('status', 'in', from)
    .executeTakeFirst()
  return Number(res.numUpdatedRows) > 0
}

/** active → deactivated; refresh tokens stay valid */
export const deactivate = (db: Db, did: string) =>
  db.transact(async (trx) => {
    const changed = await transition(trx, did, ['active'], 'deactivated')
    if (changed) await accountEvent(trx, did, 'deactivated')
    return changed
  })

/**
 * deactivated → active with `#account`, `#identity` and a `#sync` of the current commit, so a
 * relay learns the repository an account brought along; an active account is left alone
 */
export const activate = (db: Db, did: string) =>
  db.transact(async (trx) => {
    const changed = await transition(trx, did, ['deactivated'], 'active')
    if (changed) {
      await accountEvent(trx, did, 'active')
      const row = await trx.selectFrom('account').select('handle').where('did', '=', did).executeTakeFirst()
      await identityEvent(trx, did, row?.handle ?? undefined)
      await syncCurrentCommit(trx, did)
    }
    return changed
  })

/**
 * → deleted, record kept, its access ended; `#account` then `#tombstone` (call inside a
 * transaction). The syncers of the spaces it governed are told only once the deletion committed.
 */
export async function markDeleted(trx: Tx, did: string, notifySpacesDeleted: NotifySpacesDeleted) {
  const changed = await transition(trx, did, ['active', 'deactivated', 'takendown'], 'deleted')
  if (changed) {
    await endAccess(trx, did, 'deletion')
    const spaces = await deleteSpaceRepos(trx, did)
    if (spaces.length > 0) trx.onCommit(() => notifySpacesDeleted(spaces))
    await accountEvent(trx, did, 'deleted')
    await tombstoneEvent(trx, did)
  }
  return changed
}

/** administrative takedown of an active or deactivated account; its access ends, so lifting it signs nobody back in */
export const takedown = (db: Db, did: string, ref: string | null) =>
  db.transact(async (trx) => {
    const changed = await transition(trx, did, ['active', 'deactivated'], 'takendown', { takedown_ref: ref })
    if (changed) {
      await endAccess(trx, did, 'takedown')
      await accountEvent(trx, did, 'takendown')
    } else await trx.updateTable('account').set({ takedown_ref: ref }).where('did', '=', did).where('status', '=', 'takendown').execute()
    return changed
  })

/** lifts a takedown: takendown → active */
export const restore = (db: Db, did: string) =>
  db.transact(async (trx) => {
    const changed = await transition(trx, did, ['takendown'], 'active', { takedown_ref: null })
    if (changed) await accountEvent(trx, did, 'active')
    return changed
  })

/** the account's own deletion: consumes its delete-account token (a miss is 400 InvalidToken) and marks it deleted */
export async function deleteWithToken(deps: DeletionDeps, did: string, token: string) {
  await deps.db.transact(async (trx) => {
    const hit = await consumeEmailToken(trx, did, 'delete-account', token)
    if (!hit) throw xrpcError('InvalidToken', 'Token is invalid or expired', 400)
    await markDeleted(trx, did, deps.notifySpacesDeleted)
  })
}

/** the operator's deletion */
export const deleteAccount = (deps: DeletionDeps, did: string) => deps.db.transact((trx) => markDeleted(trx, did, deps.notifySpacesDeleted))
