// Invite codes: created by the operator, spent at createAccount by a conditional decrement in the
// account's transaction, so two sign-ups racing for the last use cannot both win.
import { randomBytes } from 'node:crypto'
import { base32 } from 'multiformats/bases/base32'
import { sql } from 'kysely'
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'
import type { Store } from '../db/schema.js'

const part = () => base32.baseEncode(randomBytes(4)).slice(0, 5)
/** `<host-with-dashes>-xxxxx-xxxxx`, as the reference PDS writes them */
export const newInviteCode = (hostname: string) => `${hostname.replaceAll('.', '-')}-${part()}-${part()}`

export const ADMIN_ACCOUNT = 'admin'

export async function createInviteCodes(
  db: Store,
  opts: { hostname: string; useCount: number; forAccount?: string; count?: number; createdBy?: string },
): Promise<string[]> {
  if (!Number.isInteger(opts.useCount) || opts.useCount < 1 || opts.useCount > 10_000) {
    throw xrpcError('InvalidRequest', 'useCount must be between 1 and 10000')
  }
  const count = opts.count ?? 1
  if (!Number.isInteger(count) || count < 1 || count > 1000) throw xrpcError('InvalidRequest', 'codeCount must be between 1 and 1000')
  const now = new Date().toISOString()
  const codes = Array.from({ length: count }, () => newInviteCode(opts.hostname))
  await db
    .insertInto('invite_code')
    .values(
      codes.map((code) => ({
        code,
        use_count: opts.useCount,
        remaining: opts.useCount,
        disabled: 0,
        for_account: opts.forAccount ?? ADMIN_ACCOUNT,
        created_by: opts.createdBy ?? ADMIN_ACCOUNT,
        created_at: now,
      })),
    )
    .execute()
  return codes
}

/** spends one use of `code` for `did`; call inside the account-creation transaction */
export async function useInviteCode(trx: Store, code: string, did: string) {
  const invalid = () => xrpcError('InvalidInviteCode', 'Provided invite code not available')
  const spent = await trx
    .updateTable('invite_code')
    .set((eb) => ({ remaining: eb('remaining', '-', 1) }))
    .where('code', '=', code)
    .where('remaining', '>', 0)
    .where('disabled', '=', 0)
    .returning('for_account')
    .executeTakeFirst()
  if (!spent) throw invalid()
  // codes of an account whose invites the operator disabled are not honoured
  if (spent.for_account !== ADMIN_ACCOUNT) {
    const owner = await trx.selectFrom('account').select('invites_disabled').where('did', '=', spent.for_account).executeTakeFirst()
    if (owner?.invites_disabled) throw invalid()
  }
  await trx.insertInto('invite_code_use').values({ code, used_by: did, used_at: new Date().toISOString() }).execute()
}

export type InviteCodeView = {
  code: string
  available: number
  disabled: boolean
  forAccount: string
  createdBy: string
  createdAt: string
  uses: { usedBy: string; usedAt: string }[]
}

/** views of the given codes (or of every code `forAccount` owns), with their uses */
export async function inviteCodeViews(db: Store, by: { forAccount?: string; codes?: string[] }): Promise<InviteCodeView[]> {
  let q = db.selectFrom('invite_code').selectAll().orderBy('created_at', 'desc').orderBy('code')
  if (by.forAccount !== undefined) q = q.where('for_account', '=', by.forAccount)
  if (by.codes !== undefined) {
    if (by.codes.length === 0) return []
    q = q.where('code', 'in', by.codes)
  }
  const rows = await q.execute()
  if (rows.length === 0) return []
  const uses = await db
    .selectFrom('invite_code_use')
    .selectAll()
    .where(
      'code',
      'in',
      rows.map((r) => r.code),
    )
    .orderBy('used_at')
    .execute()
  return rows.map((r) => ({
    code: r.code,
    // the lexicon's `available` is the total; clients subtract the uses
    available: r.use_count,
    disabled: !!r.disabled,
    forAccount: r.for_account,
    createdBy: r.created_by,
    createdAt: r.created_at,
    uses: uses.filter((u) => u.code === r.code).map((u) => ({ usedBy: u.used_by, usedAt: u.used_at })),
  }))
}

