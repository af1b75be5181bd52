// What the admin API shows of an account (com.atproto.admin.defs#accountView).
import { sql } from 'kysely'
import { inviteCodeViews, invitedBy } from './invites.js'
import type { AccountRow } from './store.js'
import type { Store } from '../db/schema.js'
import { xrpcError } from '../errors.js'

export async function accountByDid(db: Store, did: string): Promise<AccountRow> {
  const account = await db.selectFrom('account').selectAll().where('did', '=', did).executeTakeFirst()
  if (!account) throw xrpcError('NotFound', 'Account not found')
  return account
}

/** as accountByDid, refusing a deleted account: the operator changes nothing on one */
export async function undeletedAccountByDid(db: Store, did: string): Promise<AccountRow> {
  const account = await accountByDid(db, did)
  if (account.status === 'deleted') throw xrpcError('InvalidRequest', 'The account is deleted')
  return account
}

export async function accountView(db: Store, a: AccountRow) {
  const invitedWith = await invitedBy(db, a.did)
  return {
    did: a.did,
    handle: a.handle,
    ...(a.email ? { email: a.email } : {}),
    indexedAt: a.created_at,
    ...(invitedWith ? { invitedBy: invitedWith } : {}),
    invites: await inviteCodeViews(db, { forAccount: a.did }),
    invitesDisabled: !!a.invites_disabled,
    ...(a.email_confirmed_at ? { emailConfirmedAt: a.email_confirmed_at } : {}),
    ...(a.invite_note ? { inviteNote: a.invite_note } : {}),
    ...(a.status === 'deactivated' && a.status_changed_at ? { deactivatedAt: a.status_changed_at } : {}),
  }
}

export function subjectStatus(a: AccountRow) {
  return {
    subject: { $type: 'com.atproto.admin.defs#repoRef', did: a.did },
    takedown: { applied: a.status === 'takendown', ...(a.takedown_ref ? { ref: a.takedown_ref } : {}) },
    deactivated: { applied: a.status === 'deactivated' },
  }
}

const likePrefix = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`) + '%'

/** accounts whose email address or handle starts with `term` (all without one), in DID order after `cursor` */
export async function searchAccountRows(db: Store, page: { term?: string; limit: number; cursor?: string }): Promise<AccountRow[]> {
  let q = db.selectFrom('account').selectAll().orderBy('did').limit(page.limit)
  if (page.term) {
    const p = likePrefix(page.term)
    q = q.where(sql<boolean>`(email like ${p} escape '\\' or handle like ${p} escape '\\')`)
  }
  if (page.cursor) q = q.where('did', '>', page.cursor)
  return q.execute()
}

/** the accounts among `dids` that exist */
export async function accountsByDid(db: Store, dids: string[]): Promise<AccountRow[]> {
  return dids.length ? db.selectFrom('account').selectAll().where('did', 'in', dids).execute() : []
}
