// Account rows and the session records that hang off them.
import { sql, type Selectable } from 'kysely'
import type { AccountTable } from '../db/index.js'
import { prepared } from '../db/prepared.js'
import { didDocAtHead } from '../identity/doc-cache.js'
import { didDocFor, pdsEndpoint } from '../identity/plc.js'

export { didDocFor }
import type { Store } from '../db/schema.js'
export type AccountRow = Selectable<AccountTable>
/** plc_cid: the CID of the account's newest PLC operation (null when there is none) */
export type AccountWithHead = AccountRow & { plc_cid: string | null }

export function getAccount(db: Store, did: string): Promise<AccountRow | undefined> {
  return db.selectFrom('account').selectAll().where('did', '=', did).executeTakeFirst()
}

const accountWithHead = prepared((db: Store, did: string) =>
  db
    .selectFrom('account')
    .selectAll('account')
    .select((eb) =>
      eb
        .selectFrom('plc_operation')
        .select('plc_operation.cid')
        .whereRef('plc_operation.did', '=', 'account.did')
        .orderBy('plc_operation.seq', 'desc')
        .limit(sql.lit(1))
        .as('plc_cid'),
    )
    .where('account.did', '=', did),
)

/** the account row read on every authenticated request, with what keys its DID document */
export async function getAccountWithHead(db: Store, did: string): Promise<AccountWithHead | undefined> {
  const [row] = await accountWithHead(db, did)
  return row
}

/** identifier of createSession: a DID, an email address or a handle */
export function findAccount(db: Store, identifier: string): Promise<AccountRow | undefined> {
  const id = identifier.trim()
  const q = db.selectFrom('account').selectAll()
  if (id.startsWith('did:')) return q.where('did', '=', id).executeTakeFirst()
  if (id.includes('@')) return q.where('email', '=', id.toLowerCase()).executeTakeFirst()
  // a deleted account's handle may belong to a newer account now
  return q.where('handle', '=', id.toLowerCase()).where('status', '!=', 'deleted').executeTakeFirst()
}

const insertRefreshRecord = prepared(
  (db: Store, jti: string, did: string, expiresAt: string, appPasswordName: string | null, createdAt: string) =>
    db.insertInto('refresh_token').values({
      jti,
      did,
      expires_at: expiresAt,
      app_password_name: appPasswordName,
      kind: 'session',
      dpop_jkt: null,
      scope: null,
      created_at: createdAt,
    }),
)

export async function storeRefreshRecord(db: Store, rec: { jti: string; did: string; expiresAt: string; appPasswordName?: string | null }) {
  await insertRefreshRecord(db, rec.jti, rec.did, rec.expiresAt, rec.appPasswordName ?? null, new Date().toISOString())
}

const refreshRecord = prepared((db: Store, jti: string) => db.selectFrom('refresh_token').selectAll().where('jti', '=', jti))

export async function getRefreshRecord(db: Store, jti: string) {
  return (await refreshRecord(db, jti))[0]
}

const deleteRefreshRecord = prepared((db: Store, jti: string) => db.deleteFrom('refresh_token').where('jti', '=', jti).returningAll())

/** conditional delete: of concurrent callers presenting one jti, exactly one gets the row */
export async function takeRefreshRecord(db: Store, jti: string) {
  return (await deleteRefreshRecord(db, jti))[0]
}

/** session responses carry didDoc only while it names this server: AtpAgent follows it */
export async function sessionDidDoc(db: Store, account: AccountRow | AccountWithHead, publicUrl: string) {
  const doc = 'plc_cid' in account ? await didDocAtHead(db, account.did, account.plc_cid) : await didDocFor(db, account.did)
  return doc && pdsEndpoint(doc) === publicUrl ? doc : undefined
}

/** the email fields of a response, for a caller allowed to read them */
export const emailFields = (account: AccountRow, show: boolean) =>
  show ? { ...(account.email ? { email: account.email } : {}), emailConfirmed: !!account.email_confirmed_at } : {}

/** sessions also say whether a password sign-in asks for a mailed code (only with a confirmed address) */
const emailAuthFactor = (account: AccountRow, show: boolean) =>
  show ? { emailAuthFactor: account.email_auth_factor === 1 && !!account.email && !!account.email_confirmed_at } : {}

/** fields every session response shares (createSession, getSession, refreshSession) */
export async function sessionView(db: Store, account: AccountRow | AccountWithHead, publicUrl: string, showEmail = true) {
  const didDoc = await sessionDidDoc(db, account, publicUrl)
  return {
    did: account.did,
    handle: account.handle,
    ...emailFields(account, showEmail),
    ...emailAuthFactor(account, showEmail),
    ...(didDoc ? { didDoc } : {}),
    active: account.status === 'active',
    ...(account.status === 'active' ? {} : { status: account.status }),
  }
}
