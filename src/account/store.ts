// Account rows and the session records that hang off them.
import type { Kysely, Selectable, Transaction } from 'kysely'
import type { AccountTable, Schema } from '../db/index.js'
import { latestOp, pdsEndpoint, renderDidDoc, type DidDocument } from '../identity/plc.js'

export type Store = Kysely<Schema> | Transaction<Schema>
export type AccountRow = Selectable<AccountTable>

export function getAccount(db: Store, did: string): Promise<AccountRow | undefined> {
  return db.selectFrom('account').selectAll().where('did', '=', did).executeTakeFirst()
}

/** identifier of createSession: a DID, an email address or a handle */
export function findAccount(db: Store, identifier: string): Promise<AccountRow | undefined> {
  const id = identifier.trim()
  const q = db.selectFrom('account').selectAll()
  if (id.startsWith('did:')) return q.where('did', '=', id).executeTakeFirst()
  if (id.includes('@')) return q.where('email', '=', id.toLowerCase()).executeTakeFirst()
  return q.where('handle', '=', id.toLowerCase()).executeTakeFirst()
}

export async function storeRefreshRecord(
  db: Store,
  rec: { jti: string; did: string; expiresAt: string; appPasswordName?: string | null },
) {
  await db
    .insertInto('refresh_token')
    .values({
      jti: rec.jti,
      did: rec.did,
      expires_at: rec.expiresAt,
      app_password_name: rec.appPasswordName ?? null,
      kind: 'session',
      dpop_jkt: null,
      scope: null,
      created_at: new Date().toISOString(),
    })
    .execute()
}

export function getRefreshRecord(db: Store, jti: string) {
  return db.selectFrom('refresh_token').selectAll().where('jti', '=', jti).executeTakeFirst()
}

/** conditional delete: of concurrent callers presenting one jti, exactly one gets the row */
export function takeRefreshRecord(db: Store, jti: string) {
  return db.deleteFrom('refresh_token').where('jti', '=', jti).returningAll().executeTakeFirst()
}

/** the account's DID document, rendered from its latest PLC operation */
export async function didDocFor(db: Store, did: string): Promise<DidDocument | undefined> {
  const latest = await latestOp(db, did)
  return latest && renderDidDoc(did, latest.op)
}

/** DECISIONS.md 23: session responses carry didDoc only while it names this server */
export async function sessionDidDoc(db: Store, did: string, publicUrl: string) {
  const doc = await didDocFor(db, did)
  return doc && pdsEndpoint(doc) === publicUrl ? doc : undefined
}

/** fields every session response shares (createSession, getSession, refreshSession) */
export async function sessionView(db: Store, account: AccountRow, publicUrl: string) {
  const didDoc = await sessionDidDoc(db, account.did, publicUrl)
  return {
    did: account.did,
    handle: account.handle,
    ...(account.email ? { email: account.email } : {}),
    emailConfirmed: !!account.email_confirmed_at,
    ...(didDoc ? { didDoc: didDoc as unknown as { [k: string]: unknown } } : {}),
    active: account.status === 'active',
    ...(account.status === 'active' ? {} : { status: account.status }),
  }
}