/** the code `did` signed up with, if any */
export async function invitedBy(db: Store, did: string): Promise<InviteCodeView | undefined> {
  const use = await db.selectFrom('invite_code_use').select('code').where('used_by', '=', did).executeTakeFirst()
  if (!use) return undefined
  return (await inviteCodeViews(db, { codes: [use.code] }))[0]
}

/** the given codes, and every code the given accounts own, stop being honoured */
export async function disableInviteCodes(db: Db, by: { codes: string[]; accounts: string[] }): Promise<void> {
  await db.transact(async (trx) => {
    if (by.codes.length) await trx.updateTable('invite_code').set({ disabled: 1 }).where('code', 'in', by.codes).execute()
    if (by.accounts.length) await trx.updateTable('invite_code').set({ disabled: 1 }).where('for_account', 'in', by.accounts).execute()
  })
}

/** whether the codes `did` owns are honoured; `note` replaces the operator's note when given */
export async function setAccountInvitesDisabled(db: Store, did: string, disabled: boolean, note?: string): Promise<void> {
  await db
    .updateTable('account')
    .set({ invites_disabled: disabled ? 1 : 0, ...(note !== undefined ? { invite_note: note } : {}) })
    .where('did', '=', did)
    .execute()
}

/**
 * every code, newest first (`recent`) or most used first (`usage`), a page after `cursor`: the
 * last code's sort key and code, as `<key>::<code>`
 */
export async function listInviteCodes(db: Store, page: { sort: string; limit: number; cursor?: string }) {
  const { sort, limit } = page
  if (sort !== 'recent' && sort !== 'usage') throw xrpcError('InvalidRequest', 'sort is recent or usage')
  // uses so far: remaining counts down from use_count at each sign-up
  const key = sort === 'recent' ? sql<string>`created_at` : sql<number>`(use_count - remaining)`
  let q = db
    .selectFrom('invite_code')
    .select(['code', 'created_at', sql<number>`(use_count - remaining)`.as('used')])
    .orderBy(key, 'desc')
    .orderBy('code', 'desc')
    .limit(limit)
  if (page.cursor) {
    const at = page.cursor.lastIndexOf('::')
    const [k, code] = [page.cursor.slice(0, at), page.cursor.slice(at + 2)]
    const value = sort === 'usage' ? Number(k) : k
    if (at < 0 || (sort === 'usage' && !Number.isSafeInteger(value))) throw xrpcError('InvalidRequest', 'Malformed cursor')
    q = q.where(sql<boolean>`(${key} < ${value} or (${key} = ${value} and code < ${code}))`)
  }
  const rows = await q.execute()
  const views = new Map((await inviteCodeViews(db, { codes: rows.map((r) => r.code) })).map((v) => [v.code, v]))
  const last = rows[rows.length - 1]
  return {
    codes: rows.map((r) => views.get(r.code)!),
    cursor: rows.length === limit ? `${sort === 'recent' ? last.created_at : Number(last.used)}::${last.code}` : undefined,
  }
}

/** `count` codes for each of `accounts` (ADMIN_ACCOUNT: the operator's own), all or none */
export async function createInviteCodesFor(
  db: Db,
  accounts: string[],
  opts: { hostname: string; useCount: number; count?: number },
): Promise<{ account: string; codes: string[] }[]> {
  return db.transact(async (trx) => {
    const out: { account: string; codes: string[] }[] = []
    for (const account of accounts) {
      const forAccount = account === ADMIN_ACCOUNT ? undefined : account
      out.push({ account, codes: await createInviteCodes(trx, { ...opts, forAccount }) })
    }
    return out
  })
}
