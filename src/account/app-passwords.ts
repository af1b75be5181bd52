// App passwords: server-generated `xxxx-xxxx-xxxx-xxxx` secrets, returned once,
// stored only as a hash under the account's shared app-password salt.
import { randomInt } from 'node:crypto'
import { isUniqueViolation } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { hashAppPassword, matchAppPassword, newAppPasswordSalt } from './password.js'
import type { Store } from '../db/schema.js'
import type { Db } from '../db/index.js'
import type { AppPasswordClaim } from './session-tokens.js'
import { endAppPasswordSessions } from './revocation.js'
import { noticeCredentialChange, type NoticeDeps } from './notices.js'

export const APP_PASSWORD_NAME = /^[a-zA-Z0-9._-]{4,32}$/
// a-z without l and o, digits 2-9: 32 symbols, none easily mistaken for another
const ALPHABET = 'abcdefghijkmnpqrstuvwxyz23456789'

/** randomInt draws without modulo bias */
export function generateAppPassword(): string {
  const group = () => Array.from({ length: 4 }, () => ALPHABET[randomInt(ALPHABET.length)]).join('')
  return [group(), group(), group(), group()].join('-')
}

export type AppPasswordView = { name: string; createdAt: string; privileged: boolean }

async function accountSalt(db: Store, did: string): Promise<string> {
  // set once, by whichever request gets there first; everyone then reads the same value
  await db
    .updateTable('account')
    .set({ app_password_salt: newAppPasswordSalt() })
    .where('did', '=', did)
    .where('app_password_salt', 'is', null)
    .execute()
  const row = await db.selectFrom('account').select('app_password_salt').where('did', '=', did).executeTakeFirstOrThrow()
  return row.app_password_salt!
}

/** a new app password (the owner is told); its plaintext is returned once and stored nowhere */
export async function createAppPassword(deps: NoticeDeps, did: string, name: string, privileged: boolean) {
  const { db } = deps
  if (!APP_PASSWORD_NAME.test(name)) {
    throw xrpcError('InvalidRequest', 'App password names are 4 to 32 characters of a-z A-Z 0-9 . _ -')
  }
  const password = generateAppPassword()
  const hash = await hashAppPassword(password, await accountSalt(db, did))
  const createdAt = new Date().toISOString()
  try {
    await db
      .insertInto('app_password')
      .values({ did, name, password_hash: hash, privileged: privileged ? 1 : 0, created_at: createdAt })
      .execute()
  } catch (err) {
    if (isUniqueViolation(err)) throw xrpcError('AppPasswordNameExists', 'An app password with this name already exists')
    throw err
  }
  await noticeCredentialChange(deps, did, { kind: 'app-password', name, privileged }, new Date(createdAt))
  return { name, password, createdAt, privileged }
}

export async function listAppPasswords(db: Store, did: string): Promise<AppPasswordView[]> {
  const rows = await db
    .selectFrom('app_password')
    .select(['name', 'created_at', 'privileged'])
    .where('did', '=', did)
    .orderBy('created_at', 'desc')
    .execute()
  return rows.map((r) => ({ name: r.name, createdAt: r.created_at, privileged: !!r.privileged }))
}

/** idempotent; the sessions signed in with it end too, access tokens included */
export async function revokeAppPassword(db: Db, did: string, name: string) {
  await endAppPasswordSessions(db, did, name)
}

/** the app password `password` is, for login; one scrypt whatever the number stored */
export async function matchLogin(
  db: Store,
  account: { did: string; app_password_salt: string | null },
  password: string,
): Promise<AppPasswordClaim | undefined> {
  const rows = await db
    .selectFrom('app_password')
    .select(['name', 'password_hash', 'privileged', 'created_at'])
    .where('did', '=', account.did)
    .execute()
  // no salt yet means no app password: hash anyway, so the answer costs the same
  const i = await matchAppPassword(
    password,
    account.app_password_salt ?? newAppPasswordSalt(),
    rows.map((r) => r.password_hash),
  )
  return i < 0 ? undefined : { name: rows[i].name, privileged: !!rows[i].privileged, at: rows[i].created_at }
}

/** the claim a refreshed session carries; none once the app password is revoked */
export async function appPasswordClaim(db: Store, did: string, name: string): Promise<AppPasswordClaim | undefined> {
  const row = await db
    .selectFrom('app_password')
    .select(['privileged', 'created_at'])
    .where('did', '=', did)
    .where('name', '=', name)
    .executeTakeFirst()
  return row && { name, privileged: !!row.privileged, at: row.created_at }
}
